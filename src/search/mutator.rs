//! Mutators: a new candidate from a trace by changing one of its decisions, never its
//! instructions, so a mutant stays in the sketch of its parent.
//!
//! * **Tile size** (`sample_perfect_tile`): one prime factor moves between two levels of
//!   the same loop; the innermost level stays within the instruction's
//!   `max_innermost_factor`. The thread and vthread extents are levels of the spatial
//!   tiles, so this is also the mutator of thread-binding extents; whether the block still
//!   fits the target (threads, vthreads, shared memory) is for the postprocessors to say.
//! * **Unroll depth** (the `sample_categorical` read by the auto-unroll annotation),
//!   **vector length** (the one that splits a cooperative fetch before `vectorize`) and
//!   **split-K count** (the one that splits the loop `rfactor` takes): another candidate of
//!   the same instruction. Only traces of the split-K sketch have a split-K decision, so
//!   the count changes within that sketch.
//! * **Pipeline stages** (the `sample_categorical` read by a `software_pipeline_stage`
//!   annotation): another stage count of the shared fetch's software pipeline.
//! * **Padding multiple** (a `sample_categorical` read by `pad_einsum`): another multiple
//!   the loop is padded to, so another padded extent and share of wasted work (an odd
//!   GEMM whose sampled multiple wastes 13% of its FLOPs has neighbours that waste 3%).
//!
//! * **Sketch choice** (a `sample_categorical` no later instruction reads: a branch of the
//!   sketch rule, such as the way an NCHW conv's stage is stored): the other candidate.
//!   The trace's instructions after it are the old branch's (a replay would repeat them),
//!   so the caller grows such a mutant again from the sketch, with the trace's decisions
//!   as hints (`crate::search::sketch::regrow`). Other categoricals no mutator names (a
//!   channel tile) stay as sampled, as before.
//! * **Compute location** (`sample_compute_location`): another of the loops a sketch rule
//!   offered for a stage (the CPU's accumulator write-back at one of two tile levels, the
//!   register-tile sketch's packed panel per column tile or per reduction block). The
//!   stage's loops change with it; replay matches the trace's `get_loops` of it innermost
//!   first.
//!
//! A new split-K count or padding multiple changes the extent of a loop whose tile sizes
//! are decided after it, so those decisions no longer fit: [`replay_mutant`] fits them to
//! the new extent as a transfer does (`schedule::replay_fitted`: the inner levels, a
//! thread's registers and the block's threads, kept where they divide it), and drops a
//! decision that still does not replay and samples it afresh; the mutant stays in its
//! sketch.
//!
//! A mutant is only a trace: the caller replays and verifies it and counts, per
//! [`MutatorKind`], how many were tried and how many were accepted ([`MutatorStats`]).

use super::sketch::AUTO_UNROLL_KEY;
use crate::ir::pipeline::STAGE_KEY;
use crate::ir::Program;
use crate::schedule::{
    replay_fitted, Decision, InstKind, Operand, ReplayError, Schedule, ScheduleError, Trace,
};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// What a mutator changes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MutatorKind {
    TileSize,
    Unroll,
    VectorLength,
    SplitK,
    PipelineStages,
    Padding,
    ComputeLocation,
    SketchChoice,
}

impl MutatorKind {
    pub const ALL: [MutatorKind; 8] = [
        MutatorKind::TileSize,
        MutatorKind::Unroll,
        MutatorKind::VectorLength,
        MutatorKind::SplitK,
        MutatorKind::PipelineStages,
        MutatorKind::Padding,
        MutatorKind::ComputeLocation,
        MutatorKind::SketchChoice,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            MutatorKind::TileSize => "tile_size",
            MutatorKind::Unroll => "unroll",
            MutatorKind::VectorLength => "vector_length",
            MutatorKind::SplitK => "split_k",
            MutatorKind::PipelineStages => "pipeline_stages",
            MutatorKind::Padding => "padding",
            MutatorKind::ComputeLocation => "compute_location",
            MutatorKind::SketchChoice => "sketch_choice",
        }
    }
}

/// A decision a mutator can change: the instruction's index and the mutator.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub inst: usize,
    pub kind: MutatorKind,
}

/// The decisions of `trace` some mutator can change (a tile with a factor to move, a
/// categorical with another candidate), in trace order.
pub fn sites(trace: &Trace) -> Vec<Site> {
    trace
        .insts
        .iter()
        .enumerate()
        .filter_map(|(i, inst)| {
            let kind = match (&inst.kind, &inst.decision) {
                // Moving a prime factor between levels keeps the tiles' product, so an
                // imperfect tile (`sample_tile`) keeps its padding and waste too.
                (k, Some(Decision::Tile(t))) if k.samples_tiles() => {
                    (!tile_moves(t, max_innermost(trace, i)).is_empty())
                        .then_some(MutatorKind::TileSize)
                }
                (InstKind::SampleCategorical, Some(Decision::Categorical(_))) => {
                    (candidate_count(trace, i) > 1)
                        .then(|| {
                            categorical_use(trace, i).or_else(|| {
                                (!value_is_read(trace, i)).then_some(MutatorKind::SketchChoice)
                            })
                        })
                        .flatten()
                }
                (InstKind::SampleComputeLocation, Some(Decision::Categorical(_))) => {
                    (candidate_count(trace, i) > 1).then_some(MutatorKind::ComputeLocation)
                }
                _ => None,
            }?;
            Some(Site { inst: i, kind })
        })
        .collect()
}

