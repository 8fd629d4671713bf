//! Schedule primitives and traces.

pub mod annotation;
pub mod cache;
pub mod compute_at;
pub mod error;
pub mod get;
pub mod hints;
pub mod im2col;
pub mod inline;
pub mod inst;
pub mod json;
pub mod layout;
pub mod loop_transformation;
pub mod pad_einsum;
pub mod reduction;
pub mod replay;
pub mod rfactor;
pub mod sampling;
pub mod serial_sum;
pub mod state;
pub mod text;
pub mod util;
pub mod validate;

pub use error::{Result, ScheduleError};
pub use inst::{Decision, InstKind, Instruction, Operand, RvInfo, RvKind, Trace};
pub use replay::{replay, replay_fitted, ReplayError};
pub use state::{AnnArg, BlockRv, ExprRv, IntArg, LoopRv, Schedule, Target};

#[cfg(test)]
pub(crate) mod tests;
