//! Evolutionary search over the sketches' decisions, ranked by the cost model.
//!
//! PLACEHOLDER during the cost-model work of 2026-11-23: the constructor and the
//! [`SearchStrategy`] implementation are the interface the tuner uses; the search itself
//! lands in the same series of commits and replaces this body.

use super::postproc::TargetLimits;
use super::random::{Proposal, RandomSearch, SearchStrategy};
use super::space::SearchSpace;
use crate::ir::Program;
use crate::schedule::Trace;

/// Evolutionary search of `program`'s design space for a target.
pub struct EvolutionarySearch {
    inner: RandomSearch,
}

impl EvolutionarySearch {
    /// Searches the space of `program` (the canonical workload program) for `target`;
    /// the same `seed` (and the same feedback) proposes the same candidates. The search
    /// parameters come from the space's `[search]` section.
    pub fn new(space: SearchSpace, target: TargetLimits, program: Program, seed: u64) -> Self {
        EvolutionarySearch {
            inner: RandomSearch::new(space, target, program, seed),
        }
    }
}

impl SearchStrategy for EvolutionarySearch {
    fn name(&self) -> &'static str {
        "evolutionary"
    }

    fn propose(&mut self, n: usize, is_known: &mut dyn FnMut(&Trace) -> bool) -> Proposal {
        self.inner.propose(n, is_known)
    }
}
