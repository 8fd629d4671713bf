//! Checks on records: the cheap ones every commit runs, and the full ones every record
//! of an imported (untrusted) file goes through. A failed check is a reason string that
//! names what is wrong.

use super::types::{NewRecord, Status, TargetKey, TargetKind};
use super::{sha256_hex, Result};
use crate::ir::verify::verify;
use crate::ir::Program;
use crate::schedule::json::from_json;
use crate::schedule::replay;
use crate::workload::{self, Workload};
use rayon::prelude::*;
use std::collections::HashMap;

/// The shortest plausible kernel time: one nanosecond.
pub const MIN_SECS: f64 = 1e-9;
/// The longest plausible kernel time: one hour.
pub const MAX_SECS: f64 = 3600.0;

const MAX_FIELD: usize = 256;
const MAX_ERROR_TEXT: usize = 64 * 1024;
const MAX_TEXT: usize = 1 << 20;
const MAX_TRACE_JSON: usize = 4 << 20;
const MAX_RUNS: usize = 100_000;

/// The program traces in the database are replayed on: the workload's canonical text,
/// parsed and lowered (tensors named `t0, t1, ...`). The tuner should schedule this
/// program so that its records replay on every machine.
pub fn canonical_program(w: &Workload) -> workload::Result<Program> {
    workload::parse(&w.canonical_text()).map(|c| c.to_program())
}

/// The median of `xs` (the mean of the two middle values for an even count); `None`
/// when empty or when a value is NaN.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// A record as read from an untrusted file, before any check.
#[derive(Clone, Debug)]
pub(crate) struct RawRecord {
    pub workload_key: String,
    pub canonical_text: String,
    pub kind: String,
    pub arch: String,
    pub device: String,
    pub toolchain: String,
    pub trace_json: String,
    pub status: String,
    pub error: Option<String>,
    pub run_secs: Vec<f64>,
    pub median_secs: Option<f64>,
    pub tessel_version: String,
    pub created_at: i64,
}

/// The checks that need no parsing: a storable target, version and error text,
/// plausible run times, a key that is the hash of the canonical text.
pub(crate) fn check_new(r: &NewRecord) -> Result<(), String> {
    if r.canonical_text.len() > MAX_TEXT {
        return Err(format!(
            "workload text is {} bytes (limit {MAX_TEXT})",
            r.canonical_text.len()
        ));
    }
    let computed = sha256_hex(&r.canonical_text);
    if computed != r.workload_key {
        return Err(format!(
            "workload key {} is not the SHA-256 of its canonical text ({computed})",
            r.workload_key
        ));
    }
    check_target(&r.target)?;
    check_field("tessel version", &r.tessel_version)?;
    if let Some(e) = &r.error {
        if e.len() > MAX_ERROR_TEXT {
            return Err(format!(
                "error text is {} bytes (limit {MAX_ERROR_TEXT})",
                e.len()
            ));
        }
    }
    check_runs(r.status, &r.run_secs)?;
    if r.created_at < 0 {
        return Err(format!("created_at {} is negative", r.created_at));
    }
    Ok(())
}

fn check_field(what: &str, s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    if s.len() > MAX_FIELD {
        return Err(format!("{what} is {} bytes (limit {MAX_FIELD})", s.len()));
    }
    if s.chars().any(char::is_control) {
        return Err(format!("{what} {s:?} holds control characters"));
    }
    Ok(())
}

fn check_target(t: &TargetKey) -> Result<(), String> {
    check_field("target arch", &t.arch)?;
    check_field("target device", &t.device)?;
    check_field("target toolchain", &t.toolchain)
}

/// Every run must be a finite time within [`MIN_SECS`, `MAX_SECS`]; an `ok` record
/// needs at least one.
fn check_runs(status: Status, runs: &[f64]) -> Result<(), String> {
    if runs.len() > MAX_RUNS {
        return Err(format!("{} run times (limit {MAX_RUNS})", runs.len()));
    }
    if status == Status::Ok && runs.is_empty() {
        return Err("an ok record has no run times".into());
    }
    for (i, &t) in runs.iter().enumerate() {
        if !t.is_finite() || !(MIN_SECS..=MAX_SECS).contains(&t) {
            return Err(format!(
                "run time #{i} = {t} s is impossible (must be within {MIN_SECS} s..{MAX_SECS} s)"
            ));
        }
    }
    Ok(())
}

