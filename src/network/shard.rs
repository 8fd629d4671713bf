//! `--shard i/N`: a deterministic share of a network's tasks for machine `i` of `N`
//! (0-based, as Slurm's `SLURM_ARRAY_TASK_ID` and a Kubernetes indexed Job's
//! `JOB_COMPLETION_INDEX` count), so that N machines each tune their share into their own
//! database and `tessel db import` merges them.
//!
//! Tasks are balanced by weight x FLOPs (a task's share of the network's work): taken
//! from the largest down (ties by workload key) and each given to the shard with the
//! least so far (ties to the lowest index). The order is the tasks' own, never the
//! file's, so reordering the file changes no shard; every task is in exactly one shard.

use super::Task;
use std::str::FromStr;
use thiserror::Error;

/// Machine `index` of `count`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// A `--shard` value that is not `i/N` with `0 <= i < N`.
#[derive(Debug, Error, PartialEq)]
pub enum ShardError {
    #[error("`{0}` is not i/N (e.g. 0/4)")]
    Syntax(String),
    #[error(
        "shard {index}/{count}: the index must be below the count (0-based) and the count positive"
    )]
    Range { index: usize, count: usize },
}

impl FromStr for Shard {
    type Err = ShardError;
    fn from_str(s: &str) -> Result<Shard, ShardError> {
        let syntax = || ShardError::Syntax(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(syntax)?;
        let index: usize = i.trim().parse().map_err(|_| syntax())?;
        let count: usize = n.trim().parse().map_err(|_| syntax())?;
        if count == 0 || index >= count {
            return Err(ShardError::Range { index, count });
        }
        Ok(Shard { index, count })
    }
}

/// A task's share of the network's work.
fn cost(t: &Task) -> f64 {
    f64::from(t.weight) * t.workload.flops()
}

/// The indices (into `tasks`) of the tasks of `shard`, in the tasks' order.
pub fn shard(tasks: &[Task], shard: Shard) -> Vec<usize> {
    let keys: Vec<String> = tasks.iter().map(|t| t.workload.key()).collect();
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by(|&a, &b| {
        cost(&tasks[b])
            .total_cmp(&cost(&tasks[a]))
            .then_with(|| keys[a].cmp(&keys[b]))
    });
    let mut load = vec![0.0f64; shard.count];
    let mut owner = vec![0usize; tasks.len()];
    for i in order {
        let least = (0..shard.count)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        load[least] += cost(&tasks[i]);
        owner[i] = least;
    }
    (0..tasks.len())
        .filter(|&i| owner[i] == shard.index)
        .collect()
}
