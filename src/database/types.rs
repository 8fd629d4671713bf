//! The values the database stores and answers with.

use crate::schedule::Trace;
use crate::workload::Workload;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The kind of device a record was measured on. A lookup never answers across kinds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// An NVIDIA GPU through CUDA.
    Cuda,
    /// The host CPU.
    Cpu,
}

impl TargetKind {
    /// The spelling stored in the database.
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Cuda => "cuda",
            TargetKind::Cpu => "cpu",
        }
    }

    /// The kind spelled `s`, if any.
    pub fn parse(s: &str) -> Option<TargetKind> {
        match s {
            "cuda" => Some(TargetKind::Cuda),
            "cpu" => Some(TargetKind::Cpu),
            _ => None,
        }
    }
}

/// A device fingerprint: where a record was measured. Two records share a target only
/// when all four fields are equal.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TargetKey {
    /// CUDA or CPU.
    pub kind: TargetKind,
    /// The architecture, e.g. `sm_90a` or `x86_64-avx2`; fallbacks stay within one.
    pub arch: String,
    /// The device name, e.g. `NVIDIA H100 80GB HBM3`.
    pub device: String,
    /// The compiler and driver, e.g. `nvrtc 13.0, driver 13.0` or `gcc 12.2`.
    pub toolchain: String,
}

impl fmt::Display for TargetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({}; {})",
            self.kind.name(),
            self.arch,
            self.device,
            self.toolchain
        )
    }
}

/// The outcome of measuring a candidate.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Compiled, ran, matched the reference, timed.
    Ok,
    /// The kernel did not compile.
    CompileError,
    /// Launch or run failed (a CUDA error, a fault).
    RuntimeError,
    /// The output did not match the reference.
    WrongAnswer,
    /// The run did not finish in time.
    Timeout,
    /// The measuring worker died.
    Crash,
    /// A postprocessor refused the candidate before it was built.
    Rejected,
}

impl Status {
    /// Every status, in storage order.
    pub const ALL: [Status; 7] = [
        Status::Ok,
        Status::CompileError,
        Status::RuntimeError,
        Status::WrongAnswer,
        Status::Timeout,
        Status::Crash,
        Status::Rejected,
    ];

    /// The spelling stored in the database.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::CompileError => "compile_error",
            Status::RuntimeError => "runtime_error",
            Status::WrongAnswer => "wrong_answer",
            Status::Timeout => "timeout",
            Status::Crash => "crash",
            Status::Rejected => "rejected",
        }
    }

    /// The status spelled `s`, if any.
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.iter().copied().find(|st| st.name() == s)
    }

    /// Whether this is a failure (kept so it is not measured again, never returned by a
    /// lookup).
    pub fn is_failure(self) -> bool {
        self != Status::Ok
    }
}

/// A record to store: what the tuner hands to [`Database::commit`](super::Database::commit).
#[derive(Clone, Debug, PartialEq)]
pub struct NewRecord {
    /// The workload's key (hex SHA-256 of `canonical_text`).
    pub workload_key: String,
    /// The workload's canonical text; the trace refers to its names.
    pub canonical_text: String,
    /// Where it was measured.
    pub target: TargetKey,
    /// The schedule, decisions included.
    pub trace: Trace,
    /// The outcome.
    pub status: Status,
    /// What went wrong, for a failure.
    pub error: Option<String>,
    /// The timed runs in seconds; required (non-empty) for an `ok` record.
    pub run_secs: Vec<f64>,
    /// The tessel version that measured it.
    pub tessel_version: String,
    /// Unix seconds.
    pub created_at: i64,
}

impl NewRecord {
    /// A successful measurement of `trace` on `target`, stamped with this tessel version
    /// and the current time.
    pub fn ok(workload: &Workload, target: TargetKey, trace: Trace, run_secs: Vec<f64>) -> Self {
        Self::new(workload, target, trace, Status::Ok, None, run_secs)
    }

