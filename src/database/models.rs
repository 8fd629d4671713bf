//! Trained cost models (schema version 2, table `models`): one per target kind, arch and
//! feature-set version. The database stores the bytes as given; reading them into a
//! model, and refusing stale or corrupt ones, is the cost model's business.

use super::types::TargetKind;
use super::{Context, Database, DatabaseError, Result};
use crate::cost_model::FEATURE_SET_VERSION;
use rusqlite::{params, OptionalExtension};
use std::collections::HashMap;

/// A model as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredModel {
    /// The target kind its records were measured on.
    pub target_kind: TargetKind,
    /// The arch its records were measured on.
    pub arch: String,
    /// The feature-set version it was trained on.
    pub feature_set_version: u32,
    /// What kind of model the bytes hold (`gbdt`, ...).
    pub model_kind: String,
    /// How many records it was trained on.
    pub records_trained_on: u64,
    /// Unix seconds.
    pub created_at: i64,
    /// The serialized model.
    pub bytes: Vec<u8>,
}

impl Database {
    /// Stores `model` for (`kind`, `arch`, its feature-set version), replacing the one
    /// stored there before.
    pub fn save_model(&mut self, kind: TargetKind, arch: &str, model: &StoredModel) -> Result<()> {
        let tx = self.write()?;
        tx.execute(
            "INSERT INTO models (target_kind, arch, feature_set_version, model_kind, \
             records_trained_on, created_at, model_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
             ON CONFLICT (target_kind, arch, feature_set_version) DO UPDATE SET \
             model_kind = excluded.model_kind, records_trained_on = excluded.records_trained_on, \
             created_at = excluded.created_at, model_bytes = excluded.model_bytes",
            params![
                kind.name(),
                arch,
                model.feature_set_version,
                model.model_kind,
                i64::try_from(model.records_trained_on).unwrap_or(i64::MAX),
                model.created_at,
                model.bytes
            ],
        )
        .ctx("storing a model")?;
        tx.commit().ctx("committing a model")
    }

    /// The model stored for (`kind`, `arch`): the one of this build's feature-set version
    /// ([`FEATURE_SET_VERSION`]) if there is one, else the newest of another version
    /// (which the caller must not use, only report: `Model::from_stored` refuses it);
    /// `None` when there is none for that arch.
    pub fn load_model(&self, kind: TargetKind, arch: &str) -> Result<Option<StoredModel>> {
        self.conn
            .query_row(
                "SELECT feature_set_version, model_kind, records_trained_on, created_at, \
                 model_bytes FROM models WHERE target_kind = ?1 AND arch = ?2 \
                 ORDER BY (feature_set_version = ?3) DESC, created_at DESC, id DESC LIMIT 1",
                params![kind.name(), arch, FEATURE_SET_VERSION],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, Vec<u8>>(4)?,
                    ))
                },
            )
            .optional()
            .ctx("reading a model")?
            .map(|(v, model_kind, n, created_at, bytes)| {
                Ok(StoredModel {
                    target_kind: kind,
                    arch: arch.to_string(),
                    feature_set_version: u32::try_from(v).map_err(|_| DatabaseError::Corrupt {
                        id: 0,
                        detail: format!("model feature-set version {v}"),
                    })?,
                    model_kind,
                    records_trained_on: u64::try_from(n).unwrap_or(0),
                    created_at,
                    bytes,
                })
            })
            .transpose()
    }

    /// The archs that have a stored model of `kind`, sorted (to name them when the one
    /// asked for has none).
    pub fn model_archs(&self, kind: TargetKind) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT arch FROM models WHERE target_kind = ?1 ORDER BY arch")
            .ctx("preparing a model query")?;
        let rows = stmt
            .query_map([kind.name()], |r| r.get(0))
            .ctx("reading model archs")?;
        rows.map(|r| r.ctx("reading model archs")).collect()
    }

    /// The archs with records of `kind`, sorted.
    pub fn record_archs(&self, kind: TargetKind) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT arch FROM targets WHERE kind = ?1 ORDER BY arch")
            .ctx("preparing a target query")?;
        let rows = stmt
            .query_map([kind.name()], |r| r.get(0))
            .ctx("reading archs")?;
        rows.map(|r| r.ctx("reading archs")).collect()
    }

    /// Every record of `kind` measured on `arch` (any device), failures included, with
    /// the canonical texts of their workloads by key.
    pub fn records_of_arch(
        &self,
        kind: TargetKind,
        arch: &str,
    ) -> Result<(Vec<super::Record>, HashMap<String, String>)> {
        let sql = format!(
            "SELECT {} FROM {} WHERE t.kind = ?1 AND t.arch = ?2 ORDER BY r.id",
            super::store::LOCAL_COLUMNS,
            super::store::RECORD_FROM
        );
        let mut stmt = self.conn.prepare(&sql).ctx("preparing a record query")?;
        let rows = stmt
            .query_map(params![kind.name(), arch], super::store::read_row)
            .ctx("reading records")?;
        let mut records = Vec::new();
        for row in rows {
            records.push(super::store::parse_record(row.ctx("reading a record")?)?);
        }
        let mut texts = HashMap::new();
        for r in &records {
            if !texts.contains_key(&r.workload_key) {
                if let Some(t) = self.workload_text(&r.workload_key)? {
                    texts.insert(r.workload_key.clone(), t);
                }
            }
        }
        Ok((records, texts))
    }
}

impl Database {
    /// The cached features of `record_ids` at `feature_set_version`, by record id:
    /// `Some(None)` for a record cached as not featurizable; absent when not cached or
    /// cached with another length than `feature_count`.
    pub fn cached_features(
        &self,
        record_ids: &[i64],
        feature_set_version: u32,
        feature_count: usize,
    ) -> Result<HashMap<i64, Option<Vec<f32>>>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT record_id, features FROM record_features \
                 WHERE feature_set_version = ?1",
            )
            .ctx("preparing a feature query")?;
        let wanted: std::collections::HashSet<i64> = record_ids.iter().copied().collect();
        let rows = stmt
            .query_map([feature_set_version], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .ctx("reading features")?;
        let mut out = HashMap::new();
        for row in rows {
            let (id, blob) = row.ctx("reading features")?;
            if !wanted.contains(&id) {
                continue;
            }
            if blob.len() % 4 != 0 {
                return Err(DatabaseError::Corrupt {
                    id,
                    detail: format!("cached features of {} bytes", blob.len()),
                });
            }
            let v: Vec<f32> = blob
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            // A vector of another length is stale (the feature list changed without a
            // version bump during development): left out, so that it is recomputed.
            if !v.is_empty() && v.len() != feature_count {
                continue;
            }
            out.insert(id, (!v.is_empty()).then_some(v));
        }
        Ok(out)
    }

    /// Caches the features of records (`None`: not featurizable) at
    /// `feature_set_version`, in one transaction.
    pub fn cache_features(
        &mut self,
        features: &[(i64, Option<Vec<f32>>)],
        feature_set_version: u32,
    ) -> Result<()> {
        let tx = self.write()?;
        {
            let mut stmt = tx
                .prepare(
                    "INSERT OR REPLACE INTO record_features \
                     (record_id, feature_set_version, features) VALUES (?1, ?2, ?3)",
                )
                .ctx("preparing a feature insert")?;
            for (id, f) in features {
                let blob: Vec<u8> = f.iter().flatten().flat_map(|v| v.to_le_bytes()).collect();
                stmt.execute(params![id, feature_set_version, blob])
                    .ctx("caching features")?;
            }
        }
        tx.commit().ctx("committing cached features")
    }
}
