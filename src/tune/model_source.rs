//! The cost model the tuner uses: [`StoredModels`] is the [`ModelSource`] behind
//! `tessel tune`. It loads the model stored in the database for the target's kind and arch
//! (refusing one of another feature-set version, another target or corrupt bytes, with
//! the reason), trains one with `crate::cost_model` on the records the tuner hands it
//! (featurizing only those whose features it was not handed), and stores the newest back.

use super::learn::{LearnedModel, ModelSource, TrainingData};
use crate::cost_model::dataset::{backend, device_spec, featurize_records, TrainingSet};
use crate::cost_model::{Model, ModelError, ModelKind, ModelScorer, FEATURE_SET_VERSION};
use crate::database::{Database, Record, StoredModel, TargetKey};
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

    fn train(
        &self,
        data: &mut TrainingData,
        stop: &dyn Fn() -> bool,
    ) -> Result<LearnedModel, String> {
        let records: Vec<Record> = data
            .training_indices()
            .into_iter()
            .map(|i| data.records[i].clone())
            .collect();
        let missing: Vec<Record> = records
            .iter()
            .filter(|r| !data.features.contains_key(&r.id))
            .cloned()
            .collect();
        if !missing.is_empty() {
            let texts: HashMap<String, String> = data
                .workload_texts
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let computed = featurize_records(
                &missing,
                &texts,
                &device_spec(&data.target),
                backend(data.target.kind),
            );
            for (r, f) in missing.iter().zip(computed) {
                data.features.insert(r.id, f);
                data.computed.push(r.id);
            }
        }
        if stop() {
            return Err(ModelError::Stopped.to_string());
        }
        let features = records
            .iter()
            .map(|r| data.features.get(&r.id).cloned().flatten())
            .collect();
        let (set, _skipped) = TrainingSet::from_features(&records, features);
        let model = Model::train_kind_until(&set, self.kind, stop).map_err(|e| e.to_string())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost_model::tests::{fixture_db, target};
    use crate::cost_model::{FEATURE_NAMES, FEATURE_SET_VERSION};

    #[test]
    fn a_retraining_featurizes_only_the_records_it_was_not_handed() {
        let db = fixture_db();
        let mut data = TrainingData::empty(&target());
        data.read_new(&db).unwrap();
        let all = data.records.len();
        assert!(all > 60, "{all} ok records in the fixture");
        let later = data.records.split_off(40);
        let source = StoredModels::default();
        let first = source.train(&mut data, &|| false).unwrap();
        assert_eq!(data.computed.len(), 40);
        data.records.extend(later);
        let second = source.train(&mut data, &|| false).unwrap();
        assert_eq!(data.computed.len(), all, "each record featurized once");
        let mut ids = data.computed.clone();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all);
        assert!(second.records > first.records);
    }

    #[test]
    fn features_cached_in_the_database_are_read_not_computed() {
        let mut db = fixture_db();
        let mut data = TrainingData::empty(&target());
        data.read_new(&db).unwrap();
        StoredModels::default().train(&mut data, &|| false).unwrap();
        let rows: Vec<(i64, Option<Vec<f32>>)> = data
            .computed
            .iter()
            .map(|id| (*id, data.features[id].clone()))
            .collect();
        db.cache_features(&rows, FEATURE_SET_VERSION).unwrap();
        // Cached at another length (a feature list changed without a version bump):
        // not read.
        let stale = rows[0].0;
        db.cache_features(
            &[(stale, Some(vec![1.0; FEATURE_NAMES.len() + 1]))],
            FEATURE_SET_VERSION,
        )
        .unwrap();

        let mut fresh = TrainingData::empty(&target());
        fresh.read_new(&db).unwrap();
        assert_eq!(fresh.features.len(), rows.len() - 1);
        assert!(!fresh.features.contains_key(&stale));
        StoredModels::default()
            .train(&mut fresh, &|| false)
            .unwrap();
        assert_eq!(fresh.computed, vec![stale]);
        assert_eq!(fresh.features[&stale], data.features[&stale]);
    }
}
