//! Whole networks: a network is a name and its tasks, one per distinct workload, each
//! with its weight (how many times the network runs it). No IO: `main.rs` reads the file.
//!
//! * [`file`]: the TOML form and its errors (line, task index, key);
//! * [`scheduler`]: Ansor's gradient task scheduler, which gives each next round of
//!   tuning to the task whose improvement lowers the network's weighted latency most, a
//!   pure function of the tasks' histories;
//! * [`shard`]: a deterministic share of the tasks for one of N machines.
//!
//! The loop that tunes a network round by round is `crate::tune::network`.

pub mod file;
pub mod scheduler;
pub mod shard;

pub use file::{task_workload, NetworkError};
pub use scheduler::{
    choose, default_batch, gradient, Choice, Policy, SchedulerParams, TaskHistory,
};
pub use shard::{shard, Shard, ShardError};

use crate::workload::Workload;

/// A network: what a user tunes as one.
#[derive(Clone, Debug, PartialEq)]
pub struct Network {
    pub name: String,
    /// In file order; no two share a workload.
    pub tasks: Vec<Task>,
}

/// One distinct workload of a network.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// The workload as the file gives it (a preset spec or workload text).
    pub spec: String,
    pub workload: Workload,
    /// How many times one run of the network runs it (positive).
    pub weight: u32,
    /// The line of its `workload` key in the file.
    pub line: usize,
}

impl Task {
    /// A short name for tables and progress lines: the spec, or for workload text the
    /// workload's name and the start of its key.
    pub fn label(&self) -> String {
        if self.spec.contains('\n') {
            format!("{}#{}", self.workload.name, &self.workload.key()[..8])
        } else {
            self.spec.clone()
        }
    }
}

/// The network's estimated latency: the sum over its tasks of weight x best latency, or
/// `None` while some task has no measured latency.
pub fn estimated_latency(
    weights_and_bests: impl IntoIterator<Item = (u32, Option<f64>)>,
) -> Option<f64> {
    weights_and_bests
        .into_iter()
        .map(|(w, b)| b.map(|b| f64::from(w) * b))
        .sum()
}

#[cfg(test)]
mod tests;
