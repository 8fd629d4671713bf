//! `pad_einsum`: padding an einsum's iteration domain to multiples, so that tiles of the
//! padded extents divide them and the inner loops run without guards (TVM's primitive of
//! the same name).
//!
//! The block must be an einsum: a reduction `C[s..] = C[s..] + X[..] * Y[..] * ...` whose
//! store indices are its iteration variables, alone in a perfect nest of its own loops.
//! A factor may read at index expressions (a convolution's data at `p * stride + r`); a
//! reduction variable used in such an expression cannot be padded, a spatial one can
//! (the buffer read then grows to the expression's largest value over the padded domain),
//! one read only as a whole index (a conv's `n`, `k`, `c`) can; [`paddable`] names those
//! padded without growing a buffer read at an expression. Each
//! iteration variable `v` of extent `e` with padding `p` gets the extent `ceil(e / p) * p`.
//! Every input read along a padded variable is read through a new stage `X_pad`
//! (`if_then_else(in bounds, X[..], 0)`, over the padded shape), and when a spatial
//! variable is padded the block writes a padded `C_pad`, from which a new stage copies the
//! original shape back to `C`. The new stages are elementwise: the sketch inlines the input
//! pads into the shared-memory fetch (which then fills zeros) and the output copy into the
//! write-back (which then keeps the only guard).
//!
//! Why this is exact: a padded reduction iteration adds a product whose factors all read
//! a padded input outside the original shape, that is zero (every factor must use every
//! padded reduction variable, or the block is refused); a padded spatial iteration writes
//! an element of `C_pad` that the copy never reads.

use super::error::{Result, ScheduleError};
use super::util::*;
use crate::ir::{
    BinOp, BlockId, Buffer, BufferId, BufferKind, Expr, FactorRead, IterKind, LoopId, Node,
    Program, Scope, VarId,
};
use std::collections::BTreeMap;

fn refuse(p: &Program, b: BlockId, reason: impl Into<String>) -> ScheduleError {
    ScheduleError::Unsupported {
        primitive: "pad_einsum",
        block: p.block(b).name.clone(),
        reason: reason.into(),
    }
}

/// The einsum structure of a block: its loops (outermost first, one per iteration
/// variable), the iteration variable each loop binds, and the factor loads of its update.
pub(super) struct Einsum {
    pub(super) loops: Vec<LoopId>,
    /// Loop position -> iteration variable index.
    pub(super) iter_of_loop: Vec<usize>,
    pub(super) factors: Vec<(BufferId, Vec<Expr>)>,
}

impl Einsum {
    /// The variables some factor reads inside an index expression (not as a whole index).
    fn in_expressions(&self) -> Vec<VarId> {
        let mut vs = Vec::new();
        for e in self.factors.iter().flat_map(|(_, idx)| idx) {
            if !matches!(e, Expr::Var(_)) {
                vs.extend(e.vars());
            }
        }
        vs
    }
}

/// Checks that `b` is an einsum whose factors read at iteration variables alone (a GEMM,
/// not a convolution), naming what it is not.
pub fn check_einsum(p: &Program, b: BlockId) -> Result<()> {
    let es = einsum(p, b)?;
    match es
        .factors
        .iter()
        .find(|(_, idx)| idx.iter().any(|e| !matches!(e, Expr::Var(_))))
    {
        Some((buf, _)) => Err(refuse(
            p,
            b,
            format!(
                "it reads {} at indices that are not its iteration variables",
                p.buffer(*buf).name
            ),
        )),
        None => Ok(()),
    }
}

/// Which iteration variables of einsum `b` (in order) `pad_einsum` may pad: those no
/// factor reads inside an index expression; an error naming why `b` is no einsum.
pub fn paddable(p: &Program, b: BlockId) -> Result<Vec<bool>> {
    let es = einsum(p, b)?;
    let fixed = es.in_expressions();
    Ok(p.block(b)
        .iter_vars
        .iter()
        .map(|iv| !fixed.contains(&iv.var))
        .collect())
}