/// Parsed workloads of one import, by key, so each is parsed and lowered once; built
/// before the records are checked (in parallel) and only read by the checks.
#[derive(Default)]
pub(crate) struct WorkloadCache {
    programs: HashMap<String, std::result::Result<Program, String>>,
}

impl WorkloadCache {
    /// The canonical programs of the workloads `records` name (each distinct text
    /// built once, the texts in parallel).
    pub(crate) fn build<'r>(records: impl Iterator<Item = &'r RawRecord>) -> WorkloadCache {
        let mut texts: HashMap<&str, &str> = HashMap::new();
        for r in records {
            texts.entry(&r.workload_key).or_insert(&r.canonical_text);
        }
        let programs = texts
            .into_par_iter()
            .map(|(key, text)| (key.to_string(), Self::program_of(key, text)))
            .collect();
        WorkloadCache { programs }
    }

    /// The canonical program of `text`, which must parse, be in canonical form, and
    /// hash to `key`; `key` must be one the cache was built with.
    fn program(&self, key: &str, text: &str) -> std::result::Result<Program, String> {
        match self.programs.get(key) {
            Some(p) => p.clone(),
            None => Self::program_of(key, text),
        }
    }

    fn program_of(key: &str, text: &str) -> std::result::Result<Program, String> {
        if text.len() > MAX_TEXT {
            return Err(format!(
                "workload text is {} bytes (limit {MAX_TEXT})",
                text.len()
            ));
        }
        let w = workload::parse(text).map_err(|e| format!("workload text: {e}"))?;
        if w.canonical_text() != text {
            return Err("workload text is not in canonical form".into());
        }
        let computed = w.key();
        if computed != key {
            return Err(format!(
                "workload key {key} does not match its text (whose key is {computed})"
            ));
        }
        Ok(w.to_program())
    }
}

/// The full check of an imported record: known kind and status, a canonical workload
/// whose key matches, a trace that parses, has every decision, replays on the workload
/// and verifies, and, for an `ok` record, a median consistent with plausible run
/// times. Returns the record to store, its trace JSON re-written in canonical form.
pub(crate) fn check_imported(
    raw: RawRecord,
    cache: &WorkloadCache,
) -> std::result::Result<NewRecord, String> {
    let kind = TargetKind::parse(&raw.kind)
        .ok_or_else(|| format!("unknown target kind {:?}", raw.kind))?;
    let status =
        Status::parse(&raw.status).ok_or_else(|| format!("unknown status {:?}", raw.status))?;
    let program = cache.program(&raw.workload_key, &raw.canonical_text)?;
    if raw.trace_json.len() > MAX_TRACE_JSON {
        return Err(format!(
            "trace is {} bytes (limit {MAX_TRACE_JSON})",
            raw.trace_json.len()
        ));
    }
    let trace = from_json(&raw.trace_json).map_err(|e| format!("trace JSON: {e}"))?;
    if let Some(i) = trace
        .insts
        .iter()
        .position(|i| i.kind.is_sampling() && i.decision.is_none())
    {
        return Err(format!("trace instruction {i} samples without a decision"));
    }
    let sch = replay(&trace, program, 0).map_err(|e| format!("trace does not replay: {e}"))?;
    verify(sch.program()).map_err(|e| format!("replayed program fails verification: {e}"))?;
    match (status, raw.median_secs) {
        (Status::Ok, None) => return Err("an ok record has no median".into()),
        (Status::Ok, Some(m)) => {
            check_runs(status, &raw.run_secs)?;
            let expected = median(&raw.run_secs).unwrap_or(f64::NAN);
            if !m.is_finite() || !(MIN_SECS..=MAX_SECS).contains(&m) {
                return Err(format!(
                    "median {m} s is impossible (must be within {MIN_SECS} s..{MAX_SECS} s)"
                ));
            }
            if (m - expected).abs() > 1e-9 * expected.abs() {
                return Err(format!(
                    "median {m} s is not the median of its run times ({expected} s)"
                ));
            }
        }
        (_, Some(m)) => {
            return Err(format!(
                "a {} record claims a median of {m} s",
                status.name()
            ))
        }
        (_, None) => {}
    }
    let record = NewRecord {
        workload_key: raw.workload_key,
        canonical_text: raw.canonical_text,
        target: TargetKey {
            kind,
            arch: raw.arch,
            device: raw.device,
            toolchain: raw.toolchain,
        },
        trace,
        status,
        error: raw.error,
        run_secs: raw.run_secs,
        tessel_version: raw.tessel_version,
        created_at: raw.created_at,
    };
    check_new(&record)?;
    Ok(record)
}
