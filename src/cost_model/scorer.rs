//! [`ModelScorer`]: the [`Scorer`] the search ranks candidates with, a trained [`Model`]
//! over the features of one device.

use super::features::{featurize, DeviceSpec};
use super::model::Model;
use super::Scorer;
use crate::lower::Lowered;
use rayon::prelude::*;

/// Scores lowered candidates with a trained model: featurizes them in parallel for `dev`
/// and predicts.
#[derive(Clone, Debug)]
pub struct ModelScorer {
    model: Model,
    dev: DeviceSpec,
}

impl ModelScorer {
    /// A scorer of `model` for candidates of the device `dev` describes.
    pub fn new(model: Model, dev: DeviceSpec) -> ModelScorer {
        ModelScorer { model, dev }
    }

    /// The model it scores with.
    pub fn model(&self) -> &Model {
        &self.model
    }
}

impl Scorer for ModelScorer {
    fn name(&self) -> &str {
        self.model.kind().name()
    }

    fn score(&self, candidates: &[&Lowered]) -> Vec<f64> {
        let features: Vec<Vec<f32>> = candidates
            .par_iter()
            .map(|l| featurize(l, &self.dev))
            .collect();
        self.model.predict(&features)
    }
}
