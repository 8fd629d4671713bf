//! Schedule primitives and traces.

pub mod annotation;
pub mod cache;
pub mod compute_at;
pub mod error;
pub mod get;
pub mod inline;
pub mod inst;
pub mod loop_transformation;
pub mod reduction;
pub mod sampling;
pub mod state;
pub mod util;

pub use error::{Result, ScheduleError};
pub use inst::{Decision, InstKind, Instruction, Operand, RvInfo, RvKind, Trace};
pub use state::{AnnArg, BlockRv, ExprRv, IntArg, LoopRv, Schedule, Target};
pub mod replay;
pub use replay::{replay, ReplayError};
#[cfg(test)]
mod tests;
