//! The search: a workload's design space (sketch rules read from `search_spaces/*.toml`),
//! the postprocessors that reject what cannot run on the target, and the strategies that
//! propose candidates (random sampling now; evolutionary search next).
//!
//! No IO here: the tuner (`crate::tune`) measures and records what the search proposes.

pub mod postproc;
pub mod random;
pub mod sketch;
pub mod space;

pub use postproc::{RejectKind, Rejection, TargetLimits, Verified};
pub use random::{ir_hash, Candidate, MeasuredResult, Proposal, RandomSearch, SearchStrategy};
pub use sketch::SketchError;
pub use space::{SearchSpace, SpaceError};
