//! Storing records and looking them up.

use super::types::{
    Committed, Filter, ImportSource, Lookup, Match, NewRecord, Provenance, Record, Status,
    TargetKey,
};
use super::validate::{check_new, median};
use super::{sha256_hex, Context, Database, DatabaseError, Result};
use crate::schedule::json::{from_json, to_json};
use crate::schedule::Trace;
use crate::workload::Workload;
use rusqlite::types::Value;
use rusqlite::{params, OptionalExtension, Row, Transaction};

/// The columns of a record every schema version has, in order, over `records r JOIN
/// targets t` (an imported file is read through these).
pub(crate) const RECORD_COLUMNS: &str = "r.id, r.workload_key, t.kind, t.arch, t.device, \
     t.toolchain, r.trace_json, r.status, r.error_text, r.run_secs, r.median_secs, \
     r.tessel_version, r.created_at";

/// The columns [`read_row`] expects: [`RECORD_COLUMNS`] then the provenance, over
/// [`RECORD_FROM`].
pub(crate) const LOCAL_COLUMNS: &str = "r.id, r.workload_key, t.kind, t.arch, t.device, \
     t.toolchain, r.trace_json, r.status, r.error_text, r.run_secs, r.median_secs, \
     r.tessel_version, r.created_at, r.origin, r.claimed_median_secs, i.file, i.sha256, \
     i.imported_at";

/// The tables [`LOCAL_COLUMNS`] are read from.
pub(crate) const RECORD_FROM: &str = "records r JOIN targets t ON t.id = r.target_id \
     LEFT JOIN imports i ON i.id = r.import_id";

/// The SQL truth value of "`r` was measured here".
pub(crate) const MEASURED_HERE: &str = "r.origin IN ('local', 'verified')";

/// The key a trace is stored under, once per workload and target: the SHA-256 of its
/// JSON form.
pub fn trace_key(trace: &Trace) -> String {
    sha256_hex(&to_json(trace))
}

/// Where a record being inserted comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Measured by this tessel.
    Local,
    /// From the import with this id in `imports`.
    Imported(i64),
}

impl Database {
    /// Stores `record` unless the same trace is already stored for its workload and
    /// target, in which case nothing is written and the existing id is returned. A
    /// record with an implausible run time, an `ok` one without run times, or a key
    /// that is not the hash of its canonical text is refused.
    pub fn commit(&mut self, record: &NewRecord) -> Result<Committed> {
        check_new(record).map_err(DatabaseError::InvalidRecord)?;
        let tx = self.write()?;
        let done = insert_record(&tx, record, Origin::Local)?;
        tx.commit().ctx("committing a record")?;
        Ok(done)
    }

    /// The keys ([`trace_key`]) of every trace measured (successfully or not) for
    /// `workload` on exactly `target`: the tuner does not measure them again.
    pub fn measured_keys(
        &self,
        workload: &Workload,
        target: &TargetKey,
    ) -> Result<std::collections::HashSet<String>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT r.dedup_key FROM records r JOIN targets t ON t.id = r.target_id \
                 WHERE r.workload_key = ?1 AND t.kind = ?2 AND t.arch = ?3 \
                 AND t.device = ?4 AND t.toolchain = ?5",
            )
            .ctx("looking up measured traces")?;
        let keys = st
            .query_map(
                params![
                    workload.key(),
                    target.kind.name(),
                    target.arch,
                    target.device,
                    target.toolchain
                ],
                |row| row.get::<_, String>(0),
            )
            .and_then(|rows| rows.collect())
            .ctx("reading measured traces")?;
        Ok(keys)
    }

    /// The fastest `ok` record of `workload` for `target`: measured on that exact
    /// target if any is (those measured here before imported claims), else on another
    /// device of the same kind and arch (marked as a fallback); `None` when there is
    /// neither.
    pub fn best(&self, workload: &Workload, target: &TargetKey) -> Result<Option<Lookup>> {
        Ok(self.top_k(workload, target, 1)?.into_iter().next())
    }

    /// Up to `k` `ok` records of `workload`, those measured on `target` first, then those
    /// from other devices of the same kind and arch (marked as fallbacks); within each
    /// group the records measured by this tessel come before imported ones (whose run
    /// times are a file's claim), each fastest first. Never a record of another kind or
    /// arch, never a failure.
    pub fn top_k(&self, workload: &Workload, target: &TargetKey, k: usize) -> Result<Vec<Lookup>> {
        let key = workload.key();
        match self.workload_text(&key)? {
            None => return Ok(Vec::new()),
            Some(text) if text != workload.canonical_text() => {
                return Err(DatabaseError::KeyMismatch { key })
            }
            Some(_) => {}
        }
        let sql = format!(
            "SELECT {LOCAL_COLUMNS} FROM {RECORD_FROM} \
             WHERE r.workload_key = ?1 AND r.status = 'ok' AND t.kind = ?2 AND t.arch = ?3 \
             ORDER BY (t.device = ?4 AND t.toolchain = ?5) DESC, {MEASURED_HERE} DESC, \
             r.median_secs ASC, r.id ASC LIMIT ?6"
        );
        let limit = i64::try_from(k).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare(&sql).ctx("preparing a lookup")?;
        let rows = stmt
            .query_map(
                params![
                    key,
                    target.kind.name(),
                    target.arch,
                    target.device,
                    target.toolchain,
                    limit
                ],
                read_row,
            )
            .ctx("looking up records")?;
        let mut out = Vec::new();
        for row in rows {
            let record = parse_record(row.ctx("reading a record")?)?;
            let matched = if record.target == *target {
                Match::Exact
            } else {
                Match::Fallback {
                    measured_on: record.target.clone(),
                }
            };
            out.push(Lookup { record, matched });
        }
        Ok(out)
    }

    /// The stored canonical text of workload `key`, if any.
    pub fn workload_text(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT canonical_text FROM workloads WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()
            .ctx("reading a workload")
    }

    /// The records `filter` selects, in (workload, target, trace) order.
    pub fn records(&self, filter: &Filter) -> Result<Vec<Record>> {
        let (where_sql, args) = filter_sql(filter);
        let sql = format!(
            "SELECT {LOCAL_COLUMNS} FROM {RECORD_FROM} \
             WHERE {where_sql} ORDER BY r.workload_key, t.kind, t.arch, t.device, \
             t.toolchain, r.dedup_key"
        );
        let mut stmt = self.conn.prepare(&sql).ctx("preparing a record query")?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), read_row)
            .ctx("reading records")?;
        let mut out = Vec::new();
        for row in rows {
            out.push(parse_record(row.ctx("reading a record")?)?);
        }
        Ok(out)
    }
}

