//! Unguarded register accumulation: an imperfect tile's guard is lifted off the updates of
//! a thread's accumulators where that cannot change what the kernel writes.
//!
//! A tile size that does not divide its loop (`sample_tile`) leaves iterations past the
//! extent, masked by the block's predicate. Around a reduction update into registers,
//! `if (guard) acc[i] = acc[i] + A_shared[..] * B_shared[..];`, the guard keeps the
//! compiler from loading an operand once for the several accumulators that use it (it
//! may not move a load out of a branch it cannot prove safe): every FMA of the register
//! tile becomes a branch with two shared loads of its own. On the H100 (2026-11-25,
//! `ncu`) the best kernel of a conv with 83 x 83 outputs issued 7 instructions per FMA
//! for that reason, where cuDNN's issues 1.5.
//!
//! Where a guard holds only stores into a thread's accumulators (a local buffer, each
//! store either its initial value, a constant, or an update that reads the element it
//! writes) and every access the stores make is proven to lie inside its allocation at
//! every iteration, guards ignored ([`super::compact::compact`]'s proven accesses), the
//! guard's conjuncts that mask outputs past a spatial extent (over the loops of the
//! block's spatial iteration variables alone: never a reduction step of a valid output)
//! are dropped. A conjunct over the reduction (an imperfect tile of the reduction axis)
//! stays: it would add to valid outputs; it is invariant over the register tile's loops,
//! so the compiler can branch once around them. A masked iteration then computes an
//! accumulator element of an output past the extent: no valid output shares that element
//! (the accumulator is indexed by the output's coordinates), the element is never read
//! by a valid one, and the write-back, which stores to the global output, keeps its
//! guard. The reads it makes stay inside their allocations, so the only difference is
//! work on values that are never written out.

use super::compact::Proven;
use super::kernel::{Alloc, KStmt};
use crate::ir::{BufferId, Expr, Scope};
use std::collections::BTreeSet;

/// A guard lowering found masking outputs past a spatial extent around the stores of
/// `block` (the block whose comment precedes the guard), and what is left of it without
/// the conjuncts that do (a reduction's own bound; `None`: nothing).
pub(super) struct OutputMask {
    pub block: String,
    pub guard: Expr,
    pub rest: Option<Expr>,
}

/// Narrows the guards among `output_masks` around accumulator updates in `body` to what
/// is left of them without their output masks (see the module documentation); `proven`:
/// the accesses that lie inside their allocations.
pub(super) fn unguard(
    body: &mut Vec<KStmt>,
    allocs: &[Alloc],
    proven: &[Proven],
    output_masks: &[OutputMask],
) {
    let registers: BTreeSet<BufferId> = allocs
        .iter()
        .filter(|a| a.scope == Scope::Local)
        .map(|a| a.buffer)
        .collect();
    let ctx = Ctx {
        registers,
        proven,
        output_masks,
    };
    walk(body, &ctx);
}

struct Ctx<'a> {
    registers: BTreeSet<BufferId>,
    proven: &'a [Proven],
    output_masks: &'a [OutputMask],
}

impl Ctx<'_> {
    fn is_proven(&self, buffer: BufferId, indices: &[Expr]) -> bool {
        matches!(indices, [i] if self.proven.iter().any(|(b, e)| *b == buffer && e == i))
    }

    /// Every load of `e` is proven inside its allocation.
    fn reads_proven(&self, e: &Expr) -> bool {
        e.loads().iter().all(|(b, idx)| self.is_proven(*b, idx))
    }

    /// Whether `stmts` are stores into accumulators alone (and comments): each into a
    /// thread's registers, its initial value (no load) or an update that reads the
    /// element it writes, every access proven.
    fn accumulates_only(&self, stmts: &[KStmt]) -> bool {
        let mut any = false;
        for s in stmts {
            match s {
                KStmt::Comment(_) => {}
                KStmt::Store {
                    buffer,
                    indices,
                    value,
                } => {
                    let proven = self.registers.contains(buffer)
                        && self.is_proven(*buffer, indices)
                        && indices.iter().all(|i| self.reads_proven(i))
                        && self.reads_proven(value);
                    let loads = value.loads();
                    let accumulates = loads.is_empty()
                        || loads.iter().any(|(b, idx)| b == buffer && idx == indices);
                    if !(proven && accumulates) {
                        return false;
                    }
                    any = true;
                }
                _ => return false,
            }
        }
        any
    }
}

fn walk(body: &mut Vec<KStmt>, ctx: &Ctx) {
    let mut out: Vec<KStmt> = Vec::with_capacity(body.len());
    for mut s in body.drain(..) {
        let block = match out.last() {
            Some(KStmt::Comment(name)) => Some(name.clone()),
            _ => None,
        };
        match &mut s {
            KStmt::For { body, .. } => walk(body, ctx),
            KStmt::If { cond, then } => {
                let mask = ctx
                    .output_masks
                    .iter()
                    .find(|m| Some(&m.block) == block.as_ref() && m.guard == *cond);
                if let Some(m) = mask.filter(|_| ctx.accumulates_only(then)) {
                    match &m.rest {
                        None => {
                            out.append(then);
                            continue;
                        }
                        Some(rest) => *cond = rest.clone(),
                    }
                } else {
                    walk(then, ctx);
                }
            }
            _ => {}
        }
        out.push(s);
    }
    *body = out;
}

#[cfg(test)]
mod tests {
    use crate::ir::{BufferId, Expr, Scope};
    use crate::lower::{lower, Backend, KStmt, Lowered};
    use crate::schedule::tests::matmul;
    use crate::schedule::{IntArg, Schedule};

