//! Stage 1, propose: ask the strategy for the next batch of new candidates, skipping
//! those the database already holds for this exact target.

use super::TuneError;
use crate::database::{Database, TargetKey};
use crate::schedule::Trace;
use crate::search::{Proposal, SearchStrategy};
use crate::workload::Workload;
use std::time::{Duration, Instant};

/// A batch proposed, and how long proposing it took.
pub(crate) struct Proposed {
    pub proposal: Proposal,
    pub took: Duration,
}

/// Up to `n` new candidates from `strategy`; a database error while checking what is
/// known ends the run.
pub(crate) fn propose(
    strategy: &mut (dyn SearchStrategy + Send),
    n: usize,
    db: &Database,
    w: &Workload,
    key: &TargetKey,
) -> Result<Proposed, TuneError> {
    let start = Instant::now();
    let mut db_error = None;
    let proposal = strategy.propose(n, &mut |t: &Trace| match db.has_measured(w, key, t) {
        Ok(known) => known,
        Err(e) => {
            db_error.get_or_insert(e);
            false
        }
    });
    if let Some(e) = db_error {
        return Err(e.into());
    }
    Ok(Proposed {
        proposal,
        took: start.elapsed(),
    })
}
