//! Random search: sample the design space afresh for every candidate, drop duplicates
//! (same printed IR, by SHA-256) and those the caller already measured, and run the
//! postprocessors. The evolutionary search (`super::evolutionary`) implements
//! [`SearchStrategy`] beside it.

use super::postproc::{verify, RejectKind, Rejection, TargetLimits, Verified};
use super::sketch;
use super::space::SearchSpace;
use crate::ir::printer::write_program;
use crate::ir::Program;
use crate::schedule::{Schedule, Trace};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};

/// A candidate ready to be measured.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The schedule, decisions included; replays on the program it was sampled from.
    pub trace: Trace,
    /// Hex SHA-256 of the printed IR.
    pub ir_hash: String,
    pub verified: Verified,
}

/// What one call to [`SearchStrategy::propose`] produced.
#[derive(Clone, Debug, Default)]
pub struct Proposal {
    pub candidates: Vec<Candidate>,
    /// Candidates the postprocessors refused, with their traces (the tuner records them).
    pub rejected: Vec<(Trace, Rejection)>,
    /// Samples whose sketch failed to apply (a primitive refused a sampled decision).
    pub instantiation_failures: usize,
    /// Samples whose IR was proposed before.
    pub duplicates: usize,
    /// Samples the caller said were already measured.
    pub known: usize,
    /// True when the strategy gave up before finding `n` new candidates: the space looks
    /// exhausted.
    pub exhausted: bool,
    /// Candidates the cost model (or, without one, the measured ancestry) scored to pick
    /// the batch; 0 for a strategy that scores nothing.
    pub scored: usize,
}

impl Proposal {
    /// Rejections by kind.
    pub fn rejections_by_kind(&self) -> BTreeMap<RejectKind, usize> {
        let mut m = BTreeMap::new();
        for (_, r) in &self.rejected {
            *m.entry(r.kind()).or_insert(0) += 1;
        }
        m
    }
}

/// What the tuner measured of one proposed candidate, handed back to the strategy.
#[derive(Clone, Debug)]
pub struct MeasuredResult {
    pub trace: Trace,
    /// Hex SHA-256 of the printed IR (as in [`Candidate::ir_hash`]).
    pub ir_hash: String,
    /// The median run time; `None` for a failure of any kind.
    pub median_seconds: Option<f64>,
}

/// A search strategy proposes candidates; the tuner measures them and reports back.
pub trait SearchStrategy {
    /// A short name for reports (`random`, `evolutionary`).
    fn name(&self) -> &'static str;
    /// Up to `n` new candidates; `is_known(trace)` says whether one was measured already.
    fn propose(&mut self, n: usize, is_known: &mut dyn FnMut(&Trace) -> bool) -> Proposal;
    /// The outcomes of measured candidates (of this strategy's proposals or, at the start,
    /// the database's records of this workload). Strategies that learn nothing ignore it.
    fn feedback(&mut self, _results: &[MeasuredResult]) {}
    /// The cost model to rank candidates with from now on (`None`: no model). Strategies
    /// that rank nothing ignore it.
    fn set_scorer(&mut self, _scorer: Option<std::sync::Arc<dyn crate::cost_model::Scorer>>) {}
    /// Traces to start from: other workloads' (the database's best, same target kind) to
    /// try on this one where their decisions fit (transfer), and this workload's own
    /// fastest records, which may come from an older space. Strategies without a
    /// population ignore it.
    fn seed_traces(&mut self, _traces: &[Trace]) {}
    /// Whether a cost model ranks the proposals (set by `set_scorer`).
    fn uses_model(&self) -> bool {
        false
    }
    /// Whether the strategy ranks its proposals with a model when it is given one (the
    /// tuner trains a model of the run's own records only for such a strategy).
    fn ranks_with_a_model(&self) -> bool {
        false
    }
    /// Per mutator: (name, mutants tried, mutants that replayed and passed the
    /// postprocessors), for the report. Empty for strategies that do not mutate.
    fn mutator_stats(&self) -> Vec<(&'static str, usize, usize)> {
        Vec::new()
    }
}

