//! `compute_inline` and `reverse_compute_inline`: removing an elementwise stage by
//! substituting it into its consumer (padding into a convolution) or its producer (an
//! epilogue such as bias or relu into the cache write-back).
//!
//! Invariant: the inlined block is spatial, the only writer (or reader) of the
//! intermediate buffer, and maps its iteration variables one-to-one onto that buffer's
//! indices, so the substitution is exact.

use super::error::{Result, ScheduleError};
use super::util::*;
use crate::ir::{BlockId, BufferKind, Expr, IterKind, Program, VarId};
use std::collections::BTreeMap;

fn unsupported(
    p: &Program,
    b: BlockId,
    primitive: &'static str,
    reason: impl Into<String>,
) -> ScheduleError {
    ScheduleError::Unsupported {
        primitive,
        block: p.block(b).name.clone(),
        reason: reason.into(),
    }
}

/// For a store/load whose indices are distinct iteration variables covering all of the
/// block's iteration variables: the iteration variable at each index position.
fn bijective_indices(p: &Program, b: BlockId, idx: &[Expr]) -> Option<Vec<VarId>> {
    let blk = p.block(b);
    let mut vars = Vec::new();
    for e in idx {
        let Expr::Var(v) = e else { return None };
        if vars.contains(v) || !blk.iter_vars.iter().any(|iv| iv.var == *v) {
            return None;
        }
        vars.push(*v);
    }
    (vars.len() == blk.iter_vars.len()).then_some(vars)
}

fn check_elementwise(p: &Program, b: BlockId, primitive: &'static str) -> Result<()> {
    let blk = p.block(b);
    if blk.init.is_some() || blk.iter_vars.iter().any(|iv| iv.kind == IterKind::Reduce) {
        return Err(unsupported(p, b, primitive, "it is a reduction"));
    }
    if blk.predicate.is_some() {
        return Err(unsupported(p, b, primitive, "it has a predicate"));
    }
    Ok(())
}

/// Substitutes block `b` into every consumer of the buffer it writes, then removes it.
pub fn compute_inline(p: &mut Program, b: BlockId) -> Result<()> {
    // 1. An elementwise block, sole writer of an intermediate buffer, storing at its
    //    iteration variables.
    check_elementwise(p, b, "compute_inline")?;
    let buf = p.block(b).body.buffer;
    if p.buffer(buf).kind != BufferKind::Intermediate {
        return Err(unsupported(
            p,
            b,
            "compute_inline",
            format!("it writes the parameter {}", p.buffer(buf).name),
        ));
    }
    let writers = p.writers(buf);
    if writers != [b] {
        return Err(ScheduleError::NotSingleWriter {
            buffer: p.buffer(buf).name.clone(),
            writers: block_names(p, &writers),
            primitive: "compute_inline",
        });
    }
    let vars = bijective_indices(p, b, &p.block(b).body.indices.clone()).ok_or_else(|| {
        unsupported(
            p,
            b,
            "compute_inline",
            "its store indices are not its iteration variables",
        )
    })?;
    let value = p.block(b).body.value.clone();
    if value.loads().iter().any(|(x, _)| *x == buf) {
        return Err(unsupported(
            p,
            b,
            "compute_inline",
            "it reads its own output",
        ));
    }
    let consumers: Vec<BlockId> = p.readers(buf).into_iter().filter(|c| *c != b).collect();
    if consumers.is_empty() {
        return Err(ScheduleError::NoConsumers {
            block: p.block(b).name.clone(),
            what: "consumer",
        });
    }
    // 2. Replace each load of the buffer by the value at those indices.
    for c in &consumers {
        let body = p.block(*c).body.clone();
        let new_value = body.value.rewrite(&mut |e| match e {
            Expr::Load(x, idx) if x == buf => {
                let map: BTreeMap<VarId, Expr> = vars.iter().copied().zip(idx).collect();
                value.substitute(&|v| map.get(&v).cloned())
            }
            other => other,
        });
        let new_value = simplify_iters(p, *c, &new_value);
        p.block_mut(*c).body.value = new_value;
    }
    // 3. Remove the block and its buffer.
    remove_exclusive(p, b);
    p.allocs.retain(|x| *x != buf);
    Ok(())
}

