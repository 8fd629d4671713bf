//! Record counts for `tessel db stats`: per workload and target, the best latency and the
//! records by status; overall, the records per target and per status.

use super::store::MEASURED_HERE;
use super::types::{Stats, Status, TargetKey, TargetKind, TargetStats, WorkloadStats};
use super::{Context, Database, DatabaseError, Result};

/// One row of the grouped count: (workload, target, status) and its figures.
struct Group {
    workload_key: String,
    canonical_text: String,
    target: TargetKey,
    status: Status,
    count: u64,
    best: Option<f64>,
    measured_here: u64,
}

impl Database {
    /// Record counts by workload, target and status, with the best latency of each
    /// workload on each target.
    pub fn stats(&self) -> Result<Stats> {
        let mut stats = Stats::default();
        for g in self.groups()? {
            stats.records += g.count;
            add(&mut stats.by_target, g.target.clone(), g.count);
            add(&mut stats.by_status, g.status, g.count);
            if stats
                .workloads
                .last()
                .is_none_or(|w| w.key != g.workload_key)
            {
                stats.workloads.push(WorkloadStats {
                    key: g.workload_key.clone(),
                    canonical_text: g.canonical_text.clone(),
                    records: 0,
                    targets: Vec::new(),
                });
            }
            let Some(w) = stats.workloads.last_mut() else {
                continue;
            };
            w.records += g.count;
            if w.targets.last().is_none_or(|t| t.target != g.target) {
                w.targets.push(TargetStats {
                    target: g.target.clone(),
                    best_median_secs: None,
                    by_status: Vec::new(),
                    measured_here: 0,
                });
            }
            if let Some(t) = w.targets.last_mut() {
                t.by_status.push((g.status, g.count));
                t.measured_here += g.measured_here;
                if let Some(b) = g.best {
                    t.best_median_secs = Some(t.best_median_secs.map_or(b, |x| x.min(b)));
                }
            }
        }
        stats.by_target.sort();
        stats.by_status.sort();
        for w in &mut stats.workloads {
            for t in &mut w.targets {
                t.by_status.sort();
            }
        }
        Ok(stats)
    }

    /// The records grouped by workload, target and status, in that order.
    fn groups(&self) -> Result<Vec<Group>> {
        let sql = format!(
            "SELECT r.workload_key, w.canonical_text, t.kind, t.arch, t.device, t.toolchain, \
             r.status, count(*), min(r.median_secs), sum({MEASURED_HERE}) \
             FROM records r JOIN targets t ON t.id = r.target_id \
             JOIN workloads w ON w.key = r.workload_key \
             GROUP BY r.workload_key, t.id, r.status \
             ORDER BY r.workload_key, t.kind, t.arch, t.device, t.toolchain"
        );
        let mut stmt = self.conn.prepare(&sql).ctx("preparing stats")?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    [r.get::<_, String>(2)?, r.get(3)?, r.get(4)?, r.get(5)?],
                    r.get::<_, String>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, Option<f64>>(8)?,
                    r.get::<_, i64>(9)?,
                ))
            })
            .ctx("counting records")?;
        let mut out = Vec::new();
        for row in rows {
            let (
                workload_key,
                canonical_text,
                [kind, arch, device, toolchain],
                status,
                n,
                best,
                here,
            ) = row.ctx("counting records")?;
            let corrupt = |detail: String| DatabaseError::Corrupt { id: 0, detail };
            out.push(Group {
                workload_key,
                canonical_text,
                target: TargetKey {
                    kind: TargetKind::parse(&kind)
                        .ok_or_else(|| corrupt(format!("target kind {kind:?}")))?,
                    arch,
                    device,
                    toolchain,
                },
                status: Status::parse(&status)
                    .ok_or_else(|| corrupt(format!("status {status:?}")))?,
                count: u64::try_from(n).unwrap_or(0),
                best,
                measured_here: u64::try_from(here).unwrap_or(0),
            });
        }
        Ok(out)
    }
}

/// Adds `n` to the count of `key` in `counts`.
fn add<K: PartialEq>(counts: &mut Vec<(K, u64)>, key: K, n: u64) {
    match counts.iter_mut().find(|(k, _)| *k == key) {
        Some((_, c)) => *c += n,
        None => counts.push((key, n)),
    }
}
