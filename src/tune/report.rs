//! What a tuning run tells its caller: why it stopped, the best schedule, and per round
//! what each stage of the pipeline did and how long it took; the JSON form of all that
//! (`tessel tune --report-json`).

use crate::database::TargetKey;
use crate::measure::FailureKind;
use crate::schedule::{text, Trace};
use crate::search::RejectKind;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Why the tuning loop stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The trial budget is spent.
    TrialBudget,
    /// The time limit passed.
    TimeLimit,
    /// `patience` rounds in a row found nothing faster.
    NoImprovement,
    /// Too many measured candidates in a row failed.
    TooManyFailures,
    /// The search found no new candidate to measure.
    SpaceExhausted,
}

impl StopReason {
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::TrialBudget => "trial budget spent",
            StopReason::TimeLimit => "time limit reached",
            StopReason::NoImprovement => "no improvement for the patience window",
            StopReason::TooManyFailures => "too many consecutive failures",
            StopReason::SpaceExhausted => "no new candidates in the space",
        }
    }
}

/// The best schedule found (or already in the database).
#[derive(Clone, Debug, PartialEq)]
pub struct Best {
    pub trace: Trace,
    pub median_seconds: f64,
    /// Whether it was measured in this run (else it came from the database).
    pub this_run: bool,
}

/// Wall seconds a round spent in each stage of the pipeline, on the tuner's critical
/// path: they add up to at most the round's wall time. Proposing that overlapped with
/// measuring is not in `propose` (see [`RoundStats::overlapped_propose_seconds`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize)]
pub struct StageSeconds {
    /// Waiting for the strategy's proposal (sampling, evolving, scoring, postprocessing,
    /// code generation).
    pub propose: f64,
    /// In the measurer starting the worker, running the reference and compiling the
    /// candidates (in parallel), where checking waited for it: on CUDA compiles run in the
    /// background while earlier candidates are checked and timed, and only the wait
    /// counts.
    pub compile: f64,
    /// Waiting for the device while another round held it (a network's rounds share
    /// each device: one compiles while another checks and times).
    pub device_wait: f64,
    /// In the measurer checking each candidate against the reference and timing it.
    pub check_time: f64,
    /// Committing outcomes to the database.
    pub record: f64,
    /// Feeding results back to the strategy and handling the cost model.
    pub learn: f64,
}

impl StageSeconds {
    pub fn total(&self) -> f64 {
        self.propose + self.compile + self.device_wait + self.check_time + self.record + self.learn
    }

    pub(crate) fn add(&mut self, o: &StageSeconds) {
        self.propose += o.propose;
        self.compile += o.compile;
        self.device_wait += o.device_wait;
        self.check_time += o.check_time;
        self.record += o.record;
        self.learn += o.learn;
    }
}

/// What one round did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RoundStats {
    pub round: usize,
    /// New candidates the strategy proposed: those measured plus those the
    /// postprocessors rejected.
    pub proposed: usize,
    /// Candidates the cost model scored while this round's batch was proposed (0 without
    /// a model).
    pub scored: usize,
    /// Candidates measured (ok or failed).
    pub measured: usize,
    pub ok: usize,
    /// Samples dropped as duplicates of earlier proposals.
    pub duplicates: usize,
    /// Samples the database already held for this target.
    pub already_measured: usize,
    /// Failures of this round by kind (measurement failures, `rejected:<why>`,
    /// `instantiation`).
    pub failures: BTreeMap<String, usize>,
    /// The best median latency so far (the database's best included).
    pub best_seconds: Option<f64>,
    /// Candidates timed by the probe runs alone, being more than the give-up factor
    /// slower than the best known (see `Tuner::with_give_up_factor`).
    pub given_up: usize,
    /// Candidates timed by the probe runs alone because those already took
    /// `TimingConfig::enough_seconds` (kernels of tens of milliseconds).
    pub long_enough: usize,
    pub seconds: StageSeconds,
    /// Of `seconds.check_time`, the candidates' timed runs (their kernels' own time,
    /// summed); the rest is warm-up, cache flushes, the checking run and the comparison.
    pub timed_run_seconds: f64,
    /// Proposing this round's batch that ran while the previous batch was measured.
    pub overlapped_propose_seconds: f64,
}