pub(super) fn einsum(p: &Program, b: BlockId) -> Result<Einsum> {
    let blk = p.block(b);
    if !blk.is_reduction() || blk.init.is_none() {
        return Err(refuse(p, b, "it is not a reduction with an init"));
    }
    if blk.predicate.is_some() {
        return Err(refuse(p, b, "it has a predicate"));
    }
    // 1. A perfect nest of the block's own loops, one per iteration variable.
    let loops = p.ancestors(Node::Block(b));
    if loops.len() != blk.iter_vars.len() {
        return Err(refuse(
            p,
            b,
            format!(
                "it is under {} loops for {} iteration variables",
                loops.len(),
                blk.iter_vars.len()
            ),
        ));
    }
    let mut iter_of_loop = Vec::new();
    for (i, l) in loops.iter().enumerate() {
        let lp = p.lp(*l);
        let inner = loops.get(i + 1).map_or(Node::Block(b), |x| Node::Loop(*x));
        if lp.body != [inner] {
            return Err(refuse(
                p,
                b,
                format!("loop {} holds more than its nest", p.loop_name(*l)),
            ));
        }
        if lp.kind != crate::ir::LoopKind::Serial || !lp.annotations.is_empty() {
            return Err(refuse(
                p,
                b,
                format!("loop {} is already scheduled", p.loop_name(*l)),
            ));
        }
        let pos = blk
            .bindings
            .iter()
            .position(|e| *e == Expr::Var(lp.var))
            .filter(|pos| blk.iter_vars[*pos].extent == lp.extent)
            .ok_or_else(|| {
                refuse(
                    p,
                    b,
                    format!(
                        "loop {} is not bound whole to an iteration variable",
                        p.loop_name(*l)
                    ),
                )
            })?;
        iter_of_loop.push(pos);
    }
    // 2. The store at distinct spatial iteration variables.
    let as_vars = |idx: &[Expr]| -> Option<Vec<VarId>> {
        let mut vs = Vec::new();
        for e in idx {
            let Expr::Var(v) = e else { return None };
            if vs.contains(v) {
                return None;
            }
            vs.push(*v);
        }
        Some(vs)
    };
    let out = blk.body.buffer;
    as_vars(&blk.body.indices)
        .ok_or_else(|| refuse(p, b, "its store indices are not its iteration variables"))?;
    // 3. The update: the output plus a product of loads at iteration variables.
    let rhs = match &blk.body.value {
        Expr::Bin(BinOp::Add, a, c) if **a == Expr::Load(out, blk.body.indices.clone()) => c,
        Expr::Bin(BinOp::Add, c, a) if **a == Expr::Load(out, blk.body.indices.clone()) => c,
        _ => return Err(refuse(p, b, "its update is not `out = out + product`")),
    };
    let mut loads = Vec::new();
    product_loads(rhs, &mut loads).ok_or_else(|| {
        refuse(
            p,
            b,
            "its update adds something other than a product of loads",
        )
    })?;
    let mut factors = Vec::new();
    for (buf, idx) in loads {
        if buf == out {
            return Err(refuse(p, b, "it reads its output in the product"));
        }
        factors.push((buf, idx));
    }
    Ok(Einsum {
        loops,
        iter_of_loop,
        factors,
    })
}

/// The loads of a product tree (`a * b * c`, a factor possibly cast to another float
/// type: a half-precision operand accumulated in f32; a zero stays zero); `None` when it
/// holds anything else.
fn product_loads(e: &Expr, out: &mut Vec<(BufferId, Vec<Expr>)>) -> Option<()> {
    match e {
        Expr::Bin(BinOp::Mul, a, c) => {
            product_loads(a, out)?;
            product_loads(c, out)
        }
        // A load, possibly cast to another float type or read at TF32's precision
        // (tf32(0) = 0: padding stays zero).
        e => match e.factor_load()? {
            (FactorRead::Cast(t), ..) if !t.is_float() => None,
            (_, buf, idx) => {
                out.push((buf, idx.to_vec()));
                Some(())
            }
        },
    }
}

