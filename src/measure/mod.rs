//! Measurement: build, run, check and time candidate kernels, in an isolated worker
//! process.
//!
//! The parent sends a [`Job`] to a worker (the same binary, hidden subcommand) over a pipe;
//! the worker compiles the candidates, runs the reference once on fresh random inputs,
//! then for each candidate poisons the outputs with NaN, runs it, compares with the
//! reference by relative error, times it, and answers one [`Outcome`] per candidate. A
//! candidate that crashes the worker, hangs or leaves a sticky CUDA error becomes a typed
//! failure; the parent starts a fresh worker and goes on with the next one.

pub mod cpu;
pub mod cuda;
pub mod host_values;
pub mod session;
pub mod worker;

use crate::codegen::Source;
use crate::ir::DType;
pub use crate::target::build_limits::{BuildLimits, BuildRejection};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Where kernels run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Device {
    /// The host CPU, kernels built with the system C compiler.
    Cpu,
    /// The first CUDA device, kernels built with NVRTC for `arch` (e.g. `sm_90a`).
    Cuda { arch: String },
}

/// One parameter buffer of the program, in call order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamSpec {
    pub name: String,
    pub shape: Vec<i64>,
    pub dtype: DType,
    pub is_output: bool,
}

impl ParamSpec {
    pub fn numel(&self) -> usize {
        self.shape.iter().product::<i64>().max(0) as usize
    }
}

/// How to time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingConfig {
    /// Warm up for at least this long before timing.
    pub warmup_seconds: f64,
    /// Time at least this many runs...
    pub min_runs: usize,
    /// ...and at most this many, stopping early once `max_seconds` have been spent.
    pub max_runs: usize,
    pub max_seconds: f64,
    /// Flush the L2 cache (CUDA) or the last-level cache (CPU) between timed runs.
    pub flush_cache: bool,
    /// Give up early on a slow candidate: when the median of its first [`PROBE_RUNS`]
    /// timed runs is above this, those runs are its timing. The tuner sets it to a
    /// multiple of the best latency it knows, so a candidate far from the best costs a
    /// few runs instead of `max_seconds` (most candidates of a round are such).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub give_up_above_seconds: Option<f64>,
    /// Give up, too, on a candidate slower than this multiple of the fastest candidate
    /// timed before it in the same job ([`TimingConfig::note_timed`]): a workload's first
    /// batch, where the tuner knows no best yet, then costs its slow candidates their
    /// probe runs only (on a large conv most of a batch is many times slower than its
    /// best, at tens of milliseconds a run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub give_up_factor: Option<f64>,
    /// Stop early once the runs agree: after `min_runs`, when the interquartile range of
    /// the runs is at most this share of their median ([`TimingConfig::settled`]). A
    /// steady multi-millisecond kernel then costs its `min_runs` instead of
    /// `max_seconds`; a noisy one is still timed for `max_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_spread: Option<f64>,
    /// Stop below `min_runs`, after [`PROBE_RUNS`], once the timed runs have taken this
    /// long: a kernel of tens of milliseconds is timed to well under 1% by a few runs, and
    /// `min_runs` of them made timing most of a large conv's tune (95 of 118 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enough_seconds: Option<f64>,
}

/// Why a candidate's timing stopped before `min_runs` ([`TimingConfig::stopped_short`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShortStop {
    /// Its probe runs already took `enough_seconds`.
    LongEnough,
    /// Its probe runs' median was over the give-up limit.
    GivenUp,
}

/// Timed runs before a candidate may be given up (see
/// [`TimingConfig::give_up_above_seconds`]).
pub const PROBE_RUNS: usize = 3;

impl TimingConfig {
    /// Runs to time before the first look at the times: [`PROBE_RUNS`] when a candidate
    /// may be given up or stop early on `enough_seconds`, else `min_runs`.
    pub fn first_batch(&self) -> usize {
        let min = self.min_runs.max(1);
        if self.give_up_above_seconds.is_some() || self.enough_seconds.is_some() {
            PROBE_RUNS.min(min)
        } else {
            min
        }
    }

    /// Whether timing stops after `runs`: the probe runs are done and their median is
    /// above [`TimingConfig::give_up_above_seconds`].
    pub fn gives_up(&self, runs: &[f64]) -> bool {
        match self.give_up_above_seconds {
            Some(limit) if runs.len() == self.first_batch() && runs.len() < self.min_runs => {
                crate::database::median(runs).is_some_and(|m| m > limit)
            }
            _ => false,
        }
    }

