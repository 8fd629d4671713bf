//! Checking recorded latencies on this device: `tessel db verify`, `tessel tune --confirm`.
//!
//! An imported record's latency is the file's word. For each workload, the [`Verifier`]
//! takes the fastest `k` records this device has not measured (imported ones, or of
//! unknown origin, of the device's kind and arch), replays their traces, measures them
//! in the isolated worker exactly as `tessel tune` does (checked against the reference,
//! timed), stores the local measurements, and reports each claim beside what was
//! measured, flagging those off by more than [`OFF_FACTOR`].
//!
//! A tune's own fastest timings are claims of a kind too: the fastest of hundreds of
//! candidates, each timed once in one worker process, is the one most likely to have
//! been timed lucky. [`Verifier::confirm`] re-measures a workload's fastest records that
//! were timed here only once, in a worker of their own, until its `k` fastest have all
//! been timed twice; each keeps the second timing (and the first as its claim), so the
//! best a lookup returns is one whose time held.

use crate::database::{
    canonical_program, Database, DatabaseError, LocalMeasurement, Provenance, Record, TargetKey,
};
use crate::measure::worker::{MeasureError, Measurer};
use crate::measure::{session, Device, TimingConfig};
use crate::schedule::replay;
use crate::tune::{record::status_of, TuneTarget};
use crate::workload;
use std::time::Duration;
use thiserror::Error;

/// A claim is flagged when it is off from the local measurement by more than this
/// factor, either way.
pub const OFF_FACTOR: f64 = 2.0;

/// [`Verifier::confirm`] re-measures at most this many times over.
pub const CONFIRM_PASSES: usize = 3;

/// Why verifying stopped.
#[derive(Debug, Error)]
pub enum VerifyError {
    /// Reading or writing the database failed.
    #[error("database: {0}")]
    Database(#[from] DatabaseError),
    /// The worker could not be started, or the reference failed.
    #[error("measuring: {0}")]
    Measure(#[from] MeasureError),
    /// This device could not be described.
    #[error("target: {0}")]
    Target(String),
    /// A stored workload text does not parse (a damaged database).
    #[error("workload {key}: {detail}")]
    Workload {
        /// The workload key.
        key: String,
        /// What is wrong.
        detail: String,
    },
}

/// One claim and what this device measured of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The workload key.
    pub workload_key: String,
    /// The claimed record (as it was before verifying).
    pub claim: Record,
    /// Whether the claim was filed under this very device (else another of its arch).
    pub same_device: bool,
    /// The local median, or why the record failed here.
    pub measured: Result<f64, String>,
    /// The record that now holds the measurement.
    pub stored_id: i64,
}

impl Checked {
    fn new(
        workload_key: String,
        claim: Record,
        here: &TargetKey,
        measured: LocalMeasurement,
        stored_id: i64,
    ) -> Checked {
        Checked {
            workload_key,
            same_device: claim.target == *here,
            measured: match measured {
                LocalMeasurement::Ok(runs) => {
                    Ok(crate::database::median(&runs).unwrap_or(f64::NAN))
                }
                LocalMeasurement::Failed(_, why) => Err(why),
            },
            claim,
            stored_id,
        }
    }

    /// The claimed median (always present: only `ok` records are verified).
    pub fn claimed_secs(&self) -> f64 {
        self.claim.median_secs.unwrap_or(f64::NAN)
    }

    /// Measured over claimed median: above 1 the claim was too fast.
    pub fn ratio(&self) -> Option<f64> {
        self.measured.as_ref().ok().map(|m| m / self.claimed_secs())
    }

    /// Whether the claim does not hold here: it failed, or is off by more than
    /// [`OFF_FACTOR`]. Only claims made for this very device are judged.
    pub fn is_off(&self) -> bool {
        self.same_device
            && self
                .ratio()
                .is_none_or(|r| !(1.0 / OFF_FACTOR..=OFF_FACTOR).contains(&r))
    }
}

/// What a verify run did.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyReport {
    /// This device.
    pub target: TargetKey,
    /// Every claim measured, by workload, fastest claim first.
    pub checked: Vec<Checked>,
}

/// Re-measures imported records, configured by a builder.
pub struct Verifier<'a> {
    db: &'a mut Database,
    target: TuneTarget,
    top: usize,
    measurer: Option<Measurer>,
    timing: TimingConfig,
    seed: u64,
}

