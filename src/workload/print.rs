//! Text forms of a workload: readable text, the canonical text and its key.

use super::check::op_symbol;
use super::model::{Compute, Scalar, TensorDef, Workload};
use super::FORMAT_VERSION;
use crate::ir::{BinOp, UnOp};
use sha2::{Digest, Sha256};
use std::fmt::Write;

impl Workload {
    /// Readable text in the workload language that parses back to an equal workload:
    /// original names, every extent and dtype written out.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if self.name != "main" {
            let _ = writeln!(out, "workload {}", self.name);
        }
        out.push_str(&self.render(
            |i| self.tensors[i].name.clone(),
            |c, k| {
                c.all_axes()
                    .nth(k)
                    .map_or_else(|| format!("axis{k}"), |a| a.name.clone())
            },
        ));
        out
    }

    /// The canonical text: the format header `tessel-workload v1`, then the workload with
    /// tensors named `t0, t1, ...` in declaration order, each stage's spatial axes named
    /// `i0, i1, ...` (left-hand-side order) and reduction axes `r0, r1, ...`, every extent
    /// and dtype explicit and floats printed so that they round-trip. The workload's own
    /// name is left out: two spellings of one computation share one canonical text.
    pub fn canonical_text(&self) -> String {
        let mut out = format!("tessel-workload v{FORMAT_VERSION}\n");
        out.push_str(&self.render(
            |i| format!("t{i}"),
            |c, k| {
                if k < c.axes.len() {
                    format!("i{k}")
                } else {
                    format!("r{}", k - c.axes.len())
                }
            },
        ));
        out
    }

    /// The workload key: lowercase hex SHA-256 of [`Workload::canonical_text`].
    pub fn key(&self) -> String {
        let digest = Sha256::digest(self.canonical_text().as_bytes());
        digest.iter().fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    /// Inputs and stages, one per line, with the given tensor and axis names.
    fn render(
        &self,
        tensor: impl Fn(usize) -> String,
        axis: impl Fn(&Compute, usize) -> String,
    ) -> String {
        let mut out = String::new();
        for (i, t) in self.tensors.iter().enumerate() {
            let dims = t
                .shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let name = tensor(i);
            let dt = t.dtype.short();
            let _ = match &t.def {
                TensorDef::Input => writeln!(out, "input {name}: {dt}[{dims}]"),
                TensorDef::Concat { inputs, axis } => {
                    let ins = inputs
                        .iter()
                        .map(|&x| tensor(x))
                        .collect::<Vec<_>>()
                        .join(", ");
                    writeln!(out, "{name}: {dt} = concat({ins}, axis={axis})")
                }
                TensorDef::Compute(c) => {
                    let decl = |k: usize, e: i64| format!("{}: {e}", axis(c, k));
                    let lhs = c
                        .axes
                        .iter()
                        .enumerate()
                        .map(|(k, a)| decl(k, a.extent))
                        .collect::<Vec<_>>();
                    let value = scalar(&c.value, &tensor, &|k| axis(c, k));
                    let rhs = match &c.reduce {
                        None => value,
                        Some(r) => {
                            let n = c.axes.len();
                            let rax = r
                                .axes
                                .iter()
                                .enumerate()
                                .map(|(k, a)| decl(n + k, a.extent));
                            format!(
                                "{}({value}, {})",
                                r.op.name(),
                                rax.collect::<Vec<_>>().join(", ")
                            )
                        }
                    };
                    writeln!(out, "{name}[{}]: {dt} = {rhs}", lhs.join(", "))
                }
            };
        }
        out
    }
}

/// Prints an expression with the fewest parentheses that parse back to the same tree.
pub(crate) fn scalar(
    e: &Scalar,
    tensor: &dyn Fn(usize) -> String,
    axis: &dyn Fn(usize) -> String,
) -> String {
    let mut out = String::new();
    write_scalar(&mut out, e, 0, tensor, axis);
    out
}

const ATOM: u8 = 7;
const UNARY: u8 = 6;

/// Binding strength of a binary operator written infix (`None`: written as a call).
fn prec(op: BinOp) -> Option<u8> {
    match op {
        BinOp::Or => Some(1),
        BinOp::And => Some(2),
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => Some(3),
        BinOp::Add | BinOp::Sub => Some(4),
        BinOp::Mul | BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod => Some(5),
        BinOp::Min | BinOp::Max => None,
    }
}

fn write_scalar(
    out: &mut String,
    e: &Scalar,
    min_prec: u8,
    tensor: &dyn Fn(usize) -> String,
    axis: &dyn Fn(usize) -> String,
) {
    let own = match e {
        Scalar::Bin(op, ..) => prec(*op).unwrap_or(ATOM),
        Scalar::Un(UnOp::Neg | UnOp::Not, _) => UNARY,
        _ => ATOM,
    };
    let paren = own < min_prec;
    if paren {
        out.push('(');
    }
    let list = |out: &mut String, items: &[&Scalar]| {
        for (k, s) in items.iter().enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            write_scalar(out, s, 0, tensor, axis);
        }
    };
    match e {
        Scalar::Int(v) => {
            let _ = write!(out, "{v}");
        }
        Scalar::Float(v) => {
            let _ = write!(out, "{v:?}");
        }
        Scalar::Axis(k) => out.push_str(&axis(*k)),
        Scalar::Access(t, idx) => {
            out.push_str(&tensor(*t));
            out.push('[');
            list(out, &idx.iter().collect::<Vec<_>>());
            out.push(']');
        }
        Scalar::Bin(BinOp::Max, a, b) if **b == Scalar::Float(0.0) => {
            out.push_str("relu(");
            write_scalar(out, a, 0, tensor, axis);
            out.push(')');
        }
        Scalar::Bin(op, a, b) => match prec(*op) {
            Some(p) => {
                write_scalar(out, a, p, tensor, axis);
                let _ = write!(out, " {} ", op_symbol(*op));
                write_scalar(out, b, p + 1, tensor, axis);
            }
            None => {
                out.push_str(op_symbol(*op));
                out.push('(');
                list(out, &[a, b]);
                out.push(')');
            }
        },
        Scalar::Un(op @ (UnOp::Neg | UnOp::Not), a) => {
            out.push(if *op == UnOp::Neg { '-' } else { '!' });
            write_scalar(out, a, UNARY, tensor, axis);
        }
        Scalar::Un(op, a) => {
            out.push_str(op.name());
            out.push('(');
            list(out, &[a]);
            out.push(')');
        }
        Scalar::Select(c, t, f) => {
            out.push_str("if_then_else(");
            list(out, &[c, t, f]);
            out.push(')');
        }
        Scalar::Cast(d, a) => {
            let _ = write!(out, "cast({}, ", d.short());
            write_scalar(out, a, 0, tensor, axis);
            out.push(')');
        }
    }
    if paren {
        out.push(')');
    }
}
