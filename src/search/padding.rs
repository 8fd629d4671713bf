//! Tight padding: a sample pads each loop to the smallest multiple its tiles need.
//!
//! The padding rule draws each padded loop's multiple before the tiles are drawn on the
//! padded extent, so a sample may pad further than its tiles need: 1556 rows padded to
//! a multiple of 128 (1664) for blocks of 64 rows, where a multiple of 64 (1600) serves
//! the same blocks, threads and steps with 4% fewer rows. [`tighten`] takes, per padded
//! loop, the smallest of its multiples whose padded extent the sample's tiles still fit
//! with the same inner levels (only the outermost, the number of blocks or of
//! reduction steps, changes); the padding mutator still proposes the other multiples.

use super::mutator::{sites, MutatorKind};
use super::sketch::padded_extent;
use super::space::SearchSpace;
use crate::ir::Program;
use crate::schedule::{replay_fitted, Decision, Operand, Schedule, Trace};

/// `sch` [`tighten`]ed where `space` says `tiling.tight_padding`, else as it is.
pub fn tighten_if_asked(space: &SearchSpace, sch: Schedule, program: &Program) -> Schedule {
    match space.tight_padding {
        true => tighten(sch, program),
        false => sch,
    }
}

/// `sch` with each padding multiple lowered to the smallest one that keeps its tiles'
/// inner levels (`sch` itself where none is lower); `program` is the one `sch` was sampled
/// from.
pub fn tighten(sch: Schedule, program: &Program) -> Schedule {
    let mut best = sch;
    for site in sites(best.trace()) {
        if site.kind != MutatorKind::Padding {
            continue;
        }
        if let Some(tighter) = tighter_at(best.trace(), site.inst, program) {
            best = tighter;
        }
    }
    best
}

/// The sample of `trace` with the padding multiple at `inst` lowered to the smallest that
/// keeps every tile decision's inner levels and shrinks a padded extent, if any does.
fn tighter_at(trace: &Trace, inst: usize, program: &Program) -> Option<Schedule> {
    let Some(Decision::Categorical(current)) = trace.insts[inst].decision else {
        return None;
    };
    let Some(Operand::List(candidates)) = trace.insts[inst].attr("candidates") else {
        return None;
    };
    let multiple = |i: usize| match candidates.get(i) {
        Some(Operand::Int(m)) => Some(*m),
        _ => None,
    };
    let now = multiple(current)?;
    // Where the axis's extent is known, only multiples that shrink it are tried, each
    // padded extent once.
    let extent = padded_axis_extent(trace, inst, program);
    let padded = |m: i64| extent.map_or(m, |e| padded_extent(e, m));
    let shrinks = |m: i64| extent.is_none() || padded(m) < padded(now);
    let mut lower: Vec<(i64, usize)> = (0..candidates.len())
        .filter_map(|i| multiple(i).map(|m| (m, i)))
        .filter(|&(m, _)| m < now && shrinks(m))
        .collect();
    lower.sort_unstable();
    lower.dedup_by_key(|(m, _)| padded(*m));
    lower.into_iter().find_map(|(_, i)| {
        let sch = replay_fitted(
            &trace.with_decision(inst, Decision::Categorical(i)),
            program.clone(),
            0,
        )
        .ok()?;
        shrinks_keeping_inner_tiles(trace, sch.trace()).then_some(sch)
    })
}

/// The extent, in `program`, of the iteration variable that the padding multiple sampled
/// at `inst` pads: the `pad_einsum` reading it names a block got by name, and the
/// multiple's place in its list is the variable's. `None` where the trace does not say.
fn padded_axis_extent(trace: &Trace, inst: usize, program: &Program) -> Option<i64> {
    let rv = *trace.insts[inst].outputs.first()?;
    let (pad, axis) = trace.insts[inst + 1..].iter().find_map(|i| {
        let Some(Operand::List(items)) = i.attr("padding") else {
            return None;
        };
        let axis = items.iter().position(|o| *o == Operand::Rv(rv))?;
        Some((i, axis))
    })?;
    let Some(Operand::Rv(block)) = pad.inputs.first() else {
        return None;
    };
    let get = trace.insts.iter().find(|i| i.outputs.contains(block))?;
    let Some(Operand::Str(name)) = get.attr("name") else {
        return None;
    };
    let [b] = program.find_block(name)[..] else {
        return None;
    };
    Some(program.block(b).iter_vars.get(axis)?.extent)
}