/// Hex SHA-256 of a program's printed IR: two candidates with the same hash are the same
/// program.
pub fn ir_hash(p: &Program) -> String {
    let mut digest = Digesting(Sha256::new());
    write_program(p, &mut digest);
    digest
        .0
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The printer's text fed to a digest as it is written.
struct Digesting(Sha256);

impl std::fmt::Write for Digesting {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.update(s.as_bytes());
        Ok(())
    }
}

/// Samples that may be tried per wanted candidate before the space counts as exhausted.
const ATTEMPTS_PER_CANDIDATE: usize = 16;

/// Random sampling of a design space.
pub struct RandomSearch {
    space: SearchSpace,
    target: TargetLimits,
    program: Program,
    seed: u64,
    draws: u64,
    seen: HashSet<String>,
}

impl RandomSearch {
    /// Samples the space of `program` (the canonical workload program) for `target`;
    /// the same `seed` proposes the same candidates.
    pub fn new(space: SearchSpace, target: TargetLimits, program: Program, seed: u64) -> Self {
        RandomSearch {
            space,
            target,
            program,
            seed,
            draws: 0,
            seen: HashSet::new(),
        }
    }

    /// One sample of the design space (not deduplicated, not postprocessed).
    pub fn sample(&mut self) -> Result<Schedule, sketch::SketchError> {
        let seed = splitmix(self.seed ^ splitmix(self.draws));
        self.draws += 1;
        let mut sch = Schedule::new(self.program.clone(), seed);
        sketch::apply(&self.space, &mut sch, splitmix(seed))?;
        Ok(super::padding::tighten_if_asked(
            &self.space,
            sch,
            &self.program,
        ))
    }
}

/// A 64-bit mixer (SplitMix64's finalizer): distinct, well-spread seeds from counters.
pub(crate) fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SearchStrategy for RandomSearch {
    fn name(&self) -> &'static str {
        "random"
    }

    fn propose(&mut self, n: usize, is_known: &mut dyn FnMut(&Trace) -> bool) -> Proposal {
        let mut out = Proposal::default();
        let mut attempts = 0;
        while out.candidates.len() < n {
            if attempts >= n.max(1) * ATTEMPTS_PER_CANDIDATE {
                out.exhausted = true;
                break;
            }
            attempts += 1;
            let sch = match self.sample() {
                Ok(s) => s,
                Err(_) => {
                    out.instantiation_failures += 1;
                    continue;
                }
            };
            let hash = ir_hash(sch.program());
            if !self.seen.insert(hash.clone()) {
                out.duplicates += 1;
                continue;
            }
            let trace = sch.trace().clone();
            if is_known(&trace) {
                out.known += 1;
                continue;
            }
            match verify(sch.program(), &self.space, &self.target) {
                Ok(verified) => out.candidates.push(Candidate {
                    trace,
                    ir_hash: hash,
                    verified,
                }),
                Err(r) => out.rejected.push((trace, r)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::printer::print_program;

    #[test]
    fn the_hash_is_the_digest_of_the_printed_program() {
        let w =
            crate::workload::preset("conv2d_nchw:n=1,c=16,h=14,w=14,k=32,r=3,s=3,stride=1,pad=1")
                .expect("preset");
        let limits = TargetLimits::Cuda(crate::target::cuda::CudaLimits::sm90_default());
        let mut search = RandomSearch::new(SearchSpace::cuda_default(), limits, w.to_program(), 3);
        let proposal = search.propose(4, &mut |_| false);
        assert!(!proposal.candidates.is_empty());
        for c in &proposal.candidates {
            let sch = crate::schedule::replay(&c.trace, w.to_program(), 0).expect("replays");
            let printed = print_program(sch.program());
            let hex: String = Sha256::digest(printed.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(ir_hash(sch.program()), hex);
            assert_eq!(c.ir_hash, hex);
        }
    }
}
