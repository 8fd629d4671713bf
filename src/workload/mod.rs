//! The workload language: how a user names a tensor computation.
//!
//! A workload is a list of input tensors and compute stages written in a small TE-style
//! text language (`C[i, j] = sum(A[i, k] * B[k, j], k)`), or produced by a preset
//! (`matmul:1024x1024x1024`), which builds that text and parses it, so presets and files
//! share one path. This module parses and checks the text ([`parse`]), expands presets
//! ([`preset`]), prints the workload back ([`Workload::to_text`]), gives its canonical,
//! versioned form and key ([`Workload::canonical_text`], [`Workload::key`]) and lowers it
//! to the loop-nest IR ([`Workload::to_program`]).
//!
//! The module does no IO ([`from_cli`] reads files through a callback) and never panics
//! on user input: every problem is a [`WorkloadError`] that points at a line and column.

mod check;
mod describe;
mod lexer;
mod lower;
mod model;
mod parser;
mod preset;
mod print;
#[cfg(test)]
mod tests;

pub use describe::{describe, preset_spec};
pub use model::{Axis, Compute, Reduce, ReduceOp, Scalar, Tensor, TensorDef, Workload};
pub use preset::{preset, PRESET_NAMES};

/// The version of the canonical text form; it is written in the first line of
/// [`Workload::canonical_text`] and so is part of every key.
pub const FORMAT_VERSION: u32 = 1;

/// Why a workload could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// A problem in the text (or in a preset spec, then on line 1), at a 1-based line and
    /// column.
    #[error("{line}:{col}: {msg}")]
    At {
        /// 1-based line.
        line: u32,
        /// 1-based column, counted in characters.
        col: u32,
        /// What was wrong, and what was expected.
        msg: String,
    },
    /// The workload file named on the command line could not be read.
    #[error("cannot read workload file '{path}': {msg}")]
    Read {
        /// The path as given.
        path: String,
        /// The reader's error.
        msg: String,
    },
    /// An argument shaped as a preset (`name:args`) whose name is no preset, and no file.
    #[error("'{name}' is no preset (known: {known}), and no workload file is named so ({msg})")]
    NotPreset {
        name: String,
        known: String,
        msg: String,
    },
}

impl WorkloadError {
    /// An error at a position.
    pub(crate) fn at(pos: Pos, msg: impl Into<String>) -> WorkloadError {
        WorkloadError::At {
            line: pos.line,
            col: pos.col,
            msg: msg.into(),
        }
    }
}

/// Results of this module.
pub type Result<T> = std::result::Result<T, WorkloadError>;

/// A 1-based position in the source text.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column in characters.
    pub col: u32,
}

/// Parses and checks a workload written in the workload language.
pub fn parse(src: &str) -> Result<Workload> {
    let stmts = parser::parse_statements(src)?;
    check::check(stmts)
}

/// Builds a workload from a command-line argument: a preset spec when the part before
/// the first ':' names a preset, otherwise a file path read through `read_file`.
pub fn from_cli(
    arg: &str,
    read_file: impl Fn(&str) -> std::io::Result<String>,
) -> Result<Workload> {
    let head = arg.split_once(':').map_or(arg, |(h, _)| h);
    if PRESET_NAMES.contains(&head) {
        return preset(arg);
    }
    let text = read_file(arg).map_err(|e| match arg.split_once(':') {
        // `softmax:4x4`: a name of more than a drive letter, arguments and no path.
        Some((name, rest))
            if name.len() > 1
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !rest.contains(['/', '\\']) =>
        {
            WorkloadError::NotPreset {
                name: name.to_string(),
                known: PRESET_NAMES.join(", "),
                msg: e.to_string(),
            }
        }
        _ => WorkloadError::Read {
            path: arg.to_string(),
            msg: e.to_string(),
        },
    })?;
    parse(&text)
}
