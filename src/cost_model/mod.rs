//! The learned cost model: features of a lowered candidate, a gradient-boosted ranker
//! trained on measured records, and its evaluation on workloads it never saw.
//!
//! The contract with the search (`crate::search`):
//!
//! * [`features::featurize`] turns one lowered candidate into a fixed-length vector whose
//!   entries [`features::FEATURE_NAMES`] names; no compiler, no device, microseconds.
//! * A [`Scorer`] scores a batch of lowered candidates, higher is better (the scale of
//!   normalized throughput: the best candidate of a workload near 1, failures near 0).
//!   The evolutionary search ranks its population with it and measures the best.
//! * Measured results flow back through `SearchStrategy::feedback` (to the search) and as
//!   new database records (to the next training of the model).
//!
//! No IO here: the database reads the records, the tuner decides when to retrain.

pub mod dataset;
pub mod eval;
pub mod features;
pub mod gbdt;
pub mod linear;
pub mod model;
mod scorer;
#[cfg(test)]
pub(crate) mod tests;

use crate::lower::Lowered;

pub use features::{featurize, DeviceSpec, FEATURE_NAMES, FEATURE_SET_VERSION};
pub use model::{Model, ModelError, ModelKind};
pub use scorer::ModelScorer;

/// Scores lowered candidates of one workload: one score per candidate, higher is
/// better; only the order within one call matters to the search.
pub trait Scorer: Send + Sync {
    /// A short name for reports (`gbdt`, `linear`, ...).
    fn name(&self) -> &str;
    /// Scores, in the order of `candidates`.
    fn score(&self, candidates: &[&Lowered]) -> Vec<f64>;
}
