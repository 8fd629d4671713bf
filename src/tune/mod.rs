//! The tuning loop: rounds of propose -> build -> check -> time -> record -> learn, with
//! stop reasons.
//!
//! Each round moves one batch through the pipeline, one stage per file:
//!
//! 1. [`propose`]: the search strategy proposes new candidates of the canonical workload
//!    program (those the database already holds for this exact target are skipped, so a
//!    second run continues where the first stopped);
//! 2. to 4. [`measure`]: the isolated worker builds them (in parallel), checks each
//!    against the reference and times those that are right;
//! 5. [`record`]: every outcome (successes, failures with their kind, the
//!    postprocessors' rejections) is committed to the database exactly once;
//! 6. [`learn`]: the results go back to the strategy, and the cost model is trained in
//!    the background and swapped in when ready.
//!
//! **Pipelining.** While the worker measures batch k, batch k+1 is proposed on another
//! thread (on a GPU target by default; on the CPU the kernels being timed need every
//! core). Batch k's results reach the strategy before batch k+2 is proposed. The worker
//! compiles a batch's candidates on every core before it times them.
//!
//! Before the first round the strategy gets the database's records of this workload on
//! this target and the best traces of other workloads ([`warm_start`]). The loop stops
//! on the first of: the trial budget, the time limit, `patience` rounds without
//! improvement, too many consecutive failures, or an exhausted space, and returns a
//! [`TuneReport`] saying why, with every round's counts and stage times. With
//! [`Tuner::with_confirm`] the fastest records are then timed again, each in a fresh
//! worker ([`Verifier::confirm`]) and the best is taken from the database after that.

pub mod devices;
pub mod learn;
mod measure;
mod model_source;
pub mod network;
mod propose;
pub(crate) mod record;
pub mod report;
mod session;
pub mod shipped;
mod target;
pub mod warm_start;

pub use devices::Devices;
pub use learn::{LearnedModel, ModelPolicy, ModelSource, TrainingData};
pub use model_source::StoredModels;
pub use network::{NetworkReport, NetworkRound, TaskOutcome};
pub use report::{
    Best, Confirmed, ModelUse, MutatorUse, RoundReport, RoundStats, StageSeconds, StopReason,
    TuneReport,
};
pub use target::{target_key, TuneTarget};

use crate::database::{self, Database};
use crate::measure::worker::{MeasureError, Measurer};
use crate::measure::TimingConfig;
use crate::search::{SearchSpace, StrategyKind};
use crate::verify::{Verifier, VerifyError};
use crate::workload::Workload;
use learn::Learner;
use session::RoundPlan;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;
use warm_start::Seeds;

