//! The tuning loop: rounds of propose -> build -> measure -> record, with stop reasons.
//!
//! Each round the search strategy proposes a batch of new candidates of the canonical
//! workload program (those the database already holds for this exact target are skipped,
//! so a second run continues where the first stopped), the postprocessors' rejections are
//! recorded, the rest are measured in the isolated worker, and every outcome (successes
//! and failures with their kind) is committed to the database. The loop stops on the
//! first of: the trial budget, the time limit, `patience` rounds without improvement, too
//! many consecutive failures, or an exhausted space. It returns a [`TuneReport`] saying
//! why.

use crate::database::{self, Database, NewRecord, Status, TargetKey, TargetKind};
use crate::measure::worker::{MeasureError, Measurer};
use crate::measure::{session, Device, FailureKind, TimingConfig};
use crate::schedule::Trace;
use crate::search::postproc::{build_limits, Rejection, TargetLimits};
use crate::search::{RandomSearch, RejectKind, SearchSpace, SearchStrategy};
use crate::target::cuda::CudaLimits;
use crate::target::TargetFingerprint;
use crate::workload::Workload;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why the tuning loop stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
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
}

/// Where to tune.
#[derive(Clone, Debug, PartialEq)]
pub enum TuneTarget {
    /// The host CPU with the system C compiler.
    Cpu,
    /// A CUDA device: its arch, limits and fingerprint.
    Cuda {
        arch: String,
        limits: CudaLimits,
        fingerprint: TargetFingerprint,
    },
}

impl TuneTarget {
    /// The host CPU (queries the compiler and `/proc/cpuinfo`).
    pub fn cpu() -> TuneTarget {
        TuneTarget::Cpu
    }

    /// CUDA device 0, queried through the driver.
    pub fn cuda() -> Result<TuneTarget, TuneError> {
        crate::target::cuda::cuda_driver_available().map_err(TuneError::Target)?;
        crate::measure::cuda::nvrtc_available().map_err(TuneError::Target)?;
        let info = crate::target::cuda::CudaDeviceInfo::query(0)
            .map_err(|e| TuneError::Target(e.to_string()))?;
        Ok(TuneTarget::Cuda {
            arch: info.arch(),
            limits: CudaLimits::for_device(&info),
            fingerprint: info.fingerprint(),
        })
    }

    /// The database key of this target (queries the C compiler and CPU for the CPU).
    pub fn key(&self) -> Result<TargetKey, TuneError> {
        let fp = match self {
            TuneTarget::Cuda { fingerprint, .. } => fingerprint.clone(),
            TuneTarget::Cpu => {
                let tc = crate::measure::cpu::CpuToolchain::detect()
                    .map_err(|f| TuneError::Target(f.message))?;
                crate::target::cpu::CpuInfo::query(&tc.cc).fingerprint(&tc.flags)
            }
        };
        Ok(target_key(&fp))
    }

    fn device(&self) -> Device {
        match self {
            TuneTarget::Cpu => Device::Cpu,
            TuneTarget::Cuda { arch, .. } => Device::Cuda { arch: arch.clone() },
        }
    }

    fn limits(&self) -> TargetLimits {
        match self {
            TuneTarget::Cpu => TargetLimits::Cpu,
            TuneTarget::Cuda { limits, .. } => TargetLimits::Cuda(limits.clone()),
        }
    }

    /// The embedded search space of this target.
    pub fn default_space(&self) -> SearchSpace {
        match self {
            TuneTarget::Cpu => SearchSpace::cpu_default(),
            TuneTarget::Cuda { .. } => SearchSpace::cuda_default(),
        }
    }
}

/// The database key of a device fingerprint.
pub fn target_key(fp: &TargetFingerprint) -> TargetKey {
    TargetKey {
        kind: TargetKind::parse(&fp.kind).unwrap_or(TargetKind::Cpu),
        arch: fp.arch.clone(),
        device: fp.device.clone(),
        toolchain: fp.toolchain.clone(),
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

/// What one round did, for progress display.
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
}

/// The outcome of a tuning run.
#[derive(Clone, Debug)]
pub struct TuneReport {
    pub target: TargetKey,
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
    /// Candidates skipped because the database already had them.
    pub already_measured: usize,
    pub best: Option<Best>,
    pub flops: f64,
    pub elapsed: Duration,
    /// Wall time spent proposing candidates (sampling, postprocessing, code generation).
    pub propose_time: Duration,
    /// Wall time spent in the measurer (compiling, checking and timing in the worker).
    pub measure_time: Duration,
    /// Compile time reported by the builds of successful candidates, summed (candidates
    /// are compiled in parallel, so this can exceed `measure_time`).
    pub compile_seconds: f64,
}

impl TuneReport {
    /// Failures and rejections by a short name, as the progress line shows them.
    pub fn failure_counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for (k, n) in &self.failures {
            *m.entry(failure_name(*k).to_string()).or_insert(0) += n;
        }
        for (k, n) in &self.rejected {
            *m.entry(format!("rejected:{}", k.name())).or_insert(0) += n;
        }
        if self.instantiation_failures > 0 {
            m.insert("instantiation".into(), self.instantiation_failures);
        }
        m
    }
}