    /// A failed candidate, kept so that the search does not measure it again.
    pub fn failed(
        workload: &Workload,
        target: TargetKey,
        trace: Trace,
        status: Status,
        error: impl Into<String>,
    ) -> Self {
        Self::new(
            workload,
            target,
            trace,
            status,
            Some(error.into()),
            Vec::new(),
        )
    }

    fn new(
        workload: &Workload,
        target: TargetKey,
        trace: Trace,
        status: Status,
        error: Option<String>,
        run_secs: Vec<f64>,
    ) -> Self {
        NewRecord {
            workload_key: workload.key(),
            canonical_text: workload.canonical_text(),
            target,
            trace,
            status,
            error,
            run_secs,
            tessel_version: env!("CARGO_PKG_VERSION").to_string(),
            created_at: super::now_unix(),
        }
    }
}

/// A stored record.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Its id in this database (ids differ between databases).
    pub id: i64,
    /// The workload's key.
    pub workload_key: String,
    /// Where it was measured.
    pub target: TargetKey,
    /// The schedule, decisions included.
    pub trace: Trace,
    /// The outcome.
    pub status: Status,
    /// What went wrong, for a failure.
    pub error: Option<String>,
    /// The timed runs in seconds.
    pub run_secs: Vec<f64>,
    /// The median of `run_secs`, for an `ok` record.
    pub median_secs: Option<f64>,
    /// The tessel version that measured it.
    pub tessel_version: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Measured here, imported from a file, or imported and re-measured here.
    pub provenance: Provenance,
}

/// An imported file: what a record imported from it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportSource {
    /// The file's name (without its directory), or `<stream>` for a reader.
    pub file: String,
    /// Lowercase hex SHA-256 of the file's bytes (as sent: compressed if it was).
    pub sha256: String,
    /// When it was imported, unix seconds.
    pub imported_at: i64,
}

/// Where a record's run times come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Provenance {
    /// Measured by tessel on this database's machine (`tessel tune`, `tessel db verify`).
    Local,
    /// Merged from a file: the run times are the file's claim, not measured here.
    Imported(ImportSource),
    /// Measured here again: an imported record by `tessel db verify`, or one of a tune's
    /// fastest by `tessel tune --confirm` ([`Verifier::confirm`](crate::verify::Verifier::confirm)).
    /// Run times, median and status are the latest measurement here.
    Verified {
        /// The file it came from (none for a record the tune measured here first, or one
        /// stored before provenance was kept).
        source: Option<ImportSource>,
        /// The median it had before: the file's claim, or the tune's first timing.
        claimed_median_secs: Option<f64>,
    },
    /// Stored before schema version 3, which did not record where records came from.
    Unknown,
}

impl Provenance {
    /// Whether the run times were measured by this tessel on the record's target.
    pub fn is_measured_here(&self) -> bool {
        matches!(self, Provenance::Local | Provenance::Verified { .. })
    }

    /// The spelling stored in `records.origin`.
    pub fn origin(&self) -> &'static str {
        match self {
            Provenance::Local => "local",
            Provenance::Imported(_) => "imported",
            Provenance::Verified { .. } => "verified",
            Provenance::Unknown => "unknown",
        }
    }
}

impl fmt::Display for ImportSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (sha256 {}, imported {})",
            self.file,
            &self.sha256[..self.sha256.len().min(16)],
            utc(self.imported_at)
        )
    }
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Provenance::Local => write!(f, "measured here"),
            Provenance::Imported(s) => write!(f, "imported from {s}, not measured here"),
            Provenance::Verified {
                source,
                claimed_median_secs,
            } => match (source, claimed_median_secs) {
                (Some(s), claimed) => {
                    write!(f, "measured here by `tessel db verify`; imported from {s}")?;
                    match claimed {
                        Some(c) => write!(f, ", which claimed a median of {c:.3e} s"),
                        None => Ok(()),
                    }
                }
                (None, claimed) => {
                    let how = "`tessel db verify`, `tessel tune --confirm`";
                    write!(f, "measured here again ({how})")?;
                    match claimed {
                        Some(c) => write!(f, "; first timed at a median of {c:.3e} s"),
                        None => Ok(()),
                    }
                }
            },
            Provenance::Unknown => write!(
                f,
                "unknown (stored before tessel kept provenance; `tessel db verify` re-measures it)"
            ),
        }
    }
}

