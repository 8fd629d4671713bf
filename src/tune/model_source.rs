//! The cost model the tuner uses: [`StoredModels`] is the [`ModelSource`] behind
//! `tessel tune`. It loads the model stored in the database for the target's kind and arch
//! (refusing one of another feature-set version, another target or corrupt bytes, with
//! the reason), trains one with `crate::cost_model` on the records the tuner hands it, and
//! stores the newest back.

use super::learn::{LearnedModel, ModelSource, TrainingData};
use crate::cost_model::dataset::{backend, device_spec, TrainingSet};
use crate::cost_model::{Model, ModelKind, ModelScorer, FEATURE_SET_VERSION};
use crate::database::{Database, StoredModel, TargetKey};
use std::collections::HashMap;
use std::sync::Arc;

/// Models of one kind (the GBDT by default), kept in the record database.
pub struct StoredModels {
    pub kind: ModelKind,
}

impl Default for StoredModels {
    fn default() -> Self {
        StoredModels {
            kind: ModelKind::DEFAULT,
        }
    }
}

fn learned(model: Model, target: &TargetKey, records: usize) -> LearnedModel {
    let kind = model.kind().name().to_string();
    let model = Arc::new(model);
    LearnedModel {
        scorer: Arc::new(ModelScorer::new((*model).clone(), device_spec(target))),
        kind,
        records,
        stored: model,
    }
}

impl ModelSource for StoredModels {
    fn load(&self, db: &Database, target: &TargetKey) -> Result<Option<LearnedModel>, String> {
        let Some(stored) = db
            .load_model(target.kind, &target.arch)
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let model = Model::from_stored(&stored, target.kind, &target.arch).map_err(|e| {
            format!(
                "the stored {} model of {} {} is refused: {e}",
                stored.model_kind,
                target.kind.name(),
                target.arch
            )
        })?;
        Ok(Some(learned(
            model,
            target,
            usize::try_from(stored.records_trained_on).unwrap_or(usize::MAX),
        )))
    }

    fn train(&self, data: &TrainingData) -> Result<LearnedModel, String> {
        let texts: HashMap<String, String> = data
            .workload_texts
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let (set, _skipped) = TrainingSet::from_records(
            &data.records,
            &texts,
            &device_spec(&data.target),
            backend(data.target.kind),
        );
        let model = Model::train_kind(&set, self.kind).map_err(|e| e.to_string())?;
        Ok(learned(model, &data.target, set.len()))
    }

    fn save(
        &self,
        db: &mut Database,
        target: &TargetKey,
        model: &LearnedModel,
    ) -> Result<(), String> {
        let m = model
            .stored
            .downcast_ref::<Model>()
            .ok_or("the model to store is not a cost_model::Model")?;
        let stored = StoredModel {
            target_kind: target.kind,
            arch: target.arch.clone(),
            feature_set_version: FEATURE_SET_VERSION,
            model_kind: m.kind().name().to_string(),
            records_trained_on: model.records as u64,
            created_at: crate::database::now_unix(),
            bytes: m.to_bytes(),
        };
        db.save_model(target.kind, &target.arch, &stored)
            .map_err(|e| e.to_string())
    }
}