/// Whether every tile decision of `after` has the inner levels it had in `before`, and at
/// least one has fewer outermost iterations (a padded extent shrank).
fn shrinks_keeping_inner_tiles(before: &Trace, after: &Trace) -> bool {
    if before.insts.len() != after.insts.len() {
        return false;
    }
    let mut shrank = false;
    for (b, a) in before.insts.iter().zip(&after.insts) {
        if let (Some(Decision::Tile(t)), Some(Decision::Tile(u))) = (&b.decision, &a.decision) {
            let (Some((t0, t_inner)), Some((u0, u_inner))) = (t.split_first(), u.split_first())
            else {
                return false;
            };
            if t_inner != u_inner || u0 > t0 {
                return false;
            }
            shrank |= u0 < t0;
        }
    }
    shrank
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{sketch, SearchSpace};

    fn program(spec: &str) -> Program {
        let w = crate::workload::from_cli(spec, |_| Err(std::io::Error::other("no files")))
            .expect("workload");
        crate::database::canonical_program(&w).expect("canonical program")
    }

    /// Samples of `spec` before and after [`tighten`], for the seeds whose sketch applies.
    fn tightened(spec: &str, seeds: u64) -> Vec<(Trace, Schedule)> {
        let space = SearchSpace::cuda_default();
        let p = program(spec);
        (0..seeds)
            .filter_map(|seed| {
                let mut sch = Schedule::new(p.clone(), seed);
                sketch::apply(&space, &mut sch, seed).ok()?;
                let before = sch.trace().clone();
                Some((before, tighten(sch, &p)))
            })
            .collect()
    }

    #[test]
    fn a_tightened_sample_pads_less_with_the_same_inner_tiles() {
        let samples = tightened("matmul:m=1556,n=3953,k=2198", 48);
        let mut shrank = 0;
        for (before, after) in &samples {
            if after.trace() != before {
                assert!(
                    shrinks_keeping_inner_tiles(before, after.trace()),
                    "{}\n->\n{}",
                    crate::schedule::text::print(before),
                    crate::schedule::text::print(after.trace())
                );
                shrank += 1;
            }
        }
        // Multiples of 128 drawn for tiles of 64 or 16, among others.
        assert!(shrank > 0, "none of {} samples padded less", samples.len());
    }

    #[test]
    fn a_tightened_sample_computes_the_reference() {
        let p = program("matmul:97x61x53");
        let samples = tightened("matmul:97x61x53", 64);
        let changed: Vec<&Schedule> = samples
            .iter()
            .filter(|(before, after)| after.trace() != before)
            .map(|(_, after)| after)
            .take(3)
            .collect();
        assert!(!changed.is_empty(), "no sample of 97 x 61 x 53 padded less");
        for sch in changed {
            crate::interp::check(&p, sch.program(), 3).expect("the reference's answer");
        }
    }

    #[test]
    fn a_space_with_tight_padding_samples_the_tightened_draws() {
        use crate::search::{RandomSearch, TargetLimits};
        let p = program("matmul:m=1556,n=3953,k=2198");
        let off = SearchSpace::cuda_default();
        assert!(
            !off.tight_padding,
            "off in the embedded space: level in tuning"
        );
        let on = SearchSpace {
            tight_padding: true,
            ..off.clone()
        };
        let target = TargetLimits::Cuda(crate::target::cuda::CudaLimits::sm90_default());
        let mut loose = RandomSearch::new(off, target.clone(), p.clone(), 7);
        let mut tight = RandomSearch::new(on, target, p, 7);
        let mut shrank = 0;
        for _ in 0..32 {
            let (Ok(a), Ok(b)) = (loose.sample(), tight.sample()) else {
                continue;
            };
            if a.trace() != b.trace() {
                assert!(shrinks_keeping_inner_tiles(a.trace(), b.trace()));
                shrank += 1;
            }
        }
        assert!(shrank > 0, "no draw padded less");
    }

    #[test]
    fn each_padding_multiple_is_read_as_the_extent_of_its_axis() {
        let p = program("matmul:m=1556,n=3953,k=2198");
        let (trace, _) = tightened("matmul:m=1556,n=3953,k=2198", 1).remove(0);
        let extents: Vec<Option<i64>> = sites(&trace)
            .into_iter()
            .filter(|s| s.kind == MutatorKind::Padding)
            .map(|s| padded_axis_extent(&trace, s.inst, &p))
            .collect();
        assert_eq!(extents, vec![Some(1556), Some(3953), Some(2198)]);
    }
}
