//! The printer: TVMScript-like text, close to what the seed articles show.
//!
//! ```text
//! @T.prim_func
//! def main(A: T.Buffer((1024, 1024), "float32"), ...):
//!     C_local = T.alloc_buffer((1024, 1024), scope="local")
//!     for i_0 in T.thread_binding(16, thread="blockIdx.y"):
//!         for k_0, k_1 in T.grid(128, 8):
//!             with T.block("C"):
//!                 vi = T.axis.spatial(1024, i_0 * 64 + i_1 * 8 + i_2)
//!                 ...
//! ```
//!
//! Perfectly nested serial loops without annotations print as one `T.grid`; a block whose
//! bindings are exactly its enclosing loops prints with `T.axis.remap`.

use super::expr::{BinOp, DType, Expr, UnOp};
use super::ids::{BlockId, LoopId};
use super::program::{Block, IterKind, LoopKind, Node, Program, Store};
use std::fmt::Write;

/// Prints the whole program.
pub fn print_program(p: &Program) -> String {
    let mut out = String::new();
    write_program(p, &mut out);
    out
}

/// Writes the whole program to `out` as [`print_program`] prints it (a digest of the text
/// needs no string of it).
pub fn write_program<W: Write>(p: &Program, out: &mut W) {
    let _ = out.write_str("@T.prim_func\n");
    let params: Vec<String> = p
        .params
        .iter()
        .map(|b| {
            let buf = p.buffer(*b);
            format!(
                "{}: T.Buffer({}, \"{}\")",
                buf.name,
                shape_tuple(&buf.shape),
                buf.dtype.name()
            )
        })
        .collect();
    let _ = writeln!(out, "def {}({}):", p.name, params.join(", "));
    for b in &p.allocs {
        let buf = p.buffer(*b);
        let _ = write!(
            out,
            "    {} = T.alloc_buffer({}",
            buf.name,
            shape_tuple(&buf.shape)
        );
        if buf.dtype != DType::F32 {
            let _ = write!(out, ", \"{}\"", buf.dtype.name());
        }
        let _ = writeln!(out, ", scope=\"{}\")", buf.scope.name());
    }
    for n in &p.root {
        print_node(p, *n, 1, out);
    }
}