impl<'a> Verifier<'a> {
    /// Verifies the records of `db` on `target`: the top 3 claims of each workload.
    pub fn new(db: &'a mut Database, target: TuneTarget) -> Verifier<'a> {
        Verifier {
            db,
            target,
            top: 3,
            measurer: None,
            timing: TimingConfig::default(),
            seed: 0,
        }
    }

    /// How many claims of each workload to measure.
    pub fn with_top(mut self, k: usize) -> Self {
        self.top = k;
        self
    }

    /// Another measurer than `Measurer::for_current_exe()` (tests pass the binary).
    pub fn with_measurer(mut self, m: Measurer) -> Self {
        self.measurer = Some(m);
        self
    }

    /// How to time the candidates.
    pub fn with_timing(mut self, timing: TimingConfig) -> Self {
        self.timing = timing;
        self
    }

    /// The seed of the random inputs.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Verifies the workloads whose keys are `only` (all of them when `None`).
    pub fn verify(&mut self, only: Option<&[String]>) -> Result<VerifyReport, VerifyError> {
        let key = self.target_key()?;
        let device = self.target.device();
        let mut measurer = self.measurer()?;
        let mut report = VerifyReport {
            target: key.clone(),
            checked: Vec::new(),
        };
        for stored in self.db.workloads()? {
            if only.is_some_and(|keys| !keys.contains(&stored.key)) {
                continue;
            }
            let claims = self.db.unverified(&stored.key, &key, self.top)?;
            if claims.is_empty() {
                continue;
            }
            let w = parse_stored(&stored.key, &stored.canonical_text)?;
            let checked = self.remeasure(&w, claims, &key, &device, &mut measurer)?;
            report.checked.extend(checked);
        }
        Ok(report)
    }

    /// Re-measures the fastest records of workload `w` on exactly this target that were
    /// timed here once (by a tune; `Provenance::Local`), each in a fresh worker of its own
    /// (as `tessel run` or a user's process runs one kernel: on some GPUs a kernel's cold
    /// time depends on the process, and the second of several candidates in one worker
    /// has been seen to keep a time that fresh processes did not reproduce), until the
    /// `k` fastest records measured here have all been timed twice or
    /// [`CONFIRM_PASSES`] passes are done (a record that turns out slower lets the next
    /// one into the `k` fastest). Each keeps its new timing, the first as its claimed
    /// median (`Provenance::Verified`). Returns every record re-measured, in order.
    pub fn confirm(&mut self, w: &workload::Workload) -> Result<Vec<Checked>, VerifyError> {
        let key = self.target_key()?;
        let device = self.target.device();
        let mut measurer = self.measurer()?;
        // The records' traces name the canonical program's buffers; so must the job.
        let canonical = parse_stored(&w.key(), &w.canonical_text())?;
        let mut checked = Vec::new();
        for _ in 0..CONFIRM_PASSES {
            let once: Vec<Record> = self
                .db
                .top_k(w, &key, self.top)?
                .into_iter()
                .filter(|l| !l.is_fallback() && l.record.provenance == Provenance::Local)
                .map(|l| l.record)
                .collect();
            if once.is_empty() {
                break;
            }
            for record in once {
                checked.extend(self.remeasure(
                    &canonical,
                    vec![record],
                    &key,
                    &device,
                    &mut measurer,
                )?);
            }
        }
        Ok(checked)
    }

    /// Measures `claims` of the canonical workload `w` in one job and stores what was
    /// measured ([`Database::store_verification`]).
    fn remeasure(
        &mut self,
        w: &workload::Workload,
        claims: Vec<Record>,
        key: &TargetKey,
        device: &Device,
        measurer: &mut Measurer,
    ) -> Result<Vec<Checked>, VerifyError> {
        let measured = self.measure(w, &claims, device, measurer)?;
        let text = w.canonical_text();
        let mut checked = Vec::with_capacity(claims.len());
        for (claim, m) in claims.into_iter().zip(measured) {
            let stored_id = self.db.store_verification(&claim, &text, key, &m)?;
            checked.push(Checked::new(w.key(), claim, key, m, stored_id));
        }
        Ok(checked)
    }

    fn target_key(&self) -> Result<TargetKey, VerifyError> {
        self.target
            .key()
            .map_err(|e| VerifyError::Target(e.to_string()))
    }

    fn measurer(&self) -> Result<Measurer, VerifyError> {
        Ok(match self.measurer.clone() {
            Some(m) => m,
            None => Measurer::for_current_exe()?.with_timeout(Duration::from_secs(60)),
        })
    }

    /// Replays and measures `claims` of the canonical workload `w` in one job; a trace
    /// that no longer replays or lowers is a failure of its own.
    fn measure(
        &self,
        w: &workload::Workload,
        claims: &[Record],
        device: &Device,
        measurer: &mut Measurer,
    ) -> Result<Vec<LocalMeasurement>, VerifyError> {
        let base = canonical_program(w).map_err(|e| VerifyError::Workload {
            key: w.key(),
            detail: e.to_string(),
        })?;
        let mut out: Vec<Option<LocalMeasurement>> = Vec::with_capacity(claims.len());
        let mut sources = Vec::new();
        for claim in claims {
            let source = replay(&claim.trace, base.clone(), 0)
                .map_err(|e| e.to_string())
                .and_then(|sch| session::source_for(sch.program(), device).map_err(|f| f.message));
            match source {
                Ok(src) => {
                    sources.push(src);
                    out.push(None);
                }
                Err(why) => out.push(Some(LocalMeasurement::Failed(
                    crate::database::Status::Rejected,
                    why,
                ))),
            }
        }
        let mut job = session::job(w, sources, device.clone(), false, self.seed)
            .map_err(|f| VerifyError::Target(f.message))?;
        job.timing = self.timing.clone();
        let (outcomes, _) = measurer.measure(&job)?;
        let mut outcomes = outcomes.into_iter();
        Ok(out
            .into_iter()
            .map(|slot| match slot {
                Some(failed) => failed,
                None => match outcomes.next() {
                    Some(Ok(m)) => LocalMeasurement::Ok(m.runs),
                    Some(Err(f)) => LocalMeasurement::Failed(status_of(f.kind), f.message),
                    None => LocalMeasurement::Failed(
                        crate::database::Status::Crash,
                        "the worker returned no result".into(),
                    ),
                },
            })
            .collect())
    }
}

/// The workload of a stored canonical text.
fn parse_stored(key: &str, canonical_text: &str) -> Result<workload::Workload, VerifyError> {
    workload::parse(canonical_text).map_err(|e| VerifyError::Workload {
        key: key.to_string(),
        detail: e.to_string(),
    })
}