/// A mutant of `trace`: a mutator drawn uniformly among those with a site in the trace,
/// one of its sites, and a new decision there. `None` when no decision can change.
pub fn mutate(trace: &Trace, rng: &mut ChaCha8Rng) -> Option<(MutatorKind, Trace)> {
    mutate_sites(trace, &sites(trace), rng)
}

/// [`mutate`] given the trace's [`sites`] (computed once per trace by a caller that
/// mutates it often).
pub fn mutate_sites(
    trace: &Trace,
    all: &[Site],
    rng: &mut ChaCha8Rng,
) -> Option<(MutatorKind, Trace)> {
    let mut kinds: Vec<MutatorKind> = all.iter().map(|s| s.kind).collect();
    kinds.sort();
    kinds.dedup();
    if kinds.is_empty() {
        return None;
    }
    let kind = kinds[rng.gen_range(0..kinds.len())];
    mutate_at(trace, all, kind, rng).map(|t| (kind, t))
}

/// A mutant of `trace` by mutator `kind`: one of its sites, uniformly, and a new
/// decision there. `None` when the trace has no such site.
pub fn mutate_kind(trace: &Trace, kind: MutatorKind, rng: &mut ChaCha8Rng) -> Option<Trace> {
    mutate_at(trace, &sites(trace), kind, rng)
}

/// [`mutate_kind`] given the trace's `sites`.
fn mutate_at(
    trace: &Trace,
    sites: &[Site],
    kind: MutatorKind,
    rng: &mut ChaCha8Rng,
) -> Option<Trace> {
    let of_kind: Vec<&Site> = sites.iter().filter(|s| s.kind == kind).collect();
    if of_kind.is_empty() {
        return None;
    }
    let site = of_kind[rng.gen_range(0..of_kind.len())];
    let decision = match trace.insts[site.inst].decision.as_ref()? {
        Decision::Tile(t) => {
            let moves = tile_moves(t, max_innermost(trace, site.inst));
            let (from, prime, to) = moves[rng.gen_range(0..moves.len())];
            let mut t = t.clone();
            t[from] /= prime;
            t[to] *= prime;
            Decision::Tile(t)
        }
        Decision::Categorical(current) => {
            let count = candidate_count(trace, site.inst);
            // Another index, uniformly.
            let pick = rng.gen_range(0..count - 1);
            Decision::Categorical(if pick >= *current { pick + 1 } else { pick })
        }
    };
    Some(trace.with_decision(site.inst, decision))
}

/// Replays a mutant on `program` with its tile decisions fitted to the loops' extents
/// ([`replay_fitted`]: a decision that fits is kept as it is, so a mutant whose extents did
/// not change replays as its trace says); a decision still refused is dropped and sampled
/// afresh from `seed`; any other error is the mutant's.
pub fn replay_mutant(trace: &Trace, program: &Program, seed: u64) -> Result<Schedule, ReplayError> {
    let mut trace = trace.clone();
    loop {
        match replay_fitted(&trace, program.clone(), seed) {
            // Each retry removes one decision: at most as many retries as decisions.
            Err(e) if refuses_a_decision(&e, &trace) => trace.insts[e.index].decision = None,
            done => return done,
        }
    }
}

/// Whether `e` is replay refusing the decision of an instruction of `trace` that has one.
fn refuses_a_decision(e: &ReplayError, trace: &Trace) -> bool {
    matches!(e.source, ScheduleError::InvalidDecision { .. })
        && trace
            .insts
            .get(e.index)
            .is_some_and(|i| i.decision.is_some())
}

/// Every move of one prime factor between two levels of `tiles`: (from, prime, to), the
/// innermost level kept at most `max_innermost`. A prime that divides a level several
/// times is one move.
fn tile_moves(tiles: &[i64], max_innermost: i64) -> Vec<(usize, i64, usize)> {
    let last = tiles.len().saturating_sub(1);
    let mut out = Vec::new();
    for (from, t) in tiles.iter().enumerate() {
        for prime in distinct_primes(*t) {
            for (to, u) in tiles.iter().enumerate() {
                let fits = to != last || u.checked_mul(prime).is_some_and(|v| v <= max_innermost);
                if to != from && fits {
                    out.push((from, prime, to));
                }
            }
        }
    }
    out
}

