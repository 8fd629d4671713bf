//! The search: a workload's design space (sketch rules read from `search_spaces/*.toml`),
//! the postprocessors that reject what cannot run on the target, and the strategies that
//! propose candidates: random sampling, and the evolutionary search that mutates the
//! decisions of measured and sampled traces, ranked by the cost model.
//!
//! No IO here: the tuner (`crate::tune`) measures and records what the search proposes.

pub mod evolutionary;
pub mod mutator;
pub mod padding;
pub mod postproc;
pub mod random;
pub mod round_times;
pub mod sample;
pub mod sketch;
pub mod space;

pub use evolutionary::{Branch, EvolutionarySearch, TileClass};
pub use mutator::MutatorKind;
pub use postproc::{RejectKind, Rejection, TargetLimits, Verified};
pub use random::{ir_hash, Candidate, MeasuredResult, Proposal, RandomSearch, SearchStrategy};
pub use round_times::RoundTimes;
pub use sample::{sample, sample_like, BlockShape, NoCandidate, NotLike, SampleSummary};
pub use sketch::{SketchError, SketchKind};
pub use space::{PipelineRule, SearchParams, SearchSpace, SpaceError};

/// The strategies `tessel tune --strategy` names.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StrategyKind {
    Random,
    Evolutionary,
}

impl StrategyKind {
    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Random => "random",
            StrategyKind::Evolutionary => "evolutionary",
        }
    }

    /// A strategy of this kind over `program`'s space for `target`.
    pub fn build(
        self,
        space: SearchSpace,
        target: TargetLimits,
        program: crate::ir::Program,
        seed: u64,
    ) -> Box<dyn SearchStrategy + Send> {
        match self {
            StrategyKind::Random => Box::new(RandomSearch::new(space, target, program, seed)),
            StrategyKind::Evolutionary => {
                Box::new(EvolutionarySearch::new(space, target, program, seed))
            }
        }
    }
}
