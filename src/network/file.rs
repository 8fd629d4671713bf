//! Network files: TOML naming a network and its tasks, one per distinct workload, each
//! with its weight (how many times the network runs it).
//!
//! ```toml
//! name = "resnet50-b1"
//! [[task]]
//! workload = "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1"
//! weight = 3
//! ```
//!
//! A task's `workload` is a preset spec (`matmul:m=128,n=768,k=768,layout=nt`) or, for
//! what no preset expresses, workload-language text in a multi-line string, so a network
//! file stands alone. Every error names the file, the line and, for a task, its 1-based
//! index and the key at fault: unknown keys, a bad workload, a weight that is not a
//! positive integer, the same workload twice, no task at all.

use super::{Network, Task};
use crate::workload::{self, Workload, WorkloadError};
use serde::Deserialize;
use thiserror::Error;
use toml::Spanned;

/// Why a network file was refused.
#[derive(Debug, Error, PartialEq)]
pub enum NetworkError {
    /// Not TOML, or a key unknown, missing or of the wrong type (toml's message names the
    /// line, the column and the key).
    #[error("{origin}: {message}")]
    Toml { origin: String, message: String },
    /// `name` is empty.
    #[error("{origin}:{line}: key `name`: the network needs a name")]
    NoName { origin: String, line: usize },
    /// There is no `[[task]]`.
    #[error("{origin}: the network has no [[task]]")]
    NoTasks { origin: String },
    /// A task's workload does not parse.
    #[error("{origin}:{line}: task {index}: key `workload`: {source}")]
    Workload {
        origin: String,
        line: usize,
        index: usize,
        source: WorkloadError,
    },
    /// A task's weight is zero or negative.
    #[error("{origin}:{line}: task {index}: key `weight`: {weight} is not a positive count")]
    Weight {
        origin: String,
        line: usize,
        index: usize,
        weight: i64,
    },
    /// Two tasks name the same workload (the same canonical form).
    #[error(
        "{origin}:{line}: task {index}: key `workload`: the same workload as task {first} \
         (line {first_line}); give it once with the summed weight"
    )]
    Duplicate {
        origin: String,
        line: usize,
        index: usize,
        first: usize,
        first_line: usize,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Spanned<String>,
    #[serde(default)]
    task: Vec<TaskEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskEntry {
    workload: Spanned<String>,
    weight: Spanned<i64>,
}

/// The 1-based line of a byte offset in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// A task's workload: workload-language text when it spans lines, else a preset spec.
pub fn task_workload(spec: &str) -> Result<Workload, WorkloadError> {
    if spec.contains('\n') {
        workload::parse(spec)
    } else {
        workload::preset(spec)
    }
}

impl Network {
    /// Parses a network file; `origin` (its path) prefixes errors.
    pub fn parse(text: &str, origin: &str) -> Result<Network, NetworkError> {
        let f: File = toml::from_str(text).map_err(|e| NetworkError::Toml {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let origin = origin.to_string();
        if f.name.get_ref().trim().is_empty() {
            return Err(NetworkError::NoName {
                line: line_of(text, f.name.span().start),
                origin,
            });
        }
        if f.task.is_empty() {
            return Err(NetworkError::NoTasks { origin });
        }
        let mut tasks: Vec<Task> = Vec::with_capacity(f.task.len());
        for (i, entry) in f.task.into_iter().enumerate() {
            let index = i + 1;
            let line = line_of(text, entry.workload.span().start);
            let spec = entry.workload.into_inner();
            let w = task_workload(&spec).map_err(|source| NetworkError::Workload {
                origin: origin.clone(),
                line,
                index,
                source,
            })?;
            let weight_line = line_of(text, entry.weight.span().start);
            let weight = *entry.weight.get_ref();
            let weight =
                u32::try_from(weight)
                    .ok()
                    .filter(|w| *w > 0)
                    .ok_or(NetworkError::Weight {
                        origin: origin.clone(),
                        line: weight_line,
                        index,
                        weight,
                    })?;
            if let Some((first, t)) = tasks
                .iter()
                .enumerate()
                .find(|(_, t)| t.workload.key() == w.key())
            {
                return Err(NetworkError::Duplicate {
                    origin,
                    line,
                    index,
                    first: first + 1,
                    first_line: t.line,
                });
            }
            tasks.push(Task {
                spec,
                workload: w,
                weight,
                line,
            });
        }
        Ok(Network {
            name: f.name.into_inner(),
            tasks,
        })
    }
}
