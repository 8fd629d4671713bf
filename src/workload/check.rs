//! Semantic checks: names, axis extents, types and bounds; statements to a [`Workload`].
//!
//! Per compute stage, in order:
//! 1. axis names are unique within the stage and are not tensor names;
//! 2. extents: declared extents and the extents implied by bare-axis indices outside any
//!    `if_then_else` branch are collected in source order; two different extents for one
//!    axis are an error at the second. Bare-axis indices inside branches then fill in the
//!    axes still unknown; an axis with no extent after that is an error;
//! 3. types: every sub-expression is an index, an integer constant, a value (with an
//!    optional dtype) or a condition, and operators only combine compatible ones;
//! 4. bounds: every access outside an `if_then_else` branch stays inside its tensor over
//!    the axis domains, by interval arithmetic.

use super::lower::index_to_ir;
use super::model::{Axis, Compute, Reduce, Scalar, Tensor, TensorDef, Workload};
use super::parser::{AxisDecl, PExpr, PKind, Rhs, Stmt};
use super::print;
use super::{Pos, Result, WorkloadError};
use crate::ir::interval::{bound_with, Interval};
use crate::ir::{BinOp, DType, UnOp, VarId};

/// Checks parsed statements and builds the workload.
pub(crate) fn check(stmts: Vec<Stmt>) -> Result<Workload> {
    let mut w = Workload {
        name: "main".to_string(),
        tensors: Vec::new(),
    };
    let mut decl_pos: Vec<Pos> = Vec::new();
    for (k, stmt) in stmts.into_iter().enumerate() {
        let (name, pos) = match &stmt {
            Stmt::Workload { name, pos } => {
                if k != 0 {
                    return Err(WorkloadError::at(
                        *pos,
                        "'workload NAME' must be the first statement",
                    ));
                }
                w.name = name.clone();
                continue;
            }
            Stmt::Input { name, pos, .. }
            | Stmt::Compute { name, pos, .. }
            | Stmt::Concat { name, pos, .. } => (name.clone(), *pos),
        };
        if let Some(prev) = w.tensors.iter().position(|t| t.name == name) {
            return Err(WorkloadError::at(
                pos,
                format!(
                    "tensor '{name}' is already declared on line {}",
                    decl_pos[prev].line
                ),
            ));
        }
        let tensor = match stmt {
            Stmt::Workload { .. } => continue,
            Stmt::Input { dtype, shape, .. } => {
                if let Some((v, p)) = shape.iter().find(|(v, _)| *v <= 0) {
                    return Err(WorkloadError::at(
                        *p,
                        format!("extent of input '{name}' must be positive, found {v}"),
                    ));
                }
                Tensor {
                    name,
                    dtype,
                    shape: shape.into_iter().map(|(v, _)| v).collect(),
                    def: TensorDef::Input,
                }
            }
            Stmt::Compute {
                axes, dtype, rhs, ..
            } => compute(&w, name, axes, dtype, rhs)?,
            Stmt::Concat {
                dtype,
                inputs,
                axis,
                ..
            } => concat(&w, name, dtype, inputs, axis)?,
        };
        w.tensors.push(tensor);
        decl_pos.push(pos);
    }
    if !w.tensors.iter().any(|t| t.def != TensorDef::Input) {
        return Err(WorkloadError::at(
            Pos { line: 1, col: 1 },
            "a workload needs at least one stage",
        ));
    }
    Ok(w)
}