/// What the progress display shows after each round.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundReport {
    pub round: usize,
    /// Measured so far in this run.
    pub trials: usize,
    pub trial_budget: usize,
    pub best_seconds: Option<f64>,
    pub flops: f64,
    /// Failures so far by kind (measurement failures and rejections).
    pub failures: BTreeMap<String, usize>,
    /// Candidates measured per second of this run so far.
    pub candidates_per_second: f64,
}

/// The cost model a run used.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelUse {
    /// What kind of model (e.g. `gbdt`).
    pub kind: String,
    /// How many records the last model used was trained on.
    pub records_trained_on: usize,
    /// Models trained during this run (in the background).
    pub trained_this_run: usize,
    /// Whether the run started from a model stored in the database.
    pub loaded: bool,
}

/// The outcome of a tuning run.
#[derive(Clone, Debug)]
pub struct TuneReport {
    pub target: TargetKey,
    /// The search strategy's name (`random`, `evolutionary`).
    pub strategy: String,
    /// The cost model used, if any.
    pub model: Option<ModelUse>,
    pub stop: StopReason,
    pub rounds: usize,
    /// Candidates measured (ok or failed) in this run.
    pub trials: usize,
    pub ok: usize,
    /// Measurement failures by kind.
    pub failures: BTreeMap<FailureKind, usize>,
    /// Postprocessor rejections by kind (never measured).
    pub rejected: BTreeMap<RejectKind, usize>,
    /// Samples the sketch could not instantiate.
    pub instantiation_failures: usize,
    pub duplicates: usize,
    /// Candidates timed by the probe runs alone (far slower than the best).
    pub given_up: usize,
    /// Candidates timed by the probe runs alone, those being long enough.
    pub long_enough: usize,
    /// The candidates' timed runs, summed over the rounds (part of checking and timing).
    pub timed_run_seconds: f64,
    /// Candidates skipped because the database already had them.
    pub already_measured: usize,
    /// Records of this workload on this target fed to the strategy at the start.
    pub fed_back_at_start: usize,
    /// Traces of other workloads handed to the strategy as seeds.
    pub seed_traces: usize,
    pub best: Option<Best>,
    pub flops: f64,
    pub elapsed: Duration,
    /// Before the first round: opening the session (the workload's design space, the
    /// records fed back, other workloads' traces fitted) and loading the cost model.
    /// Single-workload runs only (a network's tasks open inside its rounds).
    pub opening: Duration,
    /// After the last round: waiting for a training in flight, caching the features it
    /// computed and storing the model. Single-workload runs only.
    pub closing: Duration,
    /// The stages' wall seconds summed over the rounds.
    pub stage_seconds: StageSeconds,
    /// Proposing hidden behind measurement, summed over the rounds.
    pub overlapped_propose_seconds: f64,
    /// Compile time reported by the builds of successful candidates, summed (candidates
    /// are compiled in parallel, so this can exceed the compile stage's wall time).
    pub compile_seconds: f64,
    /// Round by round.
    pub round_stats: Vec<RoundStats>,
    /// What the tuner said along the way (e.g. that it has no cost model).
    pub notes: Vec<String>,
    /// Per mutator of the strategy, the mutants it made over the run and how many replayed
    /// and passed the postprocessors (empty for a strategy that does not mutate).
    pub mutators: Vec<MutatorUse>,
    /// The fastest records timed again in a worker of their own after the search
    /// ([`Tuner::with_confirm`](super::Tuner::with_confirm)), in the order re-measured.
    pub confirmed: Vec<Confirmed>,
    /// Seconds spent timing them again.
    pub confirming: Duration,
}