    /// Why timing stopped short of `min_runs` after `runs`, where it did: the probe runs
    /// took [`TimingConfig::enough_seconds`] (a long kernel), else the candidate was given
    /// up ([`TimingConfig::gives_up`]). `None` with `min_runs` or more.
    pub fn stopped_short(&self, runs: &[f64]) -> Option<ShortStop> {
        if runs.len() >= self.min_runs {
            return None;
        }
        let timed = runs.iter().sum::<f64>();
        Some(if self.enough_seconds.is_some_and(|e| timed >= e) {
            ShortStop::LongEnough
        } else {
            ShortStop::GivenUp
        })
    }

    /// After a candidate of the job was timed at `median_seconds`: later candidates more
    /// than [`TimingConfig::give_up_factor`] times slower are given up after their probe
    /// runs (the limit only ever tightens).
    pub fn note_timed(&mut self, median_seconds: f64) {
        let Some(factor) = self.give_up_factor else {
            return;
        };
        if !(median_seconds.is_finite() && median_seconds > 0.0) {
            return;
        }
        let limit = factor * median_seconds;
        self.give_up_above_seconds = Some(match self.give_up_above_seconds {
            Some(known) => known.min(limit),
            None => limit,
        });
    }

    /// Whether the runs so far agree closely enough to stop: at least `min_runs` of them,
    /// their interquartile range at most `settled_spread` of their median.
    pub fn settled(&self, runs: &[f64]) -> bool {
        let Some(spread) = self.settled_spread else {
            return false;
        };
        if runs.len() < self.min_runs.max(1) {
            return false;
        }
        let mut sorted = runs.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        let median = at(0.5);
        median > 0.0 && (at(0.75) - at(0.25)) <= spread * median
    }

    /// How many runs to enqueue next (at most `batch`), after `runs` that took `elapsed`
    /// seconds: [`TimingConfig::first_batch`] first, then what is left of `min_runs`,
    /// then `batch`; with `enough_seconds`, no more than the runs expected to reach it at
    /// the pace so far (after three 25 ms probes one more, not the rest of `min_runs`).
    pub fn next_batch(&self, runs: &[f64], elapsed: f64, batch: usize) -> usize {
        if runs.is_empty() {
            return self.first_batch().clamp(1, batch.max(1));
        }
        let min = self.min_runs.max(1);
        let mut n = if runs.len() < min {
            min - runs.len()
        } else {
            batch
        };
        if let Some(enough) = self.enough_seconds {
            let per_run = elapsed / runs.len() as f64;
            if per_run > 0.0 {
                // (The tolerance keeps 0.025 s / 0.025 s at 1 run in floating point.)
                let to_enough = ((enough - elapsed) / per_run - 1e-9).ceil().max(1.0);
                n = n.min(to_enough as usize);
            }
        }
        n.clamp(1, batch.max(1))
    }

    /// Whether timing stops after `runs`, taken over `elapsed` seconds: the candidate is
    /// given up ([`TimingConfig::gives_up`]), or `max_runs` are done, or [`PROBE_RUNS`] are
    /// and `enough_seconds` have passed, or `min_runs` are and either `max_seconds` have
    /// passed or the runs have [`settled`](Self::settled).
    pub fn stops(&self, runs: &[f64], elapsed: f64) -> bool {
        let min = self.min_runs.max(1);
        let long_enough = self
            .enough_seconds
            .is_some_and(|s| runs.len() >= PROBE_RUNS.min(min) && elapsed >= s);
        self.gives_up(runs)
            || runs.len() >= self.max_runs.max(min)
            || long_enough
            || (runs.len() >= min && (elapsed >= self.max_seconds || self.settled(runs)))
    }
}

impl Default for TimingConfig {
    fn default() -> Self {
        TimingConfig {
            warmup_seconds: 0.05,
            min_runs: 10,
            max_runs: 200,
            max_seconds: 1.0,
            flush_cache: true,
            give_up_above_seconds: None,
            give_up_factor: None,
            settled_spread: None,
            enough_seconds: None,
        }
    }
}

/// A library routine timed on the same inputs, for comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Peer {
    /// A row-major GEMM (cublasLt on CUDA; ndarray's `dot` on the CPU, fp32 only).
    Gemm(GemmPeer),
}