/// `YYYY-MM-DD HH:MM UTC` for unix seconds (days to civil date: H. Hinnant's algorithm).
pub fn utc(unix: i64) -> String {
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60
    )
}

/// How a lookup's answer relates to the target asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    /// Measured on the very target asked for.
    Exact,
    /// Measured on another device of the same kind and arch: a fallback, to be said so.
    Fallback {
        /// The target it was measured on.
        measured_on: TargetKey,
    },
}

/// A lookup's answer: an `ok` record and whether it was measured on the target asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct Lookup {
    /// The record.
    pub record: Record,
    /// Exact or fallback.
    pub matched: Match,
}

impl Lookup {
    /// Whether the record was measured on another device than the one asked for.
    pub fn is_fallback(&self) -> bool {
        matches!(self.matched, Match::Fallback { .. })
    }
}

/// What [`Database::commit`](super::Database::commit) did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Committed {
    /// Stored under this id.
    Stored(i64),
    /// The same trace was already stored for this workload and target, under this id;
    /// nothing was written.
    Duplicate(i64),
}

/// Which records an export takes. The default takes every record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only this workload key.
    pub workload: Option<String>,
    /// Only this exact target.
    pub target: Option<TargetKey>,
    /// Only the best `ok` record of each (workload, target); failures are left out.
    pub best_only: bool,
}

/// Record counts, for `tessel db stats`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// All records.
    pub records: u64,
    /// Per workload, in key order.
    pub workloads: Vec<WorkloadStats>,
    /// Records per target, in target order.
    pub by_target: Vec<(TargetKey, u64)>,
    /// Records per status, in [`Status::ALL`] order, zero counts left out.
    pub by_status: Vec<(Status, u64)>,
}

/// The records of one workload.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadStats {
    /// The workload key.
    pub key: String,
    /// Its canonical text (`workload::describe` names it for people).
    pub canonical_text: String,
    /// All its records.
    pub records: u64,
    /// Per target it has records on, in target order.
    pub targets: Vec<TargetStats>,
}

/// The records of one workload on one target.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetStats {
    /// The target.
    pub target: TargetKey,
    /// The fastest `ok` median, if any record succeeded.
    pub best_median_secs: Option<f64>,
    /// Records per status, in [`Status::ALL`] order, zero counts left out.
    pub by_status: Vec<(Status, u64)>,
    /// How many of them were measured here (the others were imported).
    pub measured_here: u64,
}

/// A record of an imported file that was not merged, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The record's id in the source file (its line number, 1-based, for JSONL).
    pub source_id: i64,
    /// Why it was refused.
    pub reason: String,
}

/// What an import did. Accepted and duplicate records are named by their id in the
/// source file (their line number for JSONL).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Records merged into the database.
    pub accepted: Vec<i64>,
    /// Records the database already held (same workload, target and trace).
    pub duplicates: Vec<i64>,
    /// Records refused, with the reason.
    pub rejected: Vec<Rejection>,
    /// Whether anything was written: false when the mode is all-or-nothing and some
    /// record was rejected (then `accepted` lists what would have been merged).
    pub merged: bool,
}

/// What to do with a file some of whose records are refused.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum ImportMode {
    /// Merge nothing if any record is refused (the default: a bad file is a bad file).
    #[default]
    AllOrNothing,
    /// Merge the valid records and report the refused ones.
    SkipRejected,
}