fn failure_name(k: FailureKind) -> &'static str {
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

pub(crate) fn status_of(k: FailureKind) -> Status {
    match k {
        FailureKind::Instantiation | FailureKind::Rejected => Status::Rejected,
        FailureKind::Compile => Status::CompileError,
        FailureKind::Launch | FailureKind::Runtime => Status::RuntimeError,
        FailureKind::WrongAnswer => Status::WrongAnswer,
        FailureKind::Timeout => Status::Timeout,
        FailureKind::Crash => Status::Crash,
    }
}

type Progress<'a> = Box<dyn FnMut(&RoundReport) + 'a>;

/// The tuning loop, configured by a builder.
pub struct Tuner<'a> {
    target: TuneTarget,
    space: Option<SearchSpace>,
    trials: usize,
    batch: usize,
    time_limit: Option<Duration>,
    seed: Option<u64>,
    patience: Option<usize>,
    max_consecutive_failures: usize,
    db: Option<&'a mut Database>,
    measurer: Option<Measurer>,
    timing: TimingConfig,
    compile_timeout: Duration,
    progress: Option<Progress<'a>>,
}

impl<'a> Tuner<'a> {
    /// A tuner for `target`: 64 trials in rounds of 16, no time limit, no patience limit,
    /// 64 consecutive failures at most, an in-memory database unless one is given.
    pub fn new(target: TuneTarget) -> Tuner<'a> {
        Tuner {
            target,
            space: None,
            trials: 64,
            batch: 16,
            time_limit: None,
            seed: None,
            patience: None,
            max_consecutive_failures: 64,
            db: None,
            measurer: None,
            timing: TimingConfig {
                warmup_seconds: 0.02,
                min_runs: 5,
                max_runs: 100,
                max_seconds: 0.3,
                flush_cache: true,
            },
            compile_timeout: Duration::from_secs(20),
            progress: None,
        }
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
    /// Called after every round.
    pub fn with_progress(mut self, f: impl FnMut(&RoundReport) + 'a) -> Self {
        self.progress = Some(Box::new(f));
        self
    }