/// Substitutes the elementwise consumer `b` into the producer of the buffer it reads: the
/// producer then computes the consumer's value and writes the consumer's buffer.
pub fn reverse_compute_inline(p: &mut Program, b: BlockId) -> Result<()> {
    // 1. The consumer is elementwise and reads exactly one produced intermediate buffer,
    //    at its iteration variables.
    check_elementwise(p, b, "reverse_compute_inline")?;
    let produced: Vec<(crate::ir::BufferId, Vec<Expr>)> = p
        .block_reads(b)
        .into_iter()
        .filter(|(x, _)| p.buffer(*x).kind == BufferKind::Intermediate && !p.writers(*x).is_empty())
        .collect();
    let (buf, idx) = match produced.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(ScheduleError::NoConsumers {
                block: p.block(b).name.clone(),
                what: "producer",
            })
        }
        _ => {
            return Err(unsupported(
                p,
                b,
                "reverse_compute_inline",
                "it reads more than one produced buffer region",
            ))
        }
    };
    let cvars = bijective_indices(p, b, &idx).ok_or_else(|| {
        unsupported(
            p,
            b,
            "reverse_compute_inline",
            format!(
                "it does not read {} at its iteration variables",
                p.buffer(buf).name
            ),
        )
    })?;
    // 2. The producer is the single, non-reduction writer; the consumer is the only reader.
    let writers = p.writers(buf);
    let [prod] = writers.as_slice() else {
        return Err(ScheduleError::NotSingleWriter {
            buffer: p.buffer(buf).name.clone(),
            writers: block_names(p, &writers),
            primitive: "reverse_compute_inline",
        });
    };
    let prod = *prod;
    if p.block(prod).init.is_some() || p.block(prod).is_reduction() {
        return Err(unsupported(
            p,
            b,
            "reverse_compute_inline",
            format!(
                "its producer {} is a reduction (cache_write it first)",
                p.block(prod).name
            ),
        ));
    }
    let readers: Vec<BlockId> = p.readers(buf).into_iter().filter(|r| *r != b).collect();
    if !readers.is_empty() {
        return Err(unsupported(
            p,
            b,
            "reverse_compute_inline",
            format!(
                "{} is also read by {}",
                p.buffer(buf).name,
                block_names(p, &readers)
            ),
        ));
    }
    let pidx = p.block(prod).body.indices.clone();
    if pidx.iter().any(|e| !matches!(e, Expr::Var(_))) || pidx.len() != cvars.len() {
        return Err(unsupported(
            p,
            b,
            "reverse_compute_inline",
            format!(
                "producer {} does not store at its iteration variables",
                p.block(prod).name
            ),
        ));
    }
    // 3. Consumer iteration variable at position j of the read = producer index j. A
    //    consumer over a smaller domain (the copy of a padded result back to its original
    //    shape) shrinks the producer's domain to its own and guards the rest.
    let guard = shrink_to_consumer(p, prod, b, &cvars, &pidx)?;
    let map: BTreeMap<VarId, Expr> = cvars.iter().copied().zip(pidx.iter().cloned()).collect();
    let sub = |e: &Expr| e.substitute(&|v| map.get(&v).cloned());
    let pvalue = p.block(prod).body.value.clone();
    let cbody = p.block(b).body.clone();
    let new_value = sub(&cbody.value).rewrite(&mut |e| match e {
        Expr::Load(x, _) if x == buf => pvalue.clone(),
        other => other,
    });
    let new_indices: Vec<Expr> = cbody.indices.iter().map(&sub).collect();
    let ranges = loop_ranges(p);
    for (iv, extent, bound) in guard {
        let old = p.block(prod).predicate.clone();
        let pred = and_predicate(&ranges, old, bound);
        let pb = p.block_mut(prod);
        pb.iter_vars[iv].extent = extent;
        pb.predicate = pred;
    }
    let pb = p.block_mut(prod);
    pb.body.buffer = cbody.buffer;
    pb.body.indices = new_indices;
    pb.body.value = new_value;
    // 4. Remove the consumer and the intermediate buffer.
    remove_exclusive(p, b);
    p.allocs.retain(|x| *x != buf);
    Ok(())
}

/// For `reverse_compute_inline` of consumer `b` into `prod`: where the consumer's
/// iteration variable at a read position has a smaller extent than the producer's
/// variable stored there, the producer's variable index, that extent, and the guard
/// `binding < extent` on the producer. A consumer over a larger domain is refused.
fn shrink_to_consumer(
    p: &Program,
    prod: BlockId,
    b: BlockId,
    cvars: &[VarId],
    pidx: &[Expr],
) -> Result<Vec<(usize, i64, Expr)>> {
    let extent_of = |blk: BlockId, v: VarId| {
        p.block(blk)
            .iter_vars
            .iter()
            .position(|iv| iv.var == v)
            .map(|i| (i, p.block(blk).iter_vars[i].extent))
    };
    let mut out = Vec::new();
    for (cv, pe) in cvars.iter().zip(pidx) {
        let (Expr::Var(pv), Some((_, ce))) = (pe, extent_of(b, *cv)) else {
            continue;
        };
        let Some((pi, pext)) = extent_of(prod, *pv) else {
            continue;
        };
        if ce > pext {
            return Err(unsupported(
                p,
                b,
                "reverse_compute_inline",
                format!(
                    "it reads {} elements of an axis that {} produces {} of",
                    ce,
                    p.block(prod).name,
                    pext
                ),
            ));
        }
        if ce < pext {
            let binding = p.block(prod).bindings[pi].clone();
            out.push((pi, ce, Expr::lt(binding, Expr::Int(ce))));
        }
    }
    Ok(out)
}
