//! Where the time of an evolutionary round goes, phase by phase, for the `search_round`
//! bench and reports. Reading the clock is not IO: the search stays pure.
//!
//! Two kinds of figure: the serial phases (drawing mutants, bookkeeping, scoring, picking
//! the batch) in wall time of the calling thread, and the work done per candidate inside
//! the parallel evaluation (sampling, replay, hashing, lowering, the limit checks) in time
//! summed over the threads that did it, beside the wall time of the evaluation as a whole.

use std::fmt;
use std::time::{Duration, Instant};

/// Seconds spent in each phase of one round (or several, added up).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RoundTimes {
    /// Applying a sketch to fresh samples (thread time).
    pub sample: Duration,
    /// Drawing survivors and mutants (wall, serial).
    pub mutate: Duration,
    /// Replaying traces and mutants (thread time).
    pub replay: Duration,
    /// Printing and hashing the IR of replayed candidates (thread time).
    pub hash: Duration,
    /// Lowering candidates new to the round (thread time).
    pub lower: Duration,
    /// The target's limits checked on the lowered candidates (thread time).
    pub postprocess: Duration,
    /// The parallel evaluation as a whole: sampling, replay, hashing, lowering and checks
    /// (wall).
    pub evaluate: Duration,
    /// Scoring (wall; the cost model's featurizing and predicting, or the lineage).
    pub score: Duration,
    /// Deduplication and bookkeeping: the replay memo, admission into the round (wall).
    pub dedup: Duration,
    /// Picking the batch and generating its source (wall).
    pub batch: Duration,
    /// The whole round (wall).
    pub total: Duration,
}

impl RoundTimes {
    /// Adds `other`'s times to these.
    pub fn add(&mut self, other: &RoundTimes) {
        self.sample += other.sample;
        self.mutate += other.mutate;
        self.replay += other.replay;
        self.hash += other.hash;
        self.lower += other.lower;
        self.postprocess += other.postprocess;
        self.evaluate += other.evaluate;
        self.score += other.score;
        self.dedup += other.dedup;
        self.batch += other.batch;
        self.total += other.total;
    }

    /// The per-candidate work of one evaluation (thread time) added to these.
    pub(crate) fn add_work(&mut self, w: &Work) {
        self.sample += w.sample;
        self.replay += w.replay;
        self.hash += w.hash;
        self.lower += w.lower;
        self.postprocess += w.postprocess;
    }
}

impl fmt::Display for RoundTimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |d: Duration| d.as_secs_f64();
        write!(
            f,
            "total {:.2} s: mutate {:.2}, evaluate {:.2} (threads: sample {:.2}, replay {:.2}, \
             hash {:.2}, lower {:.2}, postprocess {:.2}), score {:.2}, dedup {:.2}, batch {:.2}",
            s(self.total),
            s(self.mutate),
            s(self.evaluate),
            s(self.sample),
            s(self.replay),
            s(self.hash),
            s(self.lower),
            s(self.postprocess),
            s(self.score),
            s(self.dedup),
            s(self.batch),
        )
    }
}

/// The thread time one candidate's evaluation spent in each step.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Work {
    pub sample: Duration,
    pub replay: Duration,
    pub hash: Duration,
    pub lower: Duration,
    pub postprocess: Duration,
}

/// Runs `f` and adds the time it took to `slot`.
pub(crate) fn timed<T>(slot: &mut Duration, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    *slot += start.elapsed();
    out
}