/// The SQL condition (over `records r JOIN targets t`) and its parameters for `filter`.
pub(crate) fn filter_sql(filter: &Filter) -> (String, Vec<Value>) {
    let mut conds = vec!["1".to_string()];
    let mut args: Vec<Value> = Vec::new();
    if let Some(w) = &filter.workload {
        args.push(Value::Text(w.clone()));
        conds.push(format!("r.workload_key = ?{}", args.len()));
    }
    if let Some(t) = &filter.target {
        for (col, v) in [
            ("kind", t.kind.name()),
            ("arch", &t.arch),
            ("device", &t.device),
            ("toolchain", &t.toolchain),
        ] {
            args.push(Value::Text(v.to_string()));
            conds.push(format!("t.{col} = ?{}", args.len()));
        }
    }
    if filter.best_only {
        conds.push(
            "r.status = 'ok' AND r.id = (SELECT r2.id FROM records r2 \
             WHERE r2.workload_key = r.workload_key AND r2.target_id = r.target_id \
             AND r2.status = 'ok' ORDER BY r2.median_secs ASC, r2.id ASC LIMIT 1)"
                .to_string(),
        );
    }
    (conds.join(" AND "), args)
}

/// Inserts `r` (already checked) in `tx`, with its workload and target, as coming from
/// `origin`.
pub(crate) fn insert_record(
    tx: &Transaction<'_>,
    r: &NewRecord,
    origin: Origin,
) -> Result<Committed> {
    let stored: Option<String> = tx
        .prepare_cached("SELECT canonical_text FROM workloads WHERE key = ?1")
        .and_then(|mut st| st.query_row([&r.workload_key], |row| row.get(0)).optional())
        .ctx("reading a workload")?;
    match stored {
        Some(text) if text != r.canonical_text => {
            return Err(DatabaseError::KeyMismatch {
                key: r.workload_key.clone(),
            })
        }
        Some(_) => {}
        None => {
            tx.execute(
                "INSERT INTO workloads (key, canonical_text, format_version) VALUES (?1, ?2, ?3)",
                params![
                    r.workload_key,
                    r.canonical_text,
                    format_version(&r.canonical_text)?
                ],
            )
            .ctx("storing a workload")?;
        }
    }
    let t = &r.target;
    tx.prepare_cached(
        "INSERT INTO targets (kind, arch, device, toolchain) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT DO NOTHING",
    )
    .and_then(|mut st| st.execute(params![t.kind.name(), t.arch, t.device, t.toolchain]))
    .ctx("storing a target")?;
    let target_id: i64 = tx
        .prepare_cached(
            "SELECT id FROM targets WHERE kind = ?1 AND arch = ?2 AND device = ?3 \
             AND toolchain = ?4",
        )
        .and_then(|mut st| {
            st.query_row(
                params![t.kind.name(), t.arch, t.device, t.toolchain],
                |row| row.get(0),
            )
        })
        .ctx("reading a target")?;
    let trace_json = to_json(&r.trace);
    // `trace_key`, from the JSON already made.
    let dedup = sha256_hex(&trace_json);
    let runs = serde_json::to_string(&r.run_secs)
        .map_err(|e| DatabaseError::InvalidRecord(format!("run times do not serialize: {e}")))?;
    let med = if r.status == Status::Ok {
        median(&r.run_secs)
    } else {
        None
    };
    let (origin, import_id) = match origin {
        Origin::Local => ("local", None),
        Origin::Imported(id) => ("imported", Some(id)),
    };
    let inserted = tx
        .prepare_cached(
            "INSERT INTO records (workload_key, target_id, trace_json, dedup_key, status, \
             error_text, run_secs, median_secs, tessel_version, created_at, origin, \
             import_id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT DO NOTHING",
        )
        .and_then(|mut st| {
            st.execute(params![
                r.workload_key,
                target_id,
                trace_json,
                dedup,
                r.status.name(),
                r.error,
                runs,
                med,
                r.tessel_version,
                r.created_at,
                origin,
                import_id
            ])
        })
        .ctx("storing a record")?;
    if inserted == 1 {
        return Ok(Committed::Stored(tx.last_insert_rowid()));
    }
    let id = tx
        .query_row(
            "SELECT id FROM records WHERE workload_key = ?1 AND target_id = ?2 \
             AND dedup_key = ?3",
            params![r.workload_key, target_id, dedup],
            |row| row.get(0),
        )
        .ctx("reading a duplicate record")?;
    Ok(Committed::Duplicate(id))
}

