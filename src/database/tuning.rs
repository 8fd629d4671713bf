//! The queries the tuner asks at the start of a run and when it trains a cost model:
//! the best traces of every workload (transfer seeds) and the `ok` records of one
//! target kind and arch (training data).

use super::store::{parse_record, read_row, LOCAL_COLUMNS, RECORD_FROM};
use super::types::{Record, TargetKind};
use super::{Context, Database, Result};
use crate::schedule::Trace;
use rusqlite::params;

impl Database {
    /// The `per_workload` fastest `ok` traces of every workload measured on a target of
    /// `kind`, each with its workload key, grouped by key, fastest first in each group:
    /// seeds a search may replay on another workload where their decisions fit.
    pub fn best_traces(
        &self,
        kind: TargetKind,
        per_workload: usize,
    ) -> Result<Vec<(String, Trace)>> {
        // The ranking reads only ids, workloads and latencies; the traces (kilobytes each)
        // are read for the chosen records alone (ranking whole rows took about a second
        // per call on 30,000 records).
        let sql = format!(
            "SELECT {LOCAL_COLUMNS} FROM {RECORD_FROM} WHERE r.id IN \
             (SELECT id FROM (SELECT r.id AS id, ROW_NUMBER() OVER \
             (PARTITION BY r.workload_key ORDER BY r.median_secs ASC, r.id ASC) AS rank \
             FROM records r JOIN targets t ON t.id = r.target_id \
             WHERE r.status = 'ok' AND t.kind = ?1) \
             WHERE rank <= ?2) \
             ORDER BY r.workload_key, r.median_secs ASC, r.id ASC"
        );
        let limit = i64::try_from(per_workload).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare(&sql).ctx("preparing a seed query")?;
        let rows = stmt
            .query_map(params![kind.name(), limit], read_row)
            .ctx("reading seed records")?;
        let mut out = Vec::new();
        for row in rows {
            let r = parse_record(row.ctx("reading a seed record")?)?;
            out.push((r.workload_key, r.trace));
        }
        Ok(out)
    }

    /// How many `ok` records were measured on targets of `kind` and `arch`.
    pub fn count_ok_records(&self, kind: TargetKind, arch: &str) -> Result<usize> {
        self.conn
            .query_row(
                "SELECT count(*) FROM records r JOIN targets t ON t.id = r.target_id \
                 WHERE r.status = 'ok' AND t.kind = ?1 AND t.arch = ?2",
                params![kind.name(), arch],
                |r| r.get::<_, i64>(0),
            )
            .ctx("counting records")
            .map(|n| usize::try_from(n).unwrap_or(0))
    }

    /// Every `ok` record measured on a target of `kind` and `arch`, in id order: what a
    /// cost model for that arch trains on.
    pub fn ok_records_of(&self, kind: TargetKind, arch: &str) -> Result<Vec<Record>> {
        self.ok_records_after(kind, arch, 0)
    }

    /// Like [`Database::ok_records_of`], only the records whose id is above `after` (those
    /// stored since a record of that id), so a tuner retraining its model reads only
    /// what is new.
    pub fn ok_records_after(
        &self,
        kind: TargetKind,
        arch: &str,
        after: i64,
    ) -> Result<Vec<Record>> {
        let sql = format!(
            "SELECT {LOCAL_COLUMNS} FROM {RECORD_FROM} \
             WHERE r.status = 'ok' AND t.kind = ?1 AND t.arch = ?2 AND r.id > ?3 ORDER BY r.id"
        );
        let mut stmt = self.conn.prepare(&sql).ctx("preparing a training query")?;
        let rows = stmt
            .query_map(params![kind.name(), arch, after], read_row)
            .ctx("reading training records")?;
        let mut out = Vec::new();
        for row in rows {
            out.push(parse_record(row.ctx("reading a training record")?)?);
        }
        Ok(out)
    }
}