/// `C[b] = op(A[b]) @ op(B[b])` in row-major storage of `dtype` (f32: strict fp32; f16 and
/// bf16: accumulated in f32, `acc=f32`), optionally followed by `relu(C + bias)` (a dense
/// layer). `a`, `b`, `c` and the bias index the params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmPeer {
    pub batch: i64,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub a: usize,
    pub b: usize,
    pub c: usize,
    /// A is stored as `[k, m]` (the `tn` layout).
    #[serde(default)]
    pub trans_a: bool,
    /// B is stored as `[n, k]` (the `nt` layout, a dense layer's weights).
    #[serde(default)]
    pub trans_b: bool,
    /// The bias parameter of a `relu(A @ B^T + bias)` epilogue (length `n`).
    #[serde(default)]
    pub bias_relu: Option<usize>,
    /// The storage type of every operand; anything but f32 accumulates in f32.
    #[serde(default = "float32")]
    pub dtype: DType,
    /// f32 operands multiplied at TensorFloat-32's precision (`math=tf32`): cublasLt's
    /// `CUBLAS_COMPUTE_32F_FAST_TF32`, on its tensor cores.
    #[serde(default)]
    pub tf32: bool,
}

fn float32() -> DType {
    DType::F32
}

impl GemmPeer {
    /// A plain NN GEMM of params 0, 1 into 2.
    pub fn nn(batch: i64, m: i64, n: i64, k: i64) -> GemmPeer {
        GemmPeer {
            batch,
            m,
            n,
            k,
            a: 0,
            b: 1,
            c: 2,
            trans_a: false,
            trans_b: false,
            bias_relu: None,
            dtype: DType::F32,
            tf32: false,
        }
    }

    /// Elements of A, B and C (all batches).
    pub fn numels(&self) -> (i128, i128, i128) {
        let (b, m, n, k) = (
            self.batch as i128,
            self.m as i128,
            self.n as i128,
            self.k as i128,
        );
        (b * m * k, b * k * n, b * m * n)
    }
}

/// Everything the worker needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub device: Device,
    pub params: Vec<ParamSpec>,
    /// The unscheduled program, lowered naively: the reference result.
    pub reference: Source,
    pub candidates: Vec<Source>,
    pub seed: u64,
    pub timing: TimingConfig,
    pub peer: Option<Peer>,
    /// Relative error above which a result is wrong.
    pub tolerance: f64,
    /// Seconds one candidate may take (build + check + timing) before it is a timeout.
    pub timeout_seconds: f64,
    /// Checked right after a candidate is built, before it runs: a build outside these
    /// limits is answered as `Rejected` without spending GPU time on it.
    #[serde(default)]
    pub build_limits: Option<BuildLimits>,
    /// Seconds compiling one candidate may take; a compile still running then is a
    /// `Timeout` and the candidate is not run. None: no limit but `timeout_seconds`.
    #[serde(default)]
    pub compile_timeout_seconds: Option<f64>,
    /// The worker compiles every candidate first, answers `{"compiled": n}` and waits for
    /// a `go` line before it touches the device (set by `Measurer::measure_sharing`, so
    /// that one worker compiles while another measures on the same device).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gated: bool,
}

/// What compiling a kernel reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildInfo {
    pub compile_seconds: f64,
    pub registers: Option<u32>,
    pub spill_stores: Option<u32>,
    pub spill_loads: Option<u32>,
    /// The largest stack frame of the unit's kernels: local arrays the compiler left in
    /// local memory (an accumulator tile indexed by a loop it did not unroll).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_bytes: Option<u32>,
    pub shared_bytes: Option<u32>,
    /// The compiler's log (warnings, `-Xptxas -v` report).
    pub log: String,
}

impl BuildInfo {
    /// Spill stores plus spill loads, in bytes (0 where the compiler reports none).
    pub fn spill_bytes(&self) -> u32 {
        self.spill_stores.unwrap_or(0) + self.spill_loads.unwrap_or(0)
    }
}

/// Kinds of failure, as recorded in the database.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// A schedule primitive failed while building the candidate.
    Instantiation,
    /// The postprocessors rejected it before compiling (target limits).
    Rejected,
    Compile,
    /// The kernel could not be launched (resources, configuration).
    Launch,
    /// It faulted while running (illegal address and its kin).
    Runtime,
    WrongAnswer,
    Timeout,
    /// The worker process died.
    Crash,
}