/// The format version in the canonical text's header line `tessel-workload v<N>`.
fn format_version(text: &str) -> Result<i64> {
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("tessel-workload v"))
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|v| *v >= 1)
        .ok_or_else(|| {
            DatabaseError::InvalidRecord(
                "canonical text does not start with `tessel-workload v<N>`".into(),
            )
        })
}

/// One row of [`LOCAL_COLUMNS`], untyped.
pub(crate) struct RowData {
    pub id: i64,
    pub workload_key: String,
    pub kind: String,
    pub arch: String,
    pub device: String,
    pub toolchain: String,
    pub trace_json: String,
    pub status: String,
    pub error: Option<String>,
    pub run_secs: String,
    pub median_secs: Option<f64>,
    pub tessel_version: String,
    pub created_at: i64,
    pub origin: String,
    pub claimed_median_secs: Option<f64>,
    pub import_file: Option<String>,
    pub import_sha256: Option<String>,
    pub imported_at: Option<i64>,
}

/// Reads a row of [`LOCAL_COLUMNS`] from this database (whose tables are STRICT).
pub(crate) fn read_row(r: &Row<'_>) -> rusqlite::Result<RowData> {
    Ok(RowData {
        id: r.get(0)?,
        workload_key: r.get(1)?,
        kind: r.get(2)?,
        arch: r.get(3)?,
        device: r.get(4)?,
        toolchain: r.get(5)?,
        trace_json: r.get(6)?,
        status: r.get(7)?,
        error: r.get(8)?,
        run_secs: r.get(9)?,
        median_secs: r.get(10)?,
        tessel_version: r.get(11)?,
        created_at: r.get(12)?,
        origin: r.get(13)?,
        claimed_median_secs: r.get(14)?,
        import_file: r.get(15)?,
        import_sha256: r.get(16)?,
        imported_at: r.get(17)?,
    })
}

/// Turns a stored row into a [`Record`]; a field that does not parse is corruption.
pub(crate) fn parse_record(d: RowData) -> Result<Record> {
    let corrupt = |detail: String| DatabaseError::Corrupt { id: d.id, detail };
    let kind = super::TargetKind::parse(&d.kind)
        .ok_or_else(|| corrupt(format!("target kind {:?}", d.kind)))?;
    let status =
        Status::parse(&d.status).ok_or_else(|| corrupt(format!("status {:?}", d.status)))?;
    let trace = from_json(&d.trace_json).map_err(|e| corrupt(format!("trace: {e}")))?;
    let run_secs: Vec<f64> =
        serde_json::from_str(&d.run_secs).map_err(|e| corrupt(format!("run times: {e}")))?;
    let source = match (d.import_file, d.import_sha256, d.imported_at) {
        (Some(file), Some(sha256), Some(imported_at)) => Some(ImportSource {
            file,
            sha256,
            imported_at,
        }),
        _ => None,
    };
    let provenance = match (d.origin.as_str(), source) {
        ("local", _) => Provenance::Local,
        ("imported", Some(s)) => Provenance::Imported(s),
        ("verified", source) => Provenance::Verified {
            source,
            claimed_median_secs: d.claimed_median_secs,
        },
        ("unknown", _) => Provenance::Unknown,
        (other, _) => return Err(corrupt(format!("origin {other:?} without its import"))),
    };
    Ok(Record {
        id: d.id,
        workload_key: d.workload_key,
        target: TargetKey {
            kind,
            arch: d.arch,
            device: d.device,
            toolchain: d.toolchain,
        },
        trace,
        status,
        error: d.error,
        run_secs,
        median_secs: d.median_secs,
        tessel_version: d.tessel_version,
        created_at: d.created_at,
        provenance,
    })
}
