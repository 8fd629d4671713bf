//! Where records came from, and replacing imported claims by measurements made here.
//!
//! An imported record's run times are the file's claim. [`Database::unverified`] lists
//! the claims a device should re-measure (the fastest imported records of a workload on
//! its kind and arch that it has not measured yet); [`Database::store_verification`]
//! keeps what the device measured: a claim for this exact target becomes a `verified`
//! record (local run times, median and status; the claim kept beside them), a claim from
//! another device of the arch gets a local record of its own on this target.

use super::store::{insert_record, parse_record, read_row, Origin, LOCAL_COLUMNS, RECORD_FROM};
use super::types::{Committed, NewRecord, Record, Status, TargetKey};
use super::validate::{check_new, median};
use super::{Context, Database, DatabaseError, Result};
use rusqlite::params;

/// A workload stored in the database: its key and canonical text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredWorkload {
    /// The workload key.
    pub key: String,
    /// Its canonical text.
    pub canonical_text: String,
}

/// What re-measuring a record here gave.
#[derive(Clone, Debug, PartialEq)]
pub enum LocalMeasurement {
    /// It ran and matched the reference: the timed runs, in seconds.
    Ok(Vec<f64>),
    /// It failed here, with this status and message.
    Failed(Status, String),
}

impl Database {
    /// The stored workloads, in key order.
    pub fn workloads(&self) -> Result<Vec<StoredWorkload>> {
        let mut stmt = self
            .conn
            .prepare("SELECT key, canonical_text FROM workloads ORDER BY key")
            .ctx("preparing the workload list")?;
        let rows = stmt
            .query_map([], |r| {
                Ok(StoredWorkload {
                    key: r.get(0)?,
                    canonical_text: r.get(1)?,
                })
            })
            .ctx("listing workloads")?;
        rows.map(|r| r.ctx("listing workloads")).collect()
    }

    /// Up to `k` `ok` records of workload `key` whose run times were not measured here
    /// (imported, or of unknown origin) and that `target` has not measured yet: those
    /// filed under `target` first, then those of other devices of its kind and arch, each
    /// group fastest claim first.
    pub fn unverified(&self, key: &str, target: &TargetKey, k: usize) -> Result<Vec<Record>> {
        let sql = format!(
            "SELECT {LOCAL_COLUMNS} FROM {RECORD_FROM} \
             WHERE r.workload_key = ?1 AND r.status = 'ok' AND t.kind = ?2 AND t.arch = ?3 \
             AND r.origin IN ('imported', 'unknown') \
             AND NOT EXISTS (SELECT 1 FROM records r2 JOIN targets t2 ON t2.id = r2.target_id \
                 WHERE r2.workload_key = r.workload_key AND r2.dedup_key = r.dedup_key \
                 AND t2.kind = ?2 AND t2.arch = ?3 AND t2.device = ?4 AND t2.toolchain = ?5 \
                 AND r2.origin IN ('local', 'verified')) \
             ORDER BY (t.device = ?4 AND t.toolchain = ?5) DESC, r.median_secs ASC, r.id ASC \
             LIMIT ?6"
        );
        let mut stmt = self.conn.prepare(&sql).ctx("preparing a verify query")?;
        let rows = stmt
            .query_map(
                params![
                    key,
                    target.kind.name(),
                    target.arch,
                    target.device,
                    target.toolchain,
                    i64::try_from(k).unwrap_or(i64::MAX)
                ],
                read_row,
            )
            .ctx("listing unverified records")?;
        let mut out = Vec::new();
        for row in rows {
            out.push(parse_record(row.ctx("reading a record")?)?);
        }
        Ok(out)
    }

    /// Stores what `target` (this device) measured of `claim`, a record of workload
    /// `canonical_text`. A claim filed under `target` itself becomes `verified`: its run
    /// times, median and status are replaced by the measurement, its claimed median kept.
    /// A claim from another device gets a new local record on `target` (or the one it
    /// already has). Returns the id of the record that holds the measurement.
    pub fn store_verification(
        &mut self,
        claim: &Record,
        canonical_text: &str,
        target: &TargetKey,
        measured: &LocalMeasurement,
    ) -> Result<i64> {
        let (status, error, runs) = match measured {
            LocalMeasurement::Ok(runs) => (Status::Ok, None, runs.clone()),
            LocalMeasurement::Failed(status, message) => {
                (*status, Some(message.clone()), Vec::new())
            }
        };
        let record = NewRecord {
            workload_key: claim.workload_key.clone(),
            canonical_text: canonical_text.to_string(),
            target: target.clone(),
            trace: claim.trace.clone(),
            status,
            error,
            run_secs: runs,
            tessel_version: env!("CARGO_PKG_VERSION").to_string(),
            created_at: super::now_unix(),
        };
        check_new(&record).map_err(DatabaseError::InvalidRecord)?;
        let tx = self.write()?;
        let id = if claim.target == *target {
            let runs = serde_json::to_string(&record.run_secs).map_err(|e| {
                DatabaseError::InvalidRecord(format!("run times do not serialize: {e}"))
            })?;
            let med = if status == Status::Ok {
                median(&record.run_secs)
            } else {
                None
            };
            tx.execute(
                "UPDATE records SET origin = 'verified', claimed_median_secs = median_secs, \
                 status = ?2, error_text = ?3, run_secs = ?4, median_secs = ?5, \
                 tessel_version = ?6, created_at = ?7 WHERE id = ?1",
                params![
                    claim.id,
                    status.name(),
                    record.error,
                    runs,
                    med,
                    record.tessel_version,
                    record.created_at
                ],
            )
            .ctx("storing a verification")?;
            claim.id
        } else {
            match insert_record(&tx, &record, Origin::Local)? {
                Committed::Stored(id) | Committed::Duplicate(id) => id,
            }
        };
        tx.commit().ctx("committing a verification")?;
        Ok(id)
    }
}
