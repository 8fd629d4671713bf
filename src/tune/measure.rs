//! Stages 2 to 4, build -> check -> time: the batch's sources go to the isolated worker,
//! which compiles them in parallel, checks each against the reference on fresh random
//! inputs and times those that are right (see `crate::measure::worker`).

use super::TuneError;
use crate::measure::worker::{Compiling, MeasureError, Measurer};
use crate::measure::{session, Device, Job, Outcome, ShortStop, TimingConfig};
use crate::search::postproc::build_limits;
use crate::search::{Candidate, SearchSpace, TargetLimits};
use crate::workload::Workload;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The job every batch of one run shares: the reference, inputs' seed, timing and
/// limits; only the candidates change.
pub(crate) struct JobTemplate(Job);

impl JobTemplate {
    /// The job for the canonical workload (the worker matches kernel arguments by name,
    /// so the reference is the canonical program too).
    pub fn new(
        canonical: &Workload,
        device: Device,
        space: &SearchSpace,
        limits: &TargetLimits,
        timing: &TimingConfig,
        compile_timeout: Duration,
        seed: u64,
    ) -> Result<JobTemplate, TuneError> {
        let mut job = session::job(canonical, Vec::new(), device, false, seed)
            .map_err(|f| TuneError::Target(f.message))?;
        job.timing = timing.clone();
        job.compile_timeout_seconds = Some(compile_timeout.as_secs_f64());
        if let TargetLimits::Cuda(l) = limits {
            job.build_limits = Some(build_limits(space, l));
        }
        Ok(JobTemplate(job))
    }

    /// The job measuring `candidates`; timing gives up on a candidate slower than
    /// `give_up_above_seconds` after its probe runs.
    pub fn with(&self, candidates: &[Candidate], give_up_above_seconds: Option<f64>) -> Job {
        let mut job = Job {
            candidates: candidates
                .iter()
                .map(|c| c.verified.source.clone())
                .collect(),
            ..self.0.clone()
        };
        job.timing.give_up_above_seconds = give_up_above_seconds;
        job
    }
}

/// One outcome per candidate, in order, and where the measurer's time went.
pub(crate) struct Measured {
    pub outcomes: Vec<Outcome>,
    /// Candidates timed by the probe runs alone, given up as too slow.
    pub given_up: usize,
    /// Candidates timed by the probe runs alone because those took `enough_seconds`
    /// (long kernels), not counted in `given_up`.
    pub long_enough: usize,
    /// Starting the worker, running the reference, and compiling where the measuring
    /// waited for it (on CUDA compiles overlap checking and timing; a gated job's
    /// compiles, done before it takes the device, count whole, less what another worker
    /// compiled ahead before this round began).
    pub compile: Duration,
    /// Waiting for a shared device while another round checked and timed on it.
    pub device_wait: Duration,
    /// Checking and timing the candidates.
    pub check_time: Duration,
    /// Of `check_time`, the timed runs of the candidates measured (the kernels' own time
    /// between CUDA events, summed).
    pub timed_runs: Duration,
}

/// How a job's worker starts.
pub(crate) enum Start<'a> {
    /// Afresh, compiling while it checks and times.
    Fresh,
    /// Afresh on a device other measurers use too: the job compiles first and then takes
    /// it (`Measurer::measure_sharing`).
    Shared(&'a Mutex<()>),
    /// On the worker compiling it since the last round (`Measurer::start_compiling`).
    Compiled(Compiling),
}

/// Measures a job in the worker. Every candidate gets an outcome: a kernel that crashes
/// or hangs the worker is a typed failure (the measurer restarts the worker); only a
/// worker that cannot start or a reference that fails is an error.
pub(crate) fn measure(
    measurer: &mut Measurer,
    job: &Job,
    how: Start,
) -> Result<Measured, MeasureError> {
    let start = Instant::now();
    let (outcomes, _) = match how {
        Start::Fresh => measurer.measure(job)?,
        Start::Shared(device) => measurer.measure_sharing(job, device)?,
        Start::Compiled(compiling) => measurer.measure_compiled(compiling, job)?,
    };
    let total = start.elapsed();
    let device_wait = measurer.last_device_wait().min(total);
    let compile =
        (measurer.last_setup_time() + measurer.last_compile_wait()).min(total - device_wait);
    let short = |why: ShortStop| {
        outcomes
            .iter()
            .filter_map(|o| o.as_ref().ok())
            .filter(|m| job.timing.stopped_short(&m.runs) == Some(why))
            .count()
    };
    let (long_enough, given_up) = (short(ShortStop::LongEnough), short(ShortStop::GivenUp));
    let timed_runs = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok())
        .flat_map(|m| &m.runs)
        .sum::<f64>();
    Ok(Measured {
        outcomes,
        given_up,
        long_enough,
        compile,
        device_wait,
        check_time: total - compile - device_wait,
        timed_runs: Duration::from_secs_f64(timed_runs.max(0.0)),
    })
}