    /// Tunes one workload.
    pub fn tune(&mut self, w: &Workload) -> Result<TuneReport, TuneError> {
        let start = Instant::now();
        // Candidates schedule the canonical program (tensors t0, t1, ...) so that their
        // records replay anywhere; the worker matches kernel arguments by name, so the
        // reference is built from the canonical workload too.
        let canonical = crate::workload::parse(&w.canonical_text())?;
        let program = canonical.to_program();
        let key = self.target.key()?;
        let space = self
            .space
            .clone()
            .unwrap_or_else(|| self.target.default_space());
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
        // A workload without a design space is an error, not an empty run.
        crate::search::sketch::apply(
            &space,
            &mut crate::schedule::Schedule::new(program.clone(), seed),
            seed,
        )
        .or_else(|e| match e {
            crate::search::SketchError::NoReduction => Err(e),
            _ => Ok(()),
        })?;
        let mut memory_db;
        let db: &mut Database = match self.db.as_deref_mut() {
            Some(db) => db,
            None => {
                memory_db = Database::open_in_memory()?;
                &mut memory_db
            }
        };
        let mut measurer = match self.measurer.clone() {
            Some(m) => m,
            None => Measurer::for_current_exe()?.with_timeout(Duration::from_secs(60)),
        };
        let device = self.target.device();
        let limits = self.target.limits();
        let mut search = RandomSearch::new(space.clone(), limits.clone(), program, seed);
        let mut report = TuneReport {
            target: key.clone(),
            stop: StopReason::TrialBudget,
            rounds: 0,
            trials: 0,
            ok: 0,
            failures: BTreeMap::new(),
            rejected: BTreeMap::new(),
            instantiation_failures: 0,
            duplicates: 0,
            already_measured: 0,
            best: db
                .best(w, &key)?
                .filter(|l| !l.is_fallback())
                .and_then(|l| {
                    l.record.median_secs.map(|m| Best {
                        trace: l.record.trace.clone(),
                        median_seconds: m,
                        this_run: false,
                    })
                }),
            flops: w.flops(),
            elapsed: Duration::ZERO,
            propose_time: Duration::ZERO,
            measure_time: Duration::ZERO,
            compile_seconds: 0.0,
        };
        let mut stale_rounds = 0;
        let mut consecutive_failures = 0;
        report.stop = loop {
            if report.trials >= self.trials {
                break StopReason::TrialBudget;
            }
            if self.time_limit.is_some_and(|t| start.elapsed() >= t) {
                break StopReason::TimeLimit;
            }
            if self.patience.is_some_and(|p| stale_rounds >= p) {
                break StopReason::NoImprovement;
            }
            if consecutive_failures >= self.max_consecutive_failures {
                break StopReason::TooManyFailures;
            }
            let n = self.batch.min(self.trials - report.trials);
            let mut db_error = None;
            let proposing = Instant::now();
            let proposal = search.propose(n, &mut |t: &Trace| match db.has_measured(w, &key, t) {
                Ok(known) => known,
                Err(e) => {
                    db_error.get_or_insert(e);
                    false
                }
            });
            report.propose_time += proposing.elapsed();
            if let Some(e) = db_error {
                return Err(e.into());
            }
            report.instantiation_failures += proposal.instantiation_failures;
            report.duplicates += proposal.duplicates;
            report.already_measured += proposal.known;
            for (trace, why) in &proposal.rejected {
                *report.rejected.entry(why.kind()).or_insert(0) += 1;
                db.commit(&NewRecord::failed(
                    w,
                    key.clone(),
                    trace.clone(),
                    Status::Rejected,
                    why.to_string(),
                ))?;
            }
            if proposal.candidates.is_empty() {
                break StopReason::SpaceExhausted;
            }
            report.rounds += 1;
            let sources = proposal
                .candidates
                .iter()
                .map(|c| c.verified.source.clone())
                .collect();
            let mut job = session::job(&canonical, sources, device.clone(), false, seed)
                .map_err(|f| TuneError::Target(f.message))?;
            job.timing = self.timing.clone();
            job.compile_timeout_seconds = Some(self.compile_timeout.as_secs_f64());
            if let TargetLimits::Cuda(l) = &limits {
                job.build_limits = Some(build_limits(&space, l));
            }
            let measuring = Instant::now();
            let (outcomes, _) = measurer.measure(&job)?;
            report.measure_time += measuring.elapsed();
            let before = report.best.as_ref().map(|b| b.median_seconds);
            for (cand, outcome) in proposal.candidates.iter().zip(outcomes) {
                report.trials += 1;
                let record = match outcome {
                    Ok(m) => {
                        report.ok += 1;
                        report.compile_seconds += m.build.compile_seconds;
                        consecutive_failures = 0;
                        if report
                            .best
                            .as_ref()
                            .is_none_or(|b| m.median_seconds < b.median_seconds)
                        {
                            report.best = Some(Best {
                                trace: cand.trace.clone(),
                                median_seconds: m.median_seconds,
                                this_run: true,
                            });
                        }
                        NewRecord::ok(w, key.clone(), cand.trace.clone(), m.runs)
                    }
                    Err(f) => {
                        consecutive_failures += 1;
                        match &f.rejection {
                            Some(r) => {
                                let kind = Rejection::from(r.clone()).kind();
                                *report.rejected.entry(kind).or_insert(0) += 1;
                            }
                            None => *report.failures.entry(f.kind).or_insert(0) += 1,
                        }
                        NewRecord::failed(
                            w,
                            key.clone(),
                            cand.trace.clone(),
                            status_of(f.kind),
                            f.message,
                        )
                    }
                };
                db.commit(&record)?;
            }
            let after = report.best.as_ref().map(|b| b.median_seconds);
            if after.is_some() && after != before {
                stale_rounds = 0;
            } else {
                stale_rounds += 1;
            }
            if let Some(progress) = self.progress.as_mut() {
                progress(&RoundReport {
                    round: report.rounds,
                    trials: report.trials,
                    trial_budget: self.trials,
                    best_seconds: after,
                    flops: report.flops,
                    failures: report.failure_counts(),
                });
            }
        };
        report.elapsed = start.elapsed();
        Ok(report)
    }
}