/// Pads the iteration domain of einsum block `b`: `padding[i]` (>= 1) for its `i`-th
/// iteration variable. A padding that changes no extent leaves the program as it is.
pub fn pad_einsum(p: &mut Program, b: BlockId, padding: &[i64]) -> Result<()> {
    // 1. Check the block and the padding.
    let es = einsum(p, b)?;
    let blk = p.block(b).clone();
    if padding.len() != blk.iter_vars.len() || padding.iter().any(|x| *x < 1) {
        return Err(ScheduleError::InvalidArgument {
            what: "pad_einsum padding",
            reason: format!(
                "{padding:?}: one factor >= 1 per iteration variable ({})",
                blk.iter_vars.len()
            ),
        });
    }
    let padded: BTreeMap<VarId, (i64, i64)> = blk
        .iter_vars
        .iter()
        .zip(padding)
        .filter(|(iv, f)| iv.extent % **f != 0)
        .map(|(iv, f)| (iv.var, (iv.extent, (iv.extent + f - 1) / f * f)))
        .collect();
    if padded.is_empty() {
        return Ok(());
    }
    let fixed = es.in_expressions();
    let reduction = |v: &VarId| {
        blk.iter_vars
            .iter()
            .any(|iv| iv.var == *v && iv.kind == IterKind::Reduce)
    };
    if let Some(v) = padded.keys().find(|v| fixed.contains(v) && reduction(v)) {
        return Err(refuse(
            p,
            b,
            format!(
                "it reads the padded reduction variable {} inside an index expression",
                p.var_name(*v)
            ),
        ));
    }
    for iv in blk
        .iter_vars
        .iter()
        .filter(|iv| iv.kind == IterKind::Reduce)
    {
        if !padded.contains_key(&iv.var) {
            continue;
        }
        if let Some((buf, _)) = es
            .factors
            .iter()
            .find(|(_, idx)| !idx.contains(&Expr::Var(iv.var)))
        {
            return Err(refuse(
                p,
                b,
                format!(
                    "{} does not use the padded reduction variable {}, so its padded terms would not be zero",
                    p.buffer(*buf).name,
                    p.var_name(iv.var)
                ),
            ));
        }
    }
    let new_extent = |v: &VarId, e: i64| padded.get(v).map_or(e, |(_, n)| *n);
    let padded_domain: BTreeMap<VarId, i64> = blk
        .iter_vars
        .iter()
        .map(|iv| (iv.var, new_extent(&iv.var, iv.extent)))
        .collect();
    let root_pos = p
        .root
        .iter()
        .position(|n| *n == Node::Loop(es.loops[0]))
        .ok_or_else(|| refuse(p, b, "its nest is not at the root"))?;
    // 2. Inputs read along a padded variable go through a zero-filled padded stage.
    let mut value = blk.body.value.clone();
    let mut pads: Vec<Node> = Vec::new();
    let mut done: BTreeMap<BufferId, BufferId> = BTreeMap::new();
    for (buf, idx) in &es.factors {
        let whole = |e: &Expr| match e {
            Expr::Var(v) => Some(*v),
            _ => None,
        };
        // A dimension read at a padded variable grows to its padded extent, one read at
        // an expression of a padded variable to the expression's largest value over the
        // padded domain (a conv's data row read at `q * stride + s` by padded pixels `q`);
        // one read at an expression of unpadded variables keeps its extent.
        let mut shape = Vec::new();
        for (n, e) in p.buffer(*buf).shape.iter().zip(idx) {
            shape.push(match whole(e) {
                Some(v) => new_extent(&v, *n),
                None if e.vars().iter().any(|v| padded.contains_key(v)) => {
                    let range = crate::ir::interval::bound(e, &padded_domain);
                    if range.min < 0 || !range.is_bounded() {
                        return Err(refuse(
                            p,
                            b,
                            format!(
                                "it reads {} at an index that may be negative",
                                p.buffer(*buf).name
                            ),
                        ));
                    }
                    (*n).max(range.max + 1)
                }
                None => *n,
            });
        }
        if shape == p.buffer(*buf).shape {
            continue;
        }
        if let Some(prev) = done.get(buf) {
            if p.buffer(*prev).shape != shape {
                return Err(refuse(
                    p,
                    b,
                    format!(
                        "it reads {} along differently padded axes",
                        p.buffer(*buf).name
                    ),
                ));
            }
            continue;
        }
        let padded_buf = new_global(p, *buf, "pad", shape.clone());
        let name = p.fresh_block_name(&p.buffer(padded_buf).name.clone());
        let original = p.buffer(*buf).shape.clone();
        pads.push(copy_nest(
            p,
            &name,
            *buf,
            padded_buf,
            &shape,
            Some(&original),
        ));
        done.insert(*buf, padded_buf);
    }
    value = value.rewrite(&mut |e| match e {
        Expr::Load(x, idx) if done.contains_key(&x) => Expr::Load(done[&x], idx),
        other => other,
    });
    // 3. A padded output, copied back to the original shape after the nest.
    let out = blk.body.buffer;
    let out_vars: Vec<VarId> = blk
        .body
        .indices
        .iter()
        .filter_map(|e| match e {
            Expr::Var(v) => Some(*v),
            _ => None,
        })
        .collect();
    let mut crop = None;
    if out_vars.iter().any(|v| padded.contains_key(v)) {
        let original = p.buffer(out).shape.clone();
        let shape: Vec<i64> = original
            .iter()
            .zip(&out_vars)
            .map(|(e, v)| new_extent(v, *e))
            .collect();
        let padded_out = new_global(p, out, "pad", shape);
        let name = p.fresh_block_name(&format!("{}_crop", p.buffer(out).name));
        crop = Some(copy_nest(p, &name, padded_out, out, &original, None));
        value = value.rewrite(&mut |e| match e {
            Expr::Load(x, idx) if x == out => Expr::Load(padded_out, idx),
            other => other,
        });
        let nb = p.block_mut(b);
        nb.body.buffer = padded_out;
        if let Some(init) = &mut nb.init {
            init.buffer = padded_out;
        }
    }
    // 4. The padded domain.
    p.block_mut(b).body.value = value;
    for (pos, l) in es.loops.iter().enumerate() {
        let iv = es.iter_of_loop[pos];
        let var = blk.iter_vars[iv].var;
        let ext = new_extent(&var, blk.iter_vars[iv].extent);
        p.lp_mut(*l).extent = ext;
        p.block_mut(b).iter_vars[iv].extent = ext;
    }
    if let Some(c) = crop {
        p.root.insert(root_pos + 1, c);
    }
    for (i, n) in pads.into_iter().enumerate() {
        p.root.insert(root_pos + i, n);
    }
    Ok(())
}

/// A new intermediate global buffer `{base}_{suffix}` of `shape`, like `like`.
pub(super) fn new_global(
    p: &mut Program,
    like: BufferId,
    suffix: &str,
    shape: Vec<i64>,
) -> BufferId {
    let s = p.buffer(like).clone();
    let name = p.fresh_buffer_name(&format!("{}_{suffix}", s.name));
    let id = p.new_buffer(Buffer {
        name,
        shape,
        dtype: s.dtype,
        scope: Scope::Global,
        kind: BufferKind::Intermediate,
        align: Vec::new(),
        swizzle: false,
    });
    p.allocs.push(id);
    id
}