fn concat(
    w: &Workload,
    name: String,
    dtype: Option<(DType, Pos)>,
    inputs: Vec<(String, Pos)>,
    (axis, axis_pos): (i64, Pos),
) -> Result<Tensor> {
    let mut ids = Vec::new();
    for (n, p) in &inputs {
        match w.tensors.iter().position(|t| &t.name == n) {
            Some(i) => ids.push(i),
            None => {
                return Err(WorkloadError::at(
                    *p,
                    format!("unknown tensor '{n}' in concat"),
                ))
            }
        }
    }
    let first = &w.tensors[ids[0]];
    let rank = first.shape.len();
    let axis = match usize::try_from(axis) {
        Ok(a) if a < rank => a,
        _ => {
            return Err(WorkloadError::at(
                axis_pos,
                format!("concat axis {axis} is out of range for tensors of rank {rank}"),
            ))
        }
    };
    let mut shape = first.shape.clone();
    for (&i, (_, p)) in ids.iter().zip(&inputs).skip(1) {
        let t = &w.tensors[i];
        if t.dtype != first.dtype {
            return Err(WorkloadError::at(
                *p,
                format!(
                    "concat inputs differ in dtype: '{}' is {} but '{}' is {}",
                    first.name,
                    first.dtype.short(),
                    t.name,
                    t.dtype.short()
                ),
            ));
        }
        if t.shape.len() != rank {
            return Err(WorkloadError::at(
                *p,
                format!(
                    "concat inputs differ in rank: '{}' has {} dimensions but '{}' has {}",
                    first.name,
                    rank,
                    t.name,
                    t.shape.len()
                ),
            ));
        }
        for d in 0..rank {
            if d != axis && t.shape[d] != first.shape[d] {
                return Err(WorkloadError::at(
                    *p,
                    format!(
                        "concat input '{}' has extent {} in dimension {d} but '{}' has {}",
                        t.name, t.shape[d], first.name, first.shape[d]
                    ),
                ));
            }
        }
        shape[axis] = shape[axis]
            .checked_add(t.shape[axis])
            .ok_or_else(|| WorkloadError::at(*p, "concat extent is too large"))?;
    }
    if let Some((d, p)) = dtype {
        if d != first.dtype {
            return Err(WorkloadError::at(
                p,
                format!(
                    "stage '{name}' is declared {} but its inputs are {}",
                    d.short(),
                    first.dtype.short()
                ),
            ));
        }
    }
    Ok(Tensor {
        name,
        dtype: first.dtype,
        shape,
        def: TensorDef::Concat { inputs: ids, axis },
    })
}

/// A fact about an axis extent: where it comes from and what it says.
struct Fact {
    axis: usize,
    extent: i64,
    pos: Pos,
    what: String,
}