/// A record the tune timed again after its search.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Confirmed {
    /// Its median when first timed.
    pub first_seconds: f64,
    /// Its median timed again, or why it failed then.
    pub again_seconds: Result<f64, String>,
}

impl Confirmed {
    /// Timed again over first timed: above 1 the first timing was lucky.
    pub fn ratio(&self) -> Option<f64> {
        self.again_seconds
            .as_ref()
            .ok()
            .map(|a| a / self.first_seconds)
    }
}

/// One mutator's use over a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MutatorUse {
    pub mutator: &'static str,
    pub tried: usize,
    pub accepted: usize,
}

impl MutatorUse {
    /// The strategy's per-mutator counts ([`SearchStrategy::mutator_stats`]), the mutators
    /// it never tried left out.
    ///
    /// [`SearchStrategy::mutator_stats`]: crate::search::SearchStrategy::mutator_stats
    pub fn from_stats(stats: Vec<(&'static str, usize, usize)>) -> Vec<MutatorUse> {
        stats
            .into_iter()
            .filter(|(_, tried, _)| *tried > 0)
            .map(|(mutator, tried, accepted)| MutatorUse {
                mutator,
                tried,
                accepted,
            })
            .collect()
    }
}

impl TuneReport {
    /// Failures and rejections by a short name, as the progress line shows them.
    pub fn failure_counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for (k, n) in &self.failures {
            *m.entry(failure_name(*k).to_string()).or_insert(0) += n;
        }
        for (k, n) in &self.rejected {
            *m.entry(rejection_name(*k)).or_insert(0) += n;
        }
        if self.instantiation_failures > 0 {
            m.insert("instantiation".into(), self.instantiation_failures);
        }
        m
    }

    /// Candidates measured per second of the run.
    pub fn candidates_per_second(&self) -> f64 {
        per_second(self.trials, self.elapsed)
    }

    /// The JSON form `tessel tune --report-json` writes for one workload (`spec` as the
    /// user named it).
    pub fn to_json(&self, spec: &str, workload_key: &str) -> serde_json::Value {
        serde_json::json!({
            "workload": spec,
            "workload_key": workload_key,
            "target": self.target,
            "strategy": self.strategy,
            "model": self.model,
            "stop": self.stop,
            "stop_reason": self.stop.describe(),
            "trials": self.trials,
            "ok": self.ok,
            "duplicates": self.duplicates,
            "already_measured": self.already_measured,
            "fed_back_at_start": self.fed_back_at_start,
            "seed_traces": self.seed_traces,
            "failures": self.failure_counts(),
            "elapsed_seconds": self.elapsed.as_secs_f64(),
            "candidates_per_second": self.candidates_per_second(),
            "opening_seconds": self.opening.as_secs_f64(),
            "closing_seconds": self.closing.as_secs_f64(),
            "stage_seconds": self.stage_seconds,
            "overlapped_propose_seconds": self.overlapped_propose_seconds,
            "timed_run_seconds": self.timed_run_seconds,
            "compile_seconds_summed": self.compile_seconds,
            "flops": self.flops,
            "best_seconds": self.best.as_ref().map(|b| b.median_seconds),
            "best_trace": self.best.as_ref().map(|b| text::print(&b.trace)),
            "rounds": self.round_stats,
            "mutators": self.mutators,
            "confirmed": self.confirmed,
            "confirming_seconds": self.confirming.as_secs_f64(),
            "notes": self.notes,
        })
    }
}

pub(crate) fn per_second(n: usize, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

pub(crate) fn failure_name(k: FailureKind) -> &'static str {
    match k {
        FailureKind::Instantiation => "instantiation",
        FailureKind::Rejected => "rejected",
        FailureKind::Compile => "compile",
        FailureKind::Launch => "launch",
        FailureKind::Runtime => "runtime",
        FailureKind::WrongAnswer => "wrong_answer",
        FailureKind::Timeout => "timeout",
        FailureKind::Crash => "crash",
    }
}

pub(crate) fn rejection_name(k: RejectKind) -> String {
    format!("rejected:{}", k.name())
}