fn distinct_primes(mut n: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut d = 2;
    while d * d <= n {
        if n % d == 0 {
            out.push(d);
            while n % d == 0 {
                n /= d;
            }
        }
        d += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// The `max_innermost_factor` of the `sample_perfect_tile` or `sample_tile` at `inst` (no
/// limit if the attribute is missing: replay refuses such a trace anyway).
fn max_innermost(trace: &Trace, inst: usize) -> i64 {
    match trace.insts[inst].attr("max_innermost_factor") {
        Some(Operand::Int(m)) => *m,
        _ => i64::MAX,
    }
}

/// The number of choices of the `sample_categorical` (its candidates) or
/// `sample_compute_location` (its locations) at `inst`.
fn candidate_count(trace: &Trace, inst: usize) -> usize {
    trace.insts[inst].choices().map_or(0, |(_, n)| n)
}

/// Whether a later instruction of `trace` reads the value of the sampling instruction at
/// `inst` (as an input or in an attribute). A choice nothing reads is a branch of the
/// sketch that wrote the trace.
fn value_is_read(trace: &Trace, inst: usize) -> bool {
    fn reads(op: &Operand, rv: u32) -> bool {
        match op {
            Operand::Rv(r) => *r == rv,
            Operand::List(items) | Operand::Product(items) => items.iter().any(|o| reads(o, rv)),
            _ => false,
        }
    }
    let Some(&rv) = trace.insts[inst].outputs.first() else {
        return false;
    };
    trace.insts[inst + 1..]
        .iter()
        .any(|i| i.inputs.iter().any(|o| reads(o, rv)) || i.attrs.iter().any(|(_, o)| reads(o, rv)))
}

/// What the value of the `sample_categorical` at `inst` is used for: the auto-unroll
/// annotation, the split that `rfactor` takes (split-K), or a split whose inner loop is
/// vectorized (a fetch's vector length); `None` for another use (a sketch choice).
fn categorical_use(trace: &Trace, inst: usize) -> Option<MutatorKind> {
    let rv = *trace.insts[inst].outputs.first()?;
    let uses_rv = |op: &Operand| matches!(op, Operand::Rv(r) if *r == rv);
    let later = &trace.insts[inst + 1..];
    for (j, use_) in later.iter().enumerate() {
        match use_.kind {
            InstKind::Annotate
                if use_.attr("value").is_some_and(uses_rv)
                    && matches!(use_.attr("key"), Some(Operand::Str(k)) if k == AUTO_UNROLL_KEY) =>
            {
                return Some(MutatorKind::Unroll);
            }
            InstKind::Annotate
                if matches!(use_.attr("value"), Some(Operand::List(items)) if items.iter().any(uses_rv))
                    && matches!(use_.attr("key"), Some(Operand::Str(k)) if k == STAGE_KEY) =>
            {
                return Some(MutatorKind::PipelineStages);
            }
            InstKind::PadEinsum if matches!(use_.attr("padding"), Some(Operand::List(items)) if items.iter().any(uses_rv)) =>
            {
                return Some(MutatorKind::Padding);
            }
            InstKind::Split => {
                let Some(Operand::List(factors)) = use_.attr("factors") else {
                    continue;
                };
                if !factors.iter().any(uses_rv) {
                    continue;
                }
                let taken_by = |k: InstKind| {
                    later[j + 1..].iter().any(|u| {
                        u.kind == k
                            && u.inputs
                                .iter()
                                .any(|i| matches!(i, Operand::Rv(r) if use_.outputs.contains(r)))
                    })
                };
                if taken_by(InstKind::Rfactor) {
                    return Some(MutatorKind::SplitK);
                }
                if taken_by(InstKind::Vectorize) {
                    return Some(MutatorKind::VectorLength);
                }
            }
            _ => {}
        }
    }
    None
}

/// How many mutants of each kind were tried and how many replayed and passed the
/// postprocessors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MutatorStats {
    tried: [usize; MutatorKind::ALL.len()],
    accepted: [usize; MutatorKind::ALL.len()],
}

impl MutatorStats {
    fn slot(kind: MutatorKind) -> usize {
        MutatorKind::ALL
            .iter()
            .position(|k| *k == kind)
            .unwrap_or_default()
    }

    /// Counts one mutant of `kind`.
    pub fn record(&mut self, kind: MutatorKind, accepted: bool) {
        let i = Self::slot(kind);
        self.tried[i] += 1;
        if accepted {
            self.accepted[i] += 1;
        }
    }

    /// (mutator name, tried, accepted) for every mutator.
    pub fn rows(&self) -> Vec<(&'static str, usize, usize)> {
        MutatorKind::ALL
            .iter()
            .enumerate()
            .map(|(i, k)| (k.name(), self.tried[i], self.accepted[i]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_moves_keep_the_product_and_the_innermost_limit() {
        let moves = tile_moves(&[4, 1, 3], 3);
        // 2 may go to level 1 only (level 2 would become 6 > 3); 3 may go to 0 or 1.
        assert_eq!(moves, vec![(0, 2, 1), (2, 3, 0), (2, 3, 1)]);
        assert!(tile_moves(&[1, 1, 1], 16).is_empty());
        assert!(tile_moves(&[311, 1], 16) == vec![]);
    }
}