    /// A matmul tiled for the GPU as the sketch does: `m` rows split into blocks of 4
    /// threads of `rows` rows each (imperfect where 4 x `rows` does not divide `m`), 8
    /// columns a thread; the accumulator in registers; with `staged`, A and B fetched into
    /// shared memory at each step of the reduction, split by `k_step` (imperfect too).
    fn tiled(m: i64, k: i64, rows: i64, k_step: i64, staged: bool) -> Schedule {
        let mut sch = Schedule::new(matmul(m, 8, k), 0);
        let c = sch.get_block("C").unwrap();
        let wb = sch.cache_write(c, 0, "local").unwrap();
        let l = sch.get_loops(c).unwrap();
        let i = sch
            .split(l[0], &[None, Some(IntArg::Lit(4)), Some(IntArg::Lit(rows))])
            .unwrap();
        let kk = sch.split(l[2], &[None, Some(IntArg::Lit(k_step))]).unwrap();
        sch.reorder(&[i[0], i[1], kk[0], kk[1], i[2], l[1]])
            .unwrap();
        sch.bind(i[0], "blockIdx.x").unwrap();
        sch.bind(i[1], "threadIdx.x").unwrap();
        sch.reverse_compute_at(wb, i[1]).unwrap();
        if staged {
            for read in [0, 1] {
                let s = sch.cache_read(c, read, "shared").unwrap();
                sch.compute_at(s, kk[0]).unwrap();
                let sl = sch.get_loops(s).unwrap();
                let f = sch.fuse(&sl[3..]).unwrap();
                let t = sch.split(f, &[None, Some(IntArg::Lit(4))]).unwrap();
                sch.bind(t[1], "threadIdx.x").unwrap();
            }
        }
        sch.decompose_reduction(c, kk[0]).unwrap();
        sch
    }

    /// For each store into `buffer`, in order, the condition of the innermost `if` it lies
    /// under (`None`: none).
    fn guards(l: &Lowered, buffer: BufferId) -> Vec<Option<Expr>> {
        fn walk(
            body: &[KStmt],
            under: Option<&Expr>,
            buffer: BufferId,
            out: &mut Vec<Option<Expr>>,
        ) {
            for s in body {
                match s {
                    KStmt::For { body, .. } => walk(body, under, buffer, out),
                    KStmt::If { cond, then } => walk(then, Some(cond), buffer, out),
                    KStmt::Store { buffer: b, .. } if *b == buffer => out.push(under.cloned()),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        for k in &l.kernels {
            walk(&k.body, None, buffer, &mut out);
        }
        out
    }

    /// Whether each store into `buffer` lies under an `if`.
    fn guarded(l: &Lowered, buffer: BufferId) -> Vec<bool> {
        guards(l, buffer).iter().map(Option::is_some).collect()
    }

    fn buffer(l: &Lowered, name: &str, scope: Scope) -> BufferId {
        let p = &l.program;
        (0..p.buffers.len() as u32)
            .map(BufferId)
            .find(|b| p.buffer(*b).name.starts_with(name) && p.buffer(*b).scope == scope)
            .unwrap_or_else(|| panic!("no {scope:?} buffer {name}"))
    }

    /// `tiled(30, k, 4, 4, staged)` lowered for CUDA and its accumulator, after checking
    /// that the kernels (GPU semantics: every access checked against its allocation,
    /// NaN-filled memory) compute the reference's answer.
    fn lowered_and_checked(k: i64, staged: bool) -> (Lowered, BufferId) {
        let sch = tiled(30, k, 4, 4, staged);
        let lowered = lower(sch.program(), Backend::Cuda).unwrap();
        let err = crate::interp::check_lowered(&matmul(30, 8, k), &lowered, 5).unwrap();
        assert!(err < 1e-5, "relative error {err}");
        let acc = buffer(&lowered, "C", Scope::Local);
        (lowered, acc)
    }

    /// An output tile past the extent (30 rows in 2 blocks of 4 x 4) is masked off the
    /// write-back alone: the accumulator's initialization and update run unguarded, their
    /// shared reads inside the allocations, and the kernel (GPU semantics, every access
    /// checked against its allocation, NaN-filled memory) matches the reference.
    #[test]
    fn an_imperfect_output_tile_accumulates_unguarded_and_writes_back_guarded() {
        let (lowered, acc) = lowered_and_checked(16, true);
        let out = buffer(&lowered, "C", Scope::Global);
        assert_eq!(
            guarded(&lowered, acc),
            vec![false, false],
            "init and update"
        );
        assert_eq!(guarded(&lowered, out), vec![true], "write-back");
    }

    /// A reduction step past the extent (k = 18 in steps of 4) would add to a valid
    /// output: that conjunct of the update's guard stays, the output mask it is joined
    /// with goes.
    #[test]
    fn an_imperfect_reduction_tile_keeps_the_guard_of_the_update() {
        let (lowered, acc) = lowered_and_checked(18, true);
        assert_eq!(guarded(&lowered, acc), vec![false, true], "init, update");
        let update = guards(&lowered, acc)[1]
            .clone()
            .expect("the update's guard");
        let names: Vec<&str> = update
            .vars()
            .iter()
            .map(|v| lowered.program.var_name(*v))
            .collect();
        assert!(
            names.iter().all(|n| n.starts_with('k')),
            "the update's guard is over the reduction loops alone: {names:?}"
        );
    }

    /// Reads of the global inputs themselves cannot be proven inside them (a masked row
    /// lies past A): the update keeps its guard.
    #[test]
    fn an_update_reading_global_memory_keeps_its_guard() {
        let (lowered, acc) = lowered_and_checked(16, false);
        assert_eq!(guarded(&lowered, acc), vec![false, true], "init, update");
    }
}
