//! The loop-nest IR: arenas with typed ids, expressions, the arithmetic simplifier and
//! interval analysis, the printer and the verifier.

pub mod arrival;
pub mod expr;
pub mod ids;
pub mod interval;
pub mod offset;
pub mod pipeline;
pub mod printer;
pub mod program;
pub mod simplify;
pub mod tensorize;
pub mod verify;

pub use expr::{BinOp, DType, Expr, FactorRead, UnOp};
pub use ids::{BlockId, BufferId, LoopId, VarId};
pub use program::{
    fresh_name, AnnValue, Block, Buffer, BufferKind, Dim3, IterKind, IterVar, Loop, LoopKind, Node,
    Place, Program, Scope, StorageAlign, Store, ThreadTag, Var,
};
pub use verify::{verify, verify_all, VerifyError, VerifyResult};
