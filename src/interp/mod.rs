//! The reference interpreter: the correctness oracle of the project.
//!
//! It executes a (scheduled or not) [`Program`] on the CPU over `ndarray` buffers, every
//! loop serially and in order, whatever its kind (parallel, vectorized, unrolled and
//! thread-bound loops are plain serial loops), so that any schedule can be checked against
//! the unscheduled program on small shapes ([`check`]).
//!
//! A program is first compiled once ([`Interpreter::new`]) into a compact form: variables
//! become slots of one `Vec<i64>`, buffers become dense slots with precomputed strides,
//! and expressions become statically typed trees (integer, float, boolean) with every
//! implicit conversion made explicit. Everything that can be checked without running
//! (dangling ids, arity, types, variable scoping, shapes) is checked there, so a run only
//! fails on dynamic conditions: out-of-bounds accesses, bindings outside their iteration
//! domain, division by zero, integer overflow, reading a never-written integer element.
//!
//! Semantics, in brief:
//! * a block evaluates its predicate (over loop variables) first and is skipped when it
//!   is false; then each binding, which must land in `[0, extent)` of its iteration
//!   variable; then the init store when every reduction iteration variable is 0; then
//!   the body store;
//! * integer arithmetic is exact `i64` (overflow is an error); `FloorDiv`/`FloorMod` are
//!   Python's `//` and `%`; `Div` is value division and needs a float operand;
//! * value arithmetic is `f32`, each operation rounded to `f32`; an integer operand of a
//!   float operation is converted to `f32`; `Min`/`Max` of floats propagate NaN (so a
//!   never-written element cannot hide behind a `relu`);
//! * `Select` evaluates only the chosen side;
//! * a store converts its value to the buffer's dtype as `Cast` would; `float16` stores
//!   round to the nearest `f16`; every buffer is held as `f32` elements;
//! * intermediate buffers are allocated per run and filled with NaN.

mod check;
mod compile;
mod exec;
mod expr;
pub mod gpu;

#[cfg(test)]
mod tests;

pub use check::{
    check, is_close, random_inputs, rel_error, tolerance, CheckError, CheckResult, TOLERANCE,
    TOLERANCE_BF16, TOLERANCE_F16, TOLERANCE_TF32,
};
pub use compile::Interpreter;
pub use gpu::{check_lowered, run_kernels, GpuCheckError, GpuInterpError};

use crate::ir::Program;
use ndarray::ArrayD;
use thiserror::Error;

/// Why the interpreter refused a program or stopped running it.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum InterpError {
    /// The caller passed the wrong number of parameter arrays.
    #[error("program {program} takes {expected} parameters, got {got}")]
    ParamCount {
        program: String,
        expected: usize,
        got: usize,
    },
    /// A parameter array does not have its buffer's shape.
    #[error("parameter {position} ({buffer}) has shape {got:?}, expected {expected:?}")]
    ParamShape {
        position: usize,
        buffer: String,
        expected: Vec<i64>,
        got: Vec<usize>,
    },
    /// A buffer's shape is negative or too large to allocate.
    #[error("buffer {buffer} has an unusable shape {shape:?}: {reason}")]
    BadShape {
        buffer: String,
        shape: Vec<i64>,
        reason: String,
    },
    /// An id points outside its arena.
    #[error("{id} does not exist in program {program}")]
    DanglingId { program: String, id: String },
    /// A loop or block is reachable twice (or a loop contains itself).
    #[error("{node} appears more than once in the loop tree")]
    NodeRepeated { node: String },
    /// A serial split-K sum's annotation or place is unusable (`ir::arrival`).
    #[error("{0}")]
    Arrival(String),
    /// A loop has a negative extent.
    #[error("loop {name} has negative extent {extent}")]
    NegativeExtent { name: String, extent: i64 },
    /// A variable is bound twice in one scope (a loop variable reused by a nested loop,
    /// or an iteration variable that is also a loop variable or repeated).
    #[error("variable {var} is bound twice (at {site})")]
    DuplicateVar { var: String, site: String },
    /// A buffer is both a parameter and an allocation, or listed twice.
    #[error("buffer {buffer} is declared more than once (params/allocs)")]
    DuplicateBuffer { buffer: String },
    /// A block's bindings do not match its iteration variables one to one.
    #[error("block {block} has {iter_vars} iteration variables but {bindings} bindings")]
    BindingCount {
        block: String,
        iter_vars: usize,
        bindings: usize,
    },
    /// An expression uses a variable that is not in scope there (bindings and predicates
    /// see enclosing loop variables; stores see the block's iteration variables).
    #[error("block {block}: variable {var} is not in scope in its {site}")]
    UnboundVar {
        block: String,
        var: String,
        site: &'static str,
    },
    /// A block accesses a buffer that is neither a parameter nor an allocation.
    #[error("block {block}: buffer {buffer} is neither a parameter nor allocated")]
    BufferNotAllocated { block: String, buffer: String },
    /// An access has the wrong number of indices.
    #[error("block {block}: buffer {buffer} has rank {rank}, accessed with {got} indices")]
    Arity {
        block: String,
        buffer: String,
        rank: usize,
        got: usize,
    },
    /// An expression is ill-typed (a float index, a boolean in arithmetic, ...).
    #[error("block {block}: type error: {reason}")]
    Type { block: String, reason: String },
    /// An expression nests deeper than the interpreter accepts.
    #[error("block {block}: expression nests deeper than {limit}")]
    TooDeep { block: String, limit: usize },
    /// A binding evaluated outside its iteration variable's domain.
    #[error("block {block}: iter var {iter_var} = {value} is outside [0, {extent})")]
    BindingOutOfRange {
        block: String,
        iter_var: String,
        value: i64,
        extent: i64,
    },
    /// A load or store outside the buffer's shape.
    #[error("block {block}: access {buffer}{indices:?} is outside its shape {shape:?}")]
    OutOfBounds {
        block: String,
        buffer: String,
        indices: Vec<i64>,
        shape: Vec<i64>,
    },
    /// An integer or boolean element was read before anything was written to it (its
    /// value is the NaN poison, which has no integer meaning).
    #[error("block {block}: read of never-written element {buffer}{indices:?}")]
    UnwrittenRead {
        block: String,
        buffer: String,
        indices: Vec<i64>,
    },
    /// Integer division or modulo by zero.
    #[error("block {block}: integer division by zero")]
    DivisionByZero { block: String },
    /// Integer arithmetic overflowed `i64`.
    #[error("block {block}: integer overflow")]
    Overflow { block: String },
}

/// The result type of the interpreter.
pub type Result<T> = std::result::Result<T, InterpError>;

/// Compiles `prog` and runs it on `params`, given in `prog.params` order; outputs are
/// written in place. Shapes are checked against the program's buffers.
pub fn run(prog: &Program, params: &mut [ArrayD<f32>]) -> Result<()> {
    Interpreter::new(prog)?.run(params)
}