/// A typed failure with its message.
#[derive(Clone, Debug, PartialEq, Error, Serialize, Deserialize)]
#[error("{kind:?}: {message}")]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
    /// For a `Rejected` build: which limit it broke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<BuildRejection>,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
            rejection: None,
        }
    }

    /// A build that broke its limits.
    pub fn rejected(why: BuildRejection) -> Failure {
        Failure {
            kind: FailureKind::Rejected,
            message: why.to_string(),
            rejection: Some(why),
        }
    }
}

/// A successful measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub median_seconds: f64,
    pub min_seconds: f64,
    pub max_seconds: f64,
    pub runs: Vec<f64>,
    pub rel_error: f64,
    pub build: BuildInfo,
}

/// The peer's timing on the same inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerMeasured {
    pub name: String,
    /// Which of the library's kernels was the fastest, where the library says (cublasLt:
    /// its algorithm, tile, stages, split-K and swizzle).
    #[serde(default)]
    pub kernel: Option<String>,
    pub median_seconds: f64,
    pub min_seconds: f64,
    pub max_seconds: f64,
    pub rel_error: f64,
}

/// The result for one candidate.
pub type Outcome = std::result::Result<Measured, Failure>;

/// Summary statistics of run times.
pub fn stats(runs: &[f64]) -> (f64, f64, f64) {
    if runs.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut v = runs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (median, v[0], v[v.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(settled_spread: Option<f64>) -> TimingConfig {
        TimingConfig {
            min_runs: 10,
            max_runs: 100,
            max_seconds: 0.1,
            settled_spread,
            ..TimingConfig::default()
        }
    }

    #[test]
    fn runs_that_agree_settle_after_min_runs_and_scattered_ones_do_not() {
        let cfg = timing(Some(0.01));
        // Ten runs of a 2 ms kernel within 0.5% of each other.
        let steady: Vec<f64> = (0..10)
            .map(|i| 2.0e-3 * (1.0 + 0.0005 * i as f64))
            .collect();
        assert!(cfg.settled(&steady));
        assert!(!cfg.settled(&steady[..9]), "fewer than min_runs");
        assert!(cfg.stops(&steady, 0.02));
        assert!(
            !timing(None).stops(&steady, 0.02),
            "no early stop unless asked"
        );
        // Its middle half spread over 10%: timed on until max_seconds.
        let noisy: Vec<f64> = (0..10).map(|i| 2.0e-3 * (1.0 + 0.03 * i as f64)).collect();
        assert!(!cfg.settled(&noisy));
        assert!(!cfg.stops(&noisy, 0.02));
        assert!(cfg.stops(&noisy, 0.1));
        // One outlier does not keep a steady candidate going.
        let mut outlier = steady.clone();
        outlier[3] = 9.0e-3;
        assert!(cfg.settled(&outlier));
    }

    #[test]
    fn timing_always_stops_at_max_runs() {
        let cfg = timing(None);
        let runs = vec![1.0e-6; 100];
        assert!(cfg.stops(&runs, 0.0));
        assert!(!cfg.stops(&runs[..99], 0.0));
    }

    #[test]
    fn a_rejected_failure_round_trips_with_its_reason_and_old_replies_still_parse() {
        let f = Failure::rejected(BuildRejection::RegisterSpills {
            bytes: 16,
            limit: 0,
        });
        let text = serde_json::to_string(&f).unwrap();
        assert_eq!(serde_json::from_str::<Failure>(&text).unwrap(), f);
        let old: Failure = serde_json::from_str(r#"{"kind":"compile","message":"x"}"#).unwrap();
        assert_eq!(old, Failure::new(FailureKind::Compile, "x"));
    }

    #[test]
    fn long_runs_stop_after_the_probe_runs_once_enough_seconds_passed() {
        let cfg = TimingConfig {
            enough_seconds: Some(0.1),
            ..timing(None)
        };
        let long = [0.04; PROBE_RUNS];
        assert!(cfg.stops(&long, 0.12), "three 40 ms runs are enough");
        assert!(
            !cfg.stops(&long[..2], 0.08),
            "never fewer than the probe runs"
        );
        assert!(
            !cfg.stops(&[1e-3; PROBE_RUNS], 0.003),
            "a short kernel gets min_runs"
        );
        assert!(!timing(None).stops(&long, 0.12), "off unless asked for");
    }

    #[test]
    fn a_short_stop_is_named_long_enough_or_given_up() {
        // The tune's report told three 40 ms probe runs "given up as over 2x the best".
        let cfg = TimingConfig {
            enough_seconds: Some(0.1),
            give_up_above_seconds: Some(1e-3),
            ..timing(None)
        };
        let long = [0.04; PROBE_RUNS];
        assert_eq!(cfg.stopped_short(&long), Some(ShortStop::LongEnough));
        assert_eq!(
            cfg.stopped_short(&[2e-3; PROBE_RUNS]),
            Some(ShortStop::GivenUp)
        );
        assert_eq!(cfg.stopped_short(&[2e-3; 10]), None, "min_runs timed");
        let never_enough = TimingConfig {
            enough_seconds: None,
            ..cfg
        };
        assert_eq!(never_enough.stopped_short(&long), Some(ShortStop::GivenUp));
    }

    #[test]
    fn the_next_batch_tops_up_to_min_runs_and_stops_short_of_enough_seconds() {
        let cfg = TimingConfig {
            enough_seconds: Some(0.1),
            ..timing(None)
        };
        assert_eq!(cfg.next_batch(&[], 0.0, 10), PROBE_RUNS);
        // Three 25 ms probes: one more run reaches 0.1 s.
        assert_eq!(cfg.next_batch(&[0.025; 3], 0.075, 10), 1);
        // Three 1 ms probes: the rest of min_runs.
        assert_eq!(cfg.next_batch(&[1e-3; 3], 0.003, 10), 7);
        // Past min_runs: whole batches.
        assert_eq!(cfg.next_batch(&[1e-3; 10], 0.01, 10), 10);
        let plain = timing(None);
        assert_eq!(plain.next_batch(&[], 0.0, 10), 10);
        assert_eq!(
            plain.next_batch(&[0.025; 3], 0.075, 10),
            7,
            "tops up, never 3 + 10"
        );
    }

    #[test]
    fn a_timed_candidate_tightens_the_give_up_limit_by_the_factor() {
        let mut cfg = TimingConfig {
            give_up_factor: Some(2.0),
            ..TimingConfig::default()
        };
        assert_eq!(
            cfg.first_batch(),
            cfg.min_runs,
            "nothing timed: no limit yet"
        );
        cfg.note_timed(1e-3);
        assert_eq!(cfg.give_up_above_seconds, Some(2e-3));
        assert_eq!(cfg.first_batch(), PROBE_RUNS);
        assert!(cfg.gives_up(&[3e-3, 3e-3, 3e-3]));
        cfg.note_timed(4e-3);
        assert_eq!(
            cfg.give_up_above_seconds,
            Some(2e-3),
            "a slower one never loosens it"
        );
        cfg.note_timed(0.5e-3);
        assert_eq!(cfg.give_up_above_seconds, Some(1e-3));
        let mut without = TimingConfig {
            give_up_above_seconds: Some(5e-3),
            ..TimingConfig::default()
        };
        without.note_timed(1e-3);
        assert_eq!(
            without.give_up_above_seconds,
            Some(5e-3),
            "no factor: the job's own"
        );
    }

    #[test]
    fn timing_gives_up_only_after_the_probe_runs_and_only_above_the_limit() {
        let cfg = TimingConfig {
            give_up_above_seconds: Some(1e-3),
            ..TimingConfig::default()
        };
        assert_eq!(cfg.first_batch(), PROBE_RUNS);
        assert!(cfg.gives_up(&[2e-3, 3e-3, 1e-4]));
        assert!(!cfg.gives_up(&[2e-3, 1e-4, 1e-4]), "median under the limit");
        assert!(
            !cfg.gives_up(&[2e-3, 3e-3]),
            "before the probe runs are done"
        );
        assert!(
            !cfg.gives_up(&[2e-3; 5]),
            "after the probe runs it is timed fully"
        );
        let full = TimingConfig::default();
        assert_eq!(full.first_batch(), full.min_runs);
        assert!(!full.gives_up(&[1.0; PROBE_RUNS]));
        // Timing configs written before the field existed still parse.
        let text = r#"{"warmup_seconds":0.0,"min_runs":3,"max_runs":5,"max_seconds":0.1,"flush_cache":false}"#;
        let old: TimingConfig = serde_json::from_str(text).unwrap();
        assert_eq!(old.give_up_above_seconds, None);
    }
}
