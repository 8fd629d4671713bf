//! `tessel report`: what the database knows of a set of tasks (a network's, or workloads
//! named one by one) on one kind of target: per task the trials, the best latency, its
//! GFLOP/s, the ratio to the vendor library where a peer latency is given, the weighted
//! contribution and the tuning curve (best so far after each trial); per network the
//! estimated latency (sum of weight x best) and its curve over the trials of all tasks.
//!
//! [`collect`] reads the records (through `crate::database`); [`table`] prints the text
//! table, [`html`] the page and [`plot`] the SVG curves, all as strings: `main.rs` writes
//! the files.

pub mod html;
pub mod plot;
pub mod table;

use crate::database::{Database, DatabaseError, Filter, Status, TargetKey};
use crate::workload::Workload;
use std::collections::HashMap;

/// A task to report on.
pub struct TaskSpec<'a> {
    pub label: String,
    pub workload: &'a Workload,
    pub weight: u32,
}

/// One task's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    pub label: String,
    pub workload_key: String,
    pub weight: u32,
    pub flops: f64,
    /// Candidates measured (ok or failed; the postprocessors' rejections are not trials).
    pub trials: usize,
    pub best_seconds: Option<f64>,
    /// The vendor library's latency, where given.
    pub peer_seconds: Option<f64>,
    /// The best latency so far after each trial (`None` before the first success).
    pub curve: Vec<Option<f64>>,
    /// For each trial, its place in the order of all records (when it was measured).
    order: Vec<(i64, i64)>,
}

impl TaskRow {
    pub fn gflops(&self) -> Option<f64> {
        self.best_seconds.map(|b| self.flops / b / 1e9)
    }

    /// The vendor library's latency over tessel's best: above 1, tessel is faster.
    pub fn peer_ratio(&self) -> Option<f64> {
        Some(self.peer_seconds? / self.best_seconds?)
    }

    /// weight x best latency.
    pub fn weighted_seconds(&self) -> Option<f64> {
        self.best_seconds.map(|b| f64::from(self.weight) * b)
    }
}

/// What `tessel report` shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The network's name, or `workloads`.
    pub title: String,
    /// Whether the tasks form a network (whose estimated latency is meaningful).
    pub network: bool,
    /// The target kind and arch the records are from.
    pub target: String,
    pub rows: Vec<TaskRow>,
}

impl Summary {
    /// Sum of weight x best latency, once every task has a best.
    pub fn estimated_seconds(&self) -> Option<f64> {
        crate::network::estimated_latency(self.rows.iter().map(|r| (r.weight, r.best_seconds)))
    }

    /// Sum of weight x peer latency, when every task has a peer.
    pub fn peer_seconds(&self) -> Option<f64> {
        self.rows
            .iter()
            .map(|r| r.peer_seconds.map(|p| f64::from(r.weight) * p))
            .sum()
    }

    pub fn trials(&self) -> usize {
        self.rows.iter().map(|r| r.trials).sum()
    }

    /// The estimated network latency after each trial of any task, in the order the
    /// records were measured, from the first trial after which every task had a best:
    /// (trials so far, estimated seconds).
    pub fn network_curve(&self) -> Vec<(usize, f64)> {
        let mut events: Vec<((i64, i64), usize, usize)> = Vec::new();
        for (t, row) in self.rows.iter().enumerate() {
            for (i, at) in row.order.iter().enumerate() {
                events.push((*at, t, i));
            }
        }
        events.sort();
        let mut bests: Vec<Option<f64>> = vec![None; self.rows.len()];
        let mut curve = Vec::new();
        for (n, (_, t, i)) in events.into_iter().enumerate() {
            bests[t] = self.rows[t].curve[i];
            let est = crate::network::estimated_latency(
                self.rows.iter().zip(&bests).map(|(r, b)| (r.weight, *b)),
            );
            if let Some(e) = est {
                curve.push((n + 1, e));
            }
        }
        curve
    }
}

/// Whether a record was measured on a target of `target`'s kind and arch.
fn same_kind_and_arch(a: &TargetKey, target: &TargetKey) -> bool {
    a.kind == target.kind && a.arch == target.arch
}

/// The figures of `tasks` from the records measured on targets of `target`'s kind and
/// arch; `peers` maps workload keys to the vendor library's latency.
pub fn collect(
    db: &Database,
    title: &str,
    network: bool,
    tasks: &[TaskSpec],
    target: &TargetKey,
    peers: &HashMap<String, f64>,
) -> Result<Summary, DatabaseError> {
    let mut rows = Vec::with_capacity(tasks.len());
    for t in tasks {
        let key = t.workload.key();
        let mut records = db.records(&Filter {
            workload: Some(key.clone()),
            target: None,
            best_only: false,
        })?;
        records.retain(|r| same_kind_and_arch(&r.target, target) && r.status != Status::Rejected);
        records.sort_by_key(|r| (r.created_at, r.id));
        let mut best: Option<f64> = None;
        let mut curve = Vec::with_capacity(records.len());
        for r in &records {
            if let Some(m) = r.median_secs.filter(|_| r.status == Status::Ok) {
                best = Some(best.map_or(m, |b| b.min(m)));
            }
            curve.push(best);
        }
        rows.push(TaskRow {
            label: t.label.clone(),
            flops: t.workload.flops(),
            weight: t.weight,
            trials: records.len(),
            best_seconds: best,
            peer_seconds: peers.get(&key).copied(),
            curve,
            order: records.iter().map(|r| (r.created_at, r.id)).collect(),
            workload_key: key,
        });
    }
    Ok(Summary {
        title: title.to_string(),
        network,
        target: format!("{} {}", target.kind.name(), target.arch),
        rows,
    })
}

#[cfg(test)]
mod tests;