fn compute(
    w: &Workload,
    name: String,
    lhs: Vec<AxisDecl>,
    dtype: Option<(DType, Pos)>,
    rhs: Rhs,
) -> Result<Tensor> {
    let (value, reduce) = match rhs {
        Rhs::Value(e) => (e, None),
        Rhs::Reduce {
            op, value, axes, ..
        } => (value, Some((op, axes))),
    };
    let n_spatial = lhs.len();
    let decls: Vec<AxisDecl> = lhs
        .into_iter()
        .chain(reduce.iter().flat_map(|(_, a)| a.iter().cloned()))
        .collect();
    // Step 1: axis names.
    for (k, d) in decls.iter().enumerate() {
        if decls[..k].iter().any(|o| o.name == d.name) {
            return Err(WorkloadError::at(
                d.pos,
                format!("axis '{}' is declared twice in stage '{name}'", d.name),
            ));
        }
        if d.name == name || w.tensor(&d.name).is_some() {
            return Err(WorkloadError::at(
                d.pos,
                format!("axis '{}' has the name of a tensor", d.name),
            ));
        }
    }
    // Step 2: extents.
    let axis_of = |n: &str| decls.iter().position(|d| d.name == n);
    let mut facts: Vec<Fact> = decls
        .iter()
        .enumerate()
        .filter_map(|(k, d)| {
            d.extent.map(|(e, p)| Fact {
                axis: k,
                extent: e,
                pos: p,
                what: "declared".to_string(),
            })
        })
        .collect();
    let mut guarded = Vec::new();
    collect_facts(
        (w, &name),
        &value,
        false,
        &axis_of,
        &mut facts,
        &mut guarded,
    )?;
    facts.sort_by_key(|f| f.pos);
    let mut known: Vec<Option<(i64, String)>> = vec![None; decls.len()];
    for f in facts {
        if f.extent <= 0 {
            return Err(WorkloadError::at(
                f.pos,
                format!(
                    "extent of axis '{}' must be positive, found {}",
                    decls[f.axis].name, f.extent
                ),
            ));
        }
        match &known[f.axis] {
            None => known[f.axis] = Some((f.extent, f.what)),
            Some((e, what)) if *e != f.extent => {
                return Err(WorkloadError::at(
                    f.pos,
                    format!(
                        "axis '{}' has extent {} here ({}) but extent {e} before ({what})",
                        decls[f.axis].name, f.extent, f.what
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    for f in guarded {
        if known[f.axis].is_none() {
            known[f.axis] = Some((f.extent, f.what));
        }
    }
    let mut axes = Vec::new();
    for (d, k) in decls.iter().zip(known) {
        match k {
            Some((extent, _)) => axes.push(Axis {
                name: d.name.clone(),
                extent,
            }),
            None => {
                return Err(WorkloadError::at(
                    d.pos,
                    format!(
                        "cannot infer the extent of axis '{}'; declare it as '{}: N'",
                        d.name, d.name
                    ),
                ))
            }
        }
    }
    // Steps 3 and 4: types and bounds.
    let cx = Cx {
        w,
        stage: &name,
        axes: &axes,
    };
    let (scalar, ty) = cx.ty(&value, false)?;
    let value_dtype = match ty {
        Ty::Val(d) => d,
        Ty::Lit => None,
        Ty::Index => {
            return Err(WorkloadError::at(
                value.pos,
                format!("the value of stage '{name}' is an index expression; use cast(f32, ...)"),
            ))
        }
        Ty::Bool => {
            return Err(WorkloadError::at(
                value.pos,
                format!(
                    "the value of stage '{name}' is a condition; use if_then_else(cond, 1.0, 0.0)"
                ),
            ))
        }
    };
    let scalar = if ty == Ty::Lit {
        lit_to_float(scalar)
    } else {
        scalar
    };
    let dtype = match (dtype, value_dtype) {
        (Some((d, p)), Some(v)) if d != v => {
            return Err(WorkloadError::at(
                p,
                format!(
                    "stage '{name}' is declared {} but its value is {}; use cast({}, ...)",
                    d.short(),
                    v.short(),
                    d.short()
                ),
            ))
        }
        (Some((d, _)), _) => d,
        (None, Some(v)) => v,
        (None, None) => DType::F32,
    };
    let reduce_axes = axes.split_off(n_spatial);
    let shape = axes.iter().map(|a| a.extent).collect();
    let reduce = reduce.map(|(op, _)| Reduce {
        op,
        axes: reduce_axes,
    });
    Ok(Tensor {
        name,
        dtype,
        shape,
        def: TensorDef::Compute(Compute {
            axes,
            reduce,
            value: scalar,
        }),
    })
}

/// Extent facts from bare-axis indices: unguarded ones into `facts`, ones inside
/// `if_then_else` branches into `guarded`. Reports unknown tensors first, as they make
/// any later complaint about extents moot.
fn collect_facts(
    cx: (&Workload, &str),
    e: &PExpr,
    in_branch: bool,
    axis_of: &dyn Fn(&str) -> Option<usize>,
    facts: &mut Vec<Fact>,
    guarded: &mut Vec<Fact>,
) -> Result<()> {
    let mut go = |x: &PExpr, b: bool| collect_facts(cx, x, b, axis_of, facts, guarded);
    match &e.kind {
        PKind::Int(_) | PKind::Float(_) | PKind::Name(_) => Ok(()),
        PKind::Access(t, idx) => {
            let Some(tensor) = cx.0.tensor(t) else {
                return Err(unknown_tensor(e.pos, t, cx.1));
            };
            for (d, ix) in idx.iter().enumerate() {
                if let (PKind::Name(n), Some(&extent)) = (&ix.kind, tensor.shape.get(d)) {
                    if let Some(axis) = axis_of(n) {
                        let fact = Fact {
                            axis,
                            extent,
                            pos: ix.pos,
                            what: format!("dimension {d} of '{t}'"),
                        };
                        if in_branch {
                            guarded.push(fact)
                        } else {
                            facts.push(fact)
                        }
                    }
                }
            }
            for ix in idx {
                collect_facts(cx, ix, in_branch, axis_of, facts, guarded)?;
            }
            Ok(())
        }
        PKind::Bin(_, a, b) => {
            go(a, in_branch)?;
            go(b, in_branch)
        }
        PKind::Un(_, a) | PKind::Cast(_, a) | PKind::Relu(a) => go(a, in_branch),
        PKind::Select(c, t, f) => {
            go(c, in_branch)?;
            go(t, true)?;
            go(f, true)
        }
    }
}

fn unknown_tensor(pos: Pos, t: &str, stage: &str) -> WorkloadError {
    let msg = if t == stage {
        format!("stage '{t}' cannot read itself")
    } else {
        format!("unknown tensor '{t}'")
    };
    WorkloadError::at(pos, msg)
}

/// The type of a sub-expression.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Ty {
    /// Integer arithmetic over axes.
    Index,
    /// An integer constant: an index or a value, as its context needs.
    Lit,
    /// A tensor value, with its dtype when known (`None`: float constants only).
    Val(Option<DType>),
    /// A condition.
    Bool,
}

/// Integer constants used as values become float constants.
fn lit_to_float(s: Scalar) -> Scalar {
    match s {
        Scalar::Int(v) => Scalar::Float(v as f64),
        Scalar::Bin(op, a, b) => {
            Scalar::Bin(op, Box::new(lit_to_float(*a)), Box::new(lit_to_float(*b)))
        }
        Scalar::Un(op, a) => Scalar::Un(op, Box::new(lit_to_float(*a))),
        other => other,
    }
}

/// The context of one stage's type and bounds checks.
struct Cx<'a> {
    w: &'a Workload,
    stage: &'a str,
    axes: &'a [Axis],
}

impl Cx<'_> {
    fn ty(&self, e: &PExpr, guarded: bool) -> Result<(Scalar, Ty)> {
        let err = |msg: String| Err(WorkloadError::at(e.pos, msg));
        match &e.kind {
            PKind::Int(v) => Ok((Scalar::Int(*v), Ty::Lit)),
            PKind::Float(v) => Ok((Scalar::Float(*v), Ty::Val(None))),
            PKind::Name(n) => match self.axes.iter().position(|a| &a.name == n) {
                Some(k) => Ok((Scalar::Axis(k), Ty::Index)),
                None if self.w.tensor(n).is_some() => {
                    err(format!("tensor '{n}' needs indices: '{n}[...]'"))
                }
                None => err(format!(
                    "unknown name '{n}' (not an axis of stage '{}' nor a tensor)",
                    self.stage
                )),
            },
            PKind::Access(t, idx) => self.access(e.pos, t, idx, guarded),
            PKind::Bin(op, a, b) => {
                let (sa, ta) = self.ty(a, guarded)?;
                if matches!(op, BinOp::FloorDiv | BinOp::FloorMod) {
                    let sym = if *op == BinOp::FloorDiv { "//" } else { "%" };
                    if !matches!(ta, Ty::Index | Ty::Lit) {
                        return err(format!("'{sym}' applies to index expressions"));
                    }
                    return match b.kind {
                        PKind::Int(c) if c > 0 => Ok((
                            Scalar::Bin(*op, Box::new(sa), Box::new(Scalar::Int(c))),
                            Ty::Index,
                        )),
                        _ => err(format!(
                            "'{sym}' needs a positive integer constant on its right"
                        )),
                    };
                }
                let (sb, tb) = self.ty(b, guarded)?;
                self.bin(e.pos, *op, sa, ta, sb, tb)
            }
            PKind::Un(op, a) => {
                let (s, t) = self.ty(a, guarded)?;
                let wrap = |s: Scalar| Scalar::Un(*op, Box::new(s));
                match (op, t) {
                    (UnOp::Not, Ty::Bool) => Ok((wrap(s), Ty::Bool)),
                    (UnOp::Not, _) => err("'!' applies to conditions".to_string()),
                    (_, Ty::Bool) => err(format!(
                        "'{}' applies to numbers, found a condition",
                        op.name()
                    )),
                    (UnOp::Neg, t) => Ok((wrap(s), t)),
                    (UnOp::Tf32, Ty::Val(Some(d))) if d != DType::F32 => err(format!(
                        "'tf32' rounds f32 values to TensorFloat-32, found {}",
                        d.short()
                    )),
                    (_, Ty::Index) => err(format!(
                        "'{}' applies to values; use cast(f32, ...) on indices",
                        op.name()
                    )),
                    (_, Ty::Lit) => Ok((wrap(lit_to_float(s)), Ty::Val(None))),
                    (_, t) => Ok((wrap(s), t)),
                }
            }
            PKind::Relu(a) => {
                let (s, t) = self.ty(a, guarded)?;
                if t == Ty::Index {
                    return err(
                        "'relu' applies to values; use cast(f32, ...) on indices".to_string()
                    );
                }
                self.bin(e.pos, BinOp::Max, s, t, Scalar::Float(0.0), Ty::Val(None))
            }
            PKind::Cast(d, a) => {
                let (s, t) = self.ty(a, guarded)?;
                if t == Ty::Bool {
                    return err(
                        "cannot cast a condition; use if_then_else(cond, 1.0, 0.0)".to_string()
                    );
                }
                Ok((Scalar::Cast(*d, Box::new(s)), Ty::Val(Some(*d))))
            }
            PKind::Select(c, a, b) => {
                let (sc, tc) = self.ty(c, guarded)?;
                if tc != Ty::Bool {
                    return Err(WorkloadError::at(
                        c.pos,
                        "the first argument of if_then_else must be a condition",
                    ));
                }
                let (sa, ta) = self.ty(a, true)?;
                let (sb, tb) = self.ty(b, true)?;
                let (sa, sb, t) = self.unify(e.pos, "if_then_else", sa, ta, sb, tb)?;
                Ok((Scalar::Select(Box::new(sc), Box::new(sa), Box::new(sb)), t))
            }
        }
    }

    /// Makes the two operands of an arithmetic operation or a select agree.
    fn unify(
        &self,
        pos: Pos,
        what: &str,
        sa: Scalar,
        ta: Ty,
        sb: Scalar,
        tb: Ty,
    ) -> Result<(Scalar, Scalar, Ty)> {
        let err = |msg: String| Err(WorkloadError::at(pos, msg));
        match (ta, tb) {
            (Ty::Bool, _) | (_, Ty::Bool) => {
                err(format!("'{what}' expects numbers, found a condition"))
            }
            (Ty::Lit, Ty::Lit) => Ok((sa, sb, Ty::Lit)),
            (Ty::Index | Ty::Lit, Ty::Index | Ty::Lit) => Ok((sa, sb, Ty::Index)),
            (Ty::Index, Ty::Val(_)) | (Ty::Val(_), Ty::Index) => err(format!(
                "'{what}' mixes an index expression with a value; use cast(f32, ...) on the index"
            )),
            (Ty::Lit, Ty::Val(d)) => Ok((lit_to_float(sa), sb, Ty::Val(d))),
            (Ty::Val(d), Ty::Lit) => Ok((sa, lit_to_float(sb), Ty::Val(d))),
            (Ty::Val(x), Ty::Val(y)) => match (x, y) {
                (Some(x), Some(y)) if x != y => err(format!(
                    "'{what}' mixes {} and {} without cast",
                    x.short(),
                    y.short()
                )),
                _ => Ok((sa, sb, Ty::Val(x.or(y)))),
            },
        }
    }

    fn bin(
        &self,
        pos: Pos,
        op: BinOp,
        sa: Scalar,
        ta: Ty,
        sb: Scalar,
        tb: Ty,
    ) -> Result<(Scalar, Ty)> {
        let sym = op_symbol(op);
        let mk = |a, b| Scalar::Bin(op, Box::new(a), Box::new(b));
        if matches!(op, BinOp::And | BinOp::Or) {
            if ta != Ty::Bool || tb != Ty::Bool {
                return Err(WorkloadError::at(pos, format!("'{sym}' joins conditions")));
            }
            return Ok((mk(sa, sb), Ty::Bool));
        }
        if op == BinOp::Div && (ta == Ty::Index || tb == Ty::Index) {
            return Err(WorkloadError::at(
                pos,
                "'/' divides values; use '//' for index division",
            ));
        }
        if op == BinOp::Mul && ta == Ty::Index && tb == Ty::Index {
            return Err(WorkloadError::at(
                pos,
                "index expressions must be affine: '*' needs a constant operand",
            ));
        }
        let (sa, sb, t) = self.unify(pos, sym, sa, ta, sb, tb)?;
        if op.is_comparison() {
            return Ok((mk(sa, sb), Ty::Bool));
        }
        if op == BinOp::Div && t == Ty::Lit {
            return Ok((mk(lit_to_float(sa), lit_to_float(sb)), Ty::Val(None)));
        }
        Ok((mk(sa, sb), t))
    }

    fn access(&self, pos: Pos, t: &str, idx: &[PExpr], guarded: bool) -> Result<(Scalar, Ty)> {
        let Some(ti) = self.w.tensors.iter().position(|x| x.name == t) else {
            return Err(unknown_tensor(pos, t, self.stage));
        };
        let tensor = &self.w.tensors[ti];
        if idx.len() != tensor.shape.len() {
            return Err(WorkloadError::at(
                pos,
                format!(
                    "'{t}' has {} dimensions but is indexed with {}",
                    tensor.shape.len(),
                    idx.len()
                ),
            ));
        }
        let mut out = Vec::new();
        for (d, ix) in idx.iter().enumerate() {
            let (s, ty) = self.ty(ix, guarded)?;
            if !matches!(ty, Ty::Index | Ty::Lit) {
                return Err(WorkloadError::at(
                    ix.pos,
                    format!("index {d} of '{t}' must be an integer expression of axes"),
                ));
            }
            out.push(s);
        }
        let access = Scalar::Access(ti, out);
        if !guarded {
            let Scalar::Access(_, ref out) = access else {
                return Ok((access, Ty::Val(Some(tensor.dtype))));
            };
            for (d, s) in out.iter().enumerate() {
                let range = bound_with(&index_to_ir(s), &|v: VarId| {
                    self.axes
                        .get(v.index())
                        .map(|a| Interval::new(0, a.extent - 1))
                });
                if range.min < 0 || range.max >= tensor.shape[d] {
                    let text = print::scalar(&access, &|i| self.w.tensors[i].name.clone(), &|k| {
                        self.axes
                            .get(k)
                            .map_or_else(|| format!("axis{k}"), |a| a.name.clone())
                    });
                    return Err(WorkloadError::at(
                        pos,
                        format!(
                            "access '{text}' is out of bounds: index {d} ranges over [{}, {}] but dimension {d} of '{t}' has extent {}",
                            range.min, range.max, tensor.shape[d]
                        ),
                    ));
                }
            }
        }
        Ok((access, Ty::Val(Some(tensor.dtype))))
    }
}

/// The spelling of a binary operator in the language.
pub(crate) fn op_symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::FloorDiv => "//",
        BinOp::FloorMod => "%",
        BinOp::Min => "min",
        BinOp::Max => "max",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::And => "&&",
        BinOp::Or => "||",
    }
}