/// Why tuning could not run at all.
#[derive(Debug, Error)]
pub enum TuneError {
    #[error("workload: {0}")]
    Workload(#[from] crate::workload::WorkloadError),
    #[error("database: {0}")]
    Database(#[from] database::DatabaseError),
    #[error("measurement: {0}")]
    Measure(#[from] MeasureError),
    #[error("target: {0}")]
    Target(String),
    #[error("search space: {0}")]
    Space(#[from] crate::search::SpaceError),
    #[error("the workload has no design space: {0}")]
    Sketch(#[from] crate::search::SketchError),
    #[error("timing the fastest again: {0}")]
    Confirm(#[from] VerifyError),
}

/// Candidates measured per round unless the caller says otherwise (MetaSchedule's 64).
pub const DEFAULT_BATCH: usize = 64;

/// A candidate more than this many times slower than the best known is timed by its
/// probe runs alone: it cannot become the best, and its latency (a median of 3 runs)
/// is still recorded for the cost model. On a 2.3 ms GEMM this cuts a typical
/// candidate's timing from 0.1 s to under 10 ms.
pub const DEFAULT_GIVE_UP_FACTOR: f64 = 2.0;

/// How candidates are timed unless the caller says otherwise: at least 10 runs and
/// about 0.1 s of them (TVM's `min_repeat_ms = 100`), at most 100, the L2 (or last-level
/// cache) flushed before each, after 10 ms of warm-up; the median is recorded. Timing
/// stops after the 10 runs when their interquartile range is within 1% of their median
/// ([`DEFAULT_SETTLED_SPREAD`]).
pub fn default_timing() -> TimingConfig {
    TimingConfig {
        warmup_seconds: 0.01,
        min_runs: 10,
        max_runs: 100,
        max_seconds: 0.1,
        flush_cache: true,
        give_up_above_seconds: None,
        give_up_factor: None,
        settled_spread: Some(DEFAULT_SETTLED_SPREAD),
        enough_seconds: Some(ENOUGH_SECONDS),
    }
}

/// Seconds of timed runs after which a candidate needs no more than the probe runs
/// (`TimingConfig::enough_seconds`): the same as `max_seconds`, so that a kernel of 34 ms
/// or more is timed by 3 runs, not 10.
pub const ENOUGH_SECONDS: f64 = 0.1;

/// Runs whose middle half lies within this share of their median need no more runs.
/// On the H100 a tuned 2 ms GEMM's runs spread 0.5% from fastest to slowest
/// (2026-11-24), so 10 runs give its median to well under 1%; before, a
/// multi-millisecond candidate took 0.1 s of runs, half of what measuring it cost
/// (large GEMMs measured 4.0-4.4 candidates per second).
pub const DEFAULT_SETTLED_SPREAD: f64 = 0.01;

type Progress<'a> = Box<dyn FnMut(&RoundReport) + 'a>;
type Notify<'a> = Box<dyn FnMut(&str) + 'a>;

/// The tuning loop, configured by a builder.
pub struct Tuner<'a> {
    target: TuneTarget,
    space: Option<SearchSpace>,
    strategy: StrategyKind,
    trials: usize,
    batch: usize,
    time_limit: Option<Duration>,
    seed: Option<u64>,
    patience: Option<usize>,
    max_consecutive_failures: usize,
    overlap: Option<bool>,
    db: Option<&'a mut Database>,
    measurer: Option<Measurer>,
    timing: TimingConfig,
    give_up_factor: Option<f64>,
    compile_timeout: Duration,
    models: Option<Arc<dyn ModelSource>>,
    model_policy: ModelPolicy,
    progress: Option<Progress<'a>>,
    notify: Option<Notify<'a>>,
    task_policy: crate::network::Policy,
    workers: Vec<Measurer>,
    confirm: usize,
}

impl<'a> Tuner<'a> {
    /// A tuner for `target`: evolutionary search, 64 trials in rounds of
    /// [`DEFAULT_BATCH`], [`default_timing`], no time limit, no patience limit, 64
    /// consecutive failures at most, no cost model, an in-memory database unless one is
    /// given.
    pub fn new(target: TuneTarget) -> Tuner<'a> {
        Tuner {
            target,
            space: None,
            strategy: StrategyKind::Evolutionary,
            trials: 64,
            batch: DEFAULT_BATCH,
            time_limit: None,
            seed: None,
            patience: None,
            max_consecutive_failures: 64,
            overlap: None,
            db: None,
            measurer: None,
            timing: default_timing(),
            give_up_factor: Some(DEFAULT_GIVE_UP_FACTOR),
            compile_timeout: Duration::from_secs(20),
            models: None,
            model_policy: ModelPolicy::default(),
            progress: None,
            notify: None,
            task_policy: crate::network::Policy::Gradient,
            workers: Vec::new(),
            confirm: 0,
        }
    }

    /// After the search, time the workload's `k` fastest records again in a fresh
    /// worker, keeping the second timing ([`Verifier::confirm`]); 0 (the default) does
    /// not. The re-measurements are not trials.
    pub fn with_confirm(mut self, k: usize) -> Self {
        self.confirm = k;
        self
    }

    /// Candidates to measure in all (rejections do not count).
    pub fn with_trials(mut self, n: usize) -> Self {
        self.trials = n;
        self
    }
    /// Candidates measured per round.
    pub fn with_batch(mut self, n: usize) -> Self {
        self.batch = n.max(1);
        self
    }
    /// The search strategy (evolutionary unless set).
    pub fn with_strategy(mut self, kind: StrategyKind) -> Self {
        self.strategy = kind;
        self
    }
    pub fn with_time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }
    /// Makes proposals deterministic.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
    /// Stop after this many rounds without a faster candidate.
    pub fn with_patience(mut self, rounds: usize) -> Self {
        self.patience = Some(rounds.max(1));
        self
    }
    pub fn with_max_consecutive_failures(mut self, n: usize) -> Self {
        self.max_consecutive_failures = n.max(1);
        self
    }
    /// Whether the next batch is proposed while this one is measured (default: on a GPU
    /// target yes, on the CPU no; see [`TuneTarget::overlaps_by_default`]).
    pub fn with_overlap(mut self, overlap: bool) -> Self {
        self.overlap = Some(overlap);
        self
    }
    /// Records go to (and known candidates are read from) this database.
    pub fn with_db(mut self, db: &'a mut Database) -> Self {
        self.db = Some(db);
        self
    }
    /// Another search space than the target's embedded one.
    pub fn with_space(mut self, space: SearchSpace) -> Self {
        self.space = Some(space);
        self
    }
    /// Another measurer than `Measurer::for_current_exe()` (tests pass the binary).
    pub fn with_measurer(mut self, m: Measurer) -> Self {
        self.measurer = Some(m);
        self
    }
    /// Candidates slower than `factor` times the best latency known (the database's, this
    /// run's, or that of a candidate timed before them in the same batch) are timed by
    /// their probe runs alone (`TimingConfig::give_up_above_seconds`,
    /// `TimingConfig::give_up_factor`); `None` times every candidate fully.
    /// Default [`DEFAULT_GIVE_UP_FACTOR`].
    pub fn with_give_up_factor(mut self, factor: Option<f64>) -> Self {
        self.give_up_factor = factor;
        self
    }

    pub fn with_timing(mut self, timing: TimingConfig) -> Self {
        self.timing = timing;
        self
    }
    /// How long compiling one candidate may take (20 s unless set): a compile still
    /// running then is recorded as a timeout. It bounds a round's length, since the time
    /// limit is checked between rounds.
    pub fn with_compile_timeout(mut self, limit: Duration) -> Self {
        self.compile_timeout = limit;
        self
    }
    /// Where cost models come from (none unless set: the strategy proposes without one).
    pub fn with_models(mut self, source: Arc<dyn ModelSource>, policy: ModelPolicy) -> Self {
        self.models = Some(source);
        self.model_policy = policy;
        self
    }
    /// How a network's rounds are allocated to its tasks (the gradient scheduler unless
    /// set; see [`Tuner::tune_network`]).
    pub fn with_task_policy(mut self, policy: crate::network::Policy) -> Self {
        self.task_policy = policy;
        self
    }
    /// The measurement workers a network run uses at once, one per device (e.g. each
    /// with `CUDA_VISIBLE_DEVICES` naming its GPU): with more than one, each tunes a
    /// different task at a time (see [`Tuner::tune_network`]). A single workload, or one
    /// worker, is measured by the first (or [`Tuner::with_measurer`]'s).
    pub fn with_workers(mut self, workers: Vec<Measurer>) -> Self {
        self.workers = workers;
        self
    }
    /// Called after every round.
    pub fn with_progress(mut self, f: impl FnMut(&RoundReport) + 'a) -> Self {
        self.progress = Some(Box::new(f));
        self
    }
    /// Called with each note the tuner makes (e.g. that it has no cost model), as it
    /// makes it; the notes are in the report too.
    pub fn with_notes(mut self, f: impl FnMut(&str) + 'a) -> Self {
        self.notify = Some(Box::new(f));
        self
    }

    /// Tunes one workload.
    pub fn tune(&mut self, w: &Workload) -> Result<TuneReport, TuneError> {
        let mut given = self.db.take();
        let report = match given.as_deref_mut() {
            Some(db) => self.run(db, w),
            None => self.run(&mut Database::open_in_memory()?, w),
        };
        self.db = given;
        report
    }

    fn run(&mut self, db: &mut Database, w: &Workload) -> Result<TuneReport, TuneError> {
        let start = Instant::now();
        let seed = self.seed.unwrap_or_else(time_seed);
        let mut session = self.open(db, w, seed, &mut Seeds::new(self.target.kind()))?;
        let mut measurer = self.measurer()?;
        let mut notes = Vec::new();
        let mut learner = Learner::start(
            self.models.clone(),
            self.model_policy,
            db,
            &session.report.target,
            &[w.key()],
            &mut notes,
        )?;
        session.take_model(&learner)?;
        self.say(&mut session.report, &mut notes);
        session.report.opening = start.elapsed();
        let overlap = self
            .overlap
            .unwrap_or_else(|| self.target.overlaps_by_default());
        let stop = loop {
            if let Some(stop) = self.should_stop(
                &session.report,
                start,
                session.stale_rounds,
                session.failures_in_a_row,
            ) {
                break stop;
            }
            let plan = RoundPlan {
                batch: self.batch,
                budget_left: self.trials - session.report.trials,
                overlap,
            };
            let exhausted = session.round(db, &mut measurer, &mut learner, &mut notes, plan)?;
            self.say(&mut session.report, &mut notes);
            if let Some(stop) = exhausted {
                break stop;
            }
            session.report.elapsed = start.elapsed();
            self.show_progress(&session.report);
        };
        let mut report = session.report;
        report.stop = stop;
        let closing = Instant::now();
        report.model = learner.finish(db, &mut notes);
        report.closing = closing.elapsed();
        self.say(&mut report, &mut notes);
        self.confirm_best(db, w, &mut measurer, &mut report)?;
        report.elapsed = start.elapsed();
        Ok(report)
    }

    /// Times the `confirm` fastest records of `w` again ([`Verifier::confirm`], after
    /// the training so that it does not share the CPU) and takes the best from the
    /// database again: one whose time held.
    fn confirm_best(
        &self,
        db: &mut Database,
        w: &Workload,
        measurer: &mut Measurer,
        report: &mut TuneReport,
    ) -> Result<(), TuneError> {
        if self.confirm == 0 {
            return Ok(());
        }
        let start = Instant::now();
        let checked = Verifier::new(db, self.target.clone())
            .with_top(self.confirm)
            .with_measurer(measurer.clone())
            .with_timing(self.timing.clone())
            .with_seed(self.seed.unwrap_or(0))
            .confirm(w)?;
        let before = report.best.take();
        report.best = best_in_db(db, w, &report.target)?.map(|mut best| {
            best.this_run = checked.iter().any(|c| c.claim.trace == best.trace)
                || before
                    .as_ref()
                    .is_some_and(|b| b.this_run && b.trace == best.trace);
            best
        });
        report.confirmed = checked
            .into_iter()
            .map(|c| Confirmed {
                first_seconds: c.claimed_secs(),
                again_seconds: c.measured,
            })
            .collect();
        report.confirming = start.elapsed();
        Ok(())
    }

    /// The measurer given, else the first worker given, else the worker of this
    /// executable with a 60 s timeout.
    fn measurer(&self) -> Result<Measurer, TuneError> {
        Ok(
            match self
                .measurer
                .clone()
                .or_else(|| self.workers.first().cloned())
            {
                Some(m) => m,
                None => Measurer::for_current_exe()?.with_timeout(Duration::from_secs(60)),
            },
        )
    }

    /// The first stop condition that holds before a round, if any.
    fn should_stop(
        &self,
        report: &TuneReport,
        start: Instant,
        stale_rounds: usize,
        failures_in_a_row: usize,
    ) -> Option<StopReason> {
        if report.trials >= self.trials {
            Some(StopReason::TrialBudget)
        } else if self.time_limit.is_some_and(|t| start.elapsed() >= t) {
            Some(StopReason::TimeLimit)
        } else if self.patience.is_some_and(|p| stale_rounds >= p) {
            Some(StopReason::NoImprovement)
        } else if failures_in_a_row >= self.max_consecutive_failures {
            Some(StopReason::TooManyFailures)
        } else {
            None
        }
    }

    /// Moves new notes into the report and tells the caller.
    fn say(&mut self, report: &mut TuneReport, notes: &mut Vec<String>) {
        for note in notes.drain(..) {
            if let Some(f) = self.notify.as_mut() {
                f(&note);
            }
            report.notes.push(note);
        }
    }

    fn show_progress(&mut self, report: &TuneReport) {
        if let Some(progress) = self.progress.as_mut() {
            progress(&RoundReport {
                round: report.rounds,
                trials: report.trials,
                trial_budget: self.trials,
                best_seconds: report.best.as_ref().map(|b| b.median_seconds),
                flops: report.flops,
                failures: report.failure_counts(),
                candidates_per_second: report.candidates_per_second(),
            });
        }
    }
}

/// A workload without a design space is an error, not an empty run.
/// A seed from the clock, for runs not given one.
fn time_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn has_design_space(
    space: &SearchSpace,
    program: &crate::ir::Program,
    seed: u64,
) -> Result<(), TuneError> {
    crate::search::sketch::apply(
        space,
        &mut crate::schedule::Schedule::new(program.clone(), seed),
        seed,
    )
    .or_else(|e| match e {
        crate::search::SketchError::NoReduction => Err(e),
        _ => Ok(()),
    })?;
    Ok(())
}

/// The database's best record of `w` measured on exactly `key`.
fn best_in_db(
    db: &Database,
    w: &Workload,
    key: &database::TargetKey,
) -> Result<Option<Best>, TuneError> {
    Ok(db.best(w, key)?.filter(|l| !l.is_fallback()).and_then(|l| {
        l.record.median_secs.map(|m| Best {
            trace: l.record.trace.clone(),
            median_seconds: m,
            this_run: false,
        })
    }))
}

fn empty_report(key: &database::TargetKey, strategy: &str, w: &Workload) -> TuneReport {
    TuneReport {
        target: key.clone(),
        strategy: strategy.to_string(),
        model: None,
        stop: StopReason::TrialBudget,
        rounds: 0,
        trials: 0,
        ok: 0,
        failures: BTreeMap::new(),
        rejected: BTreeMap::new(),
        instantiation_failures: 0,
        duplicates: 0,
        given_up: 0,
        long_enough: 0,
        timed_run_seconds: 0.0,
        already_measured: 0,
        fed_back_at_start: 0,
        seed_traces: 0,
        best: None,
        flops: w.flops(),
        elapsed: Duration::ZERO,
        opening: Duration::ZERO,
        closing: Duration::ZERO,
        stage_seconds: StageSeconds::default(),
        overlapped_propose_seconds: 0.0,
        compile_seconds: 0.0,
        round_stats: Vec::new(),
        mutators: Vec::new(),
        confirmed: Vec::new(),
        confirming: Duration::ZERO,
        notes: Vec::new(),
    }
}
