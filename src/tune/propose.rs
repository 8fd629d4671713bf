//! Stage 1, propose: ask the strategy for the next batch of new candidates, skipping
//! those the database already holds for this exact target.
//!
//! A [`Proposer`] holds everything proposing and building a batch's job needs and nothing
//! of the database: the strategy, the keys of the traces measured for this workload and
//! target (read once when the session opens, then kept up to date by the session as it
//! records), and the job template. It can therefore propose on any thread: beside the
//! measurement of the last batch, or on a measurement worker's thread in a run on several
//! devices (`super::devices`), while the database stays with the thread that writes it.

use super::measure::JobTemplate;
use crate::database::trace_key;
use crate::measure::Job;
use crate::schedule::Trace;
use crate::search::{Proposal, SearchStrategy};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A batch proposed, and how long proposing it took.
pub(crate) struct Proposed {
    pub proposal: Proposal,
    pub took: Duration,
}

/// One workload's strategy with what it must not propose again, and its job template.
pub(crate) struct Proposer {
    pub strategy: Box<dyn SearchStrategy + Send>,
    /// [`trace_key`]s of the traces measured (or rejected) for this workload and target.
    known: HashSet<String>,
    template: JobTemplate,
}

impl Proposer {
    pub fn new(
        strategy: Box<dyn SearchStrategy + Send>,
        known: HashSet<String>,
        template: JobTemplate,
    ) -> Proposer {
        Proposer {
            strategy,
            known,
            template,
        }
    }

    /// Up to `n` new candidates from the strategy.
    pub fn propose(&mut self, n: usize) -> Proposed {
        let start = Instant::now();
        let known = &self.known;
        let proposal = self
            .strategy
            .propose(n, &mut |t: &Trace| known.contains(&trace_key(t)));
        Proposed {
            proposal,
            took: start.elapsed(),
        }
    }

    /// Remembers that `trace` is in the database now.
    pub fn recorded(&mut self, trace: &Trace) {
        self.known.insert(trace_key(trace));
    }

    /// The job measuring `proposal`'s candidates; timing gives up on a candidate slower
    /// than `give_up_above_seconds` after its probe runs.
    pub fn job(&self, proposal: &Proposal, give_up_above_seconds: Option<f64>) -> Job {
        self.template
            .with(&proposal.candidates, give_up_above_seconds)
    }
}