fn shape_tuple(shape: &[i64]) -> String {
    if shape.len() == 1 {
        format!("({},)", shape[0])
    } else {
        format!(
            "({})",
            shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn indent<W: Write>(out: &mut W, depth: usize) {
    for _ in 0..depth {
        let _ = out.write_str("    ");
    }
}

fn is_plain_serial(p: &Program, l: LoopId) -> bool {
    let lp = p.lp(l);
    lp.kind == LoopKind::Serial && lp.annotations.is_empty()
}

fn print_node<W: Write>(p: &Program, n: Node, depth: usize, out: &mut W) {
    match n {
        Node::Block(b) => print_block(p, b, depth, out),
        Node::Loop(l) => {
            let lp = p.lp(l);
            indent(out, depth);
            if is_plain_serial(p, l) {
                // Gather a T.grid of perfectly nested plain serial loops.
                let mut chain = vec![l];
                let mut cur = l;
                while let [Node::Loop(c)] = p.lp(cur).body.as_slice() {
                    if !is_plain_serial(p, *c) {
                        break;
                    }
                    chain.push(*c);
                    cur = *c;
                }
                let names: Vec<&str> = chain.iter().map(|c| p.loop_name(*c)).collect();
                if chain.len() == 1 {
                    let _ = writeln!(out, "for {} in range({}):", names[0], lp.extent);
                } else {
                    let exts: Vec<String> =
                        chain.iter().map(|c| p.lp(*c).extent.to_string()).collect();
                    let _ = writeln!(
                        out,
                        "for {} in T.grid({}):",
                        names.join(", "),
                        exts.join(", ")
                    );
                }
                for c in &p.lp(cur).body {
                    print_node(p, *c, depth + 1, out);
                }
                return;
            }
            let name = p.loop_name(l);
            let ann = if lp.annotations.is_empty() {
                String::new()
            } else {
                let items: Vec<String> = lp
                    .annotations
                    .iter()
                    .map(|(k, v)| format!("\"{k}\": {v}"))
                    .collect();
                format!(", annotations={{{}}}", items.join(", "))
            };
            let head = match lp.kind {
                LoopKind::Serial => format!("T.serial({}{ann})", lp.extent),
                LoopKind::Parallel => format!("T.parallel({}{ann})", lp.extent),
                LoopKind::Vectorized => format!("T.vectorized({}{ann})", lp.extent),
                LoopKind::Unrolled => format!("T.unroll({}{ann})", lp.extent),
                LoopKind::Thread(tag) => {
                    format!("T.thread_binding({}, thread=\"{tag}\"{ann})", lp.extent)
                }
            };
            let _ = writeln!(out, "for {name} in {head}:");
            for c in &lp.body {
                print_node(p, *c, depth + 1, out);
            }
        }
    }
}

fn print_block<W: Write>(p: &Program, b: BlockId, depth: usize, out: &mut W) {
    let blk = p.block(b);
    indent(out, depth);
    let _ = writeln!(out, "with T.block(\"{}\"):", blk.name);
    let d = depth + 1;
    // Bindings: remap when each binding is exactly an enclosing loop of the same extent.
    let remap = !blk.iter_vars.is_empty()
        && blk
            .iter_vars
            .iter()
            .zip(&blk.bindings)
            .all(|(iv, bind)| match bind {
                Expr::Var(v) => p
                    .loop_of_var(*v)
                    .is_some_and(|l| p.lp(l).extent == iv.extent),
                _ => false,
            });
    if remap {
        let names: Vec<&str> = blk.iter_vars.iter().map(|iv| p.var_name(iv.var)).collect();
        let kinds: String = blk
            .iter_vars
            .iter()
            .map(|iv| {
                if iv.kind == IterKind::Spatial {
                    'S'
                } else {
                    'R'
                }
            })
            .collect();
        let binds: Vec<String> = blk.bindings.iter().map(|e| expr_str(p, e)).collect();
        indent(out, d);
        let _ = writeln!(
            out,
            "{} = T.axis.remap(\"{kinds}\", [{}])",
            names.join(", "),
            binds.join(", ")
        );
    } else {
        for (iv, bind) in blk.iter_vars.iter().zip(&blk.bindings) {
            indent(out, d);
            let kind = if iv.kind == IterKind::Spatial {
                "spatial"
            } else {
                "reduce"
            };
            let _ = writeln!(
                out,
                "{} = T.axis.{kind}({}, {})",
                p.var_name(iv.var),
                iv.extent,
                expr_str(p, bind)
            );
        }
    }
    if let Some(pred) = &blk.predicate {
        indent(out, d);
        let _ = writeln!(out, "T.where({})", expr_str(p, pred));
    }
    let reads: Vec<String> = p
        .block_reads(b)
        .iter()
        .map(|(buf, idx)| access_str(p, *buf, idx))
        .collect();
    indent(out, d);
    let _ = writeln!(out, "T.reads({})", reads.join(", "));
    indent(out, d);
    let _ = writeln!(
        out,
        "T.writes({})",
        access_str(p, blk.body.buffer, &blk.body.indices)
    );
    let align: Vec<String> = p
        .buffer(blk.body.buffer)
        .align
        .iter()
        .map(|a| format!("[0, {}, {}, {}]", a.axis, a.factor, a.offset))
        .collect();
    let swizzle = p.buffer(blk.body.buffer).swizzle;
    if !align.is_empty() || swizzle || !blk.annotations.is_empty() {
        let mut items: Vec<String> = blk
            .annotations
            .iter()
            .map(|(k, v)| format!("\"{k}\": {v}"))
            .collect();
        if !align.is_empty() {
            items.push(format!("\"buffer_dim_align\": [{}]", align.join(", ")));
        }
        if swizzle {
            items.push("\"buffer_swizzle\": 128".to_string());
        }
        indent(out, d);
        let _ = writeln!(out, "T.block_attr({{{}}})", items.join(", "));
    }
    if let Some(init) = &blk.init {
        indent(out, d);
        let _ = out.write_str("with T.init():\n");
        print_store(p, blk, init, d + 1, out);
    }
    print_store(p, blk, &blk.body, d, out);
}

fn print_store<W: Write>(p: &Program, _blk: &Block, s: &Store, depth: usize, out: &mut W) {
    indent(out, depth);
    let dtype = p.buffer(s.buffer).dtype;
    let _ = writeln!(
        out,
        "{} = {}",
        access_str(p, s.buffer, &s.indices),
        value_str(p, &s.value, dtype)
    );
}

fn access_str(p: &Program, buf: super::ids::BufferId, idx: &[Expr]) -> String {
    let parts: Vec<String> = idx.iter().map(|e| expr_str(p, e)).collect();
    format!("{}[{}]", p.buffer(buf).name, parts.join(", "))
}

/// Prints an expression (index or value) with variable names and Python precedence.
pub fn expr_str(p: &Program, e: &Expr) -> String {
    value_str(p, e, DType::F32)
}

fn value_str(p: &Program, e: &Expr, dtype: DType) -> String {
    let mut s = String::new();
    write_expr(p, e, dtype, 0, &mut s);
    s
}

/// Python precedence levels (higher binds tighter).
fn prec(op: BinOp) -> u8 {
    match op {
        BinOp::Or => 1,
        BinOp::And => 2,
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => 4,
        BinOp::Add | BinOp::Sub => 5,
        BinOp::Mul | BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod => 6,
        BinOp::Min | BinOp::Max => 9,
    }
}

fn op_str(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::FloorDiv => "//",
        BinOp::FloorMod => "%",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::And => "and",
        BinOp::Or => "or",
        BinOp::Min => "T.min",
        BinOp::Max => "T.max",
    }
}

fn float_str(v: f64, dtype: DType) -> String {
    let t = if dtype.is_float() {
        dtype.name()
    } else {
        "float32"
    };
    if v.is_infinite() {
        return format!("T.{t}(\"{}inf\")", if v < 0.0 { "-" } else { "" });
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("T.{t}({})", v as i64)
    } else {
        format!("T.{t}({v:?})")
    }
}

fn write_expr(p: &Program, e: &Expr, dtype: DType, ctx: u8, s: &mut String) {
    match e {
        Expr::Int(v) => {
            if *v < 0 && ctx > 5 {
                let _ = write!(s, "({v})");
            } else {
                let _ = write!(s, "{v}");
            }
        }
        Expr::Float(v) => s.push_str(&float_str(*v, dtype)),
        Expr::Var(v) => s.push_str(p.var_name(*v)),
        Expr::Load(b, idx) => s.push_str(&access_str(p, *b, idx)),
        Expr::Bin(op @ (BinOp::Min | BinOp::Max), a, b) => {
            s.push_str(op_str(*op));
            s.push('(');
            write_expr(p, a, dtype, 0, s);
            s.push_str(", ");
            write_expr(p, b, dtype, 0, s);
            s.push(')');
        }
        Expr::Bin(op, a, b) => {
            let pr = prec(*op);
            let paren = pr < ctx;
            if paren {
                s.push('(');
            }
            // Comparisons do not chain in our output: give both sides a tighter context.
            let (lc, rc) = if op.is_comparison() {
                (pr + 1, pr + 1)
            } else {
                (pr, pr + 1)
            };
            write_expr(p, a, dtype, lc, s);
            let _ = write!(s, " {} ", op_str(*op));
            write_expr(p, b, dtype, rc, s);
            if paren {
                s.push(')');
            }
        }
        Expr::Un(UnOp::Neg, a) => {
            let paren = ctx > 7;
            if paren {
                s.push('(');
            }
            s.push('-');
            write_expr(p, a, dtype, 8, s);
            if paren {
                s.push(')');
            }
        }
        Expr::Un(UnOp::Not, a) => {
            let paren = ctx > 3;
            if paren {
                s.push('(');
            }
            s.push_str("not ");
            write_expr(p, a, dtype, 3, s);
            if paren {
                s.push(')');
            }
        }
        Expr::Un(op, a) => {
            let _ = write!(s, "T.{}(", op.name());
            write_expr(p, a, dtype, 0, s);
            s.push(')');
        }
        Expr::Select(c, a, b) => {
            s.push_str("T.if_then_else(");
            write_expr(p, c, dtype, 0, s);
            s.push_str(", ");
            write_expr(p, a, dtype, 0, s);
            s.push_str(", ");
            write_expr(p, b, dtype, 0, s);
            s.push(')');
        }
        Expr::Cast(t, a) => {
            let _ = write!(s, "T.Cast(\"{}\", ", t.name());
            write_expr(p, a, *t, 0, s);
            s.push(')');
        }
    }
}
