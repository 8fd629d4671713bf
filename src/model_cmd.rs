//! `tessel model train` and `tessel model eval` over a record database: read every record
//! of a target kind and arch, featurize them ([`TrainingSet`]), then train and store a
//! model, or evaluate model kinds leave-one-workload-out. Reports are values; main.rs
//! prints them.

use crate::cost_model::dataset::{
    backend, device_spec, featurize_records as featurize_records_with, TrainingSet,
};
use crate::cost_model::eval::{leave_one_workload_out, EvalReport, Subset, RANDOM};
use crate::cost_model::{Model, ModelError, ModelKind, FEATURE_NAMES, FEATURE_SET_VERSION};
use crate::database::{Database, DatabaseError, Record, StoredModel, TargetKey, TargetKind};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::Instant;
use thiserror::Error;

/// Why a model command failed.
#[derive(Debug, Error)]
pub enum ModelCmdError {
    #[error(transparent)]
    Database(#[from] DatabaseError),
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The database holds no record of that kind (and arch).
    #[error("{db}: no {what} records to train on")]
    NoRecords { db: String, what: String },
    /// No model stored for that kind and arch.
    #[error("{db}: no {kind} model for {arch}: train one with `tessel model train`")]
    NoModel {
        db: String,
        kind: &'static str,
        arch: String,
    },
    /// Records of several archs and none chosen.
    #[error("{db}: records of several {kind} archs ({archs}): choose one with --arch")]
    SeveralArchs {
        db: String,
        kind: &'static str,
        archs: String,
    },
}

/// What the model the database stores for `kind` (and `arch`, default the database's
/// only one) predicts for candidates, given as their feature vectors: one score each,
/// higher predicted faster, on the model's own scale (a ranker's: compare scores of one
/// workload only). Returns the arch with the scores.
pub fn score(
    db: &Database,
    kind: TargetKind,
    arch: Option<&str>,
    features: &[Vec<f32>],
) -> Result<(String, Vec<f64>), ModelCmdError> {
    let arch = resolve_arch(db, kind, arch)?;
    let stored = db
        .load_model(kind, &arch)?
        .ok_or_else(|| ModelCmdError::NoModel {
            db: db.path().display().to_string(),
            kind: kind.name(),
            arch: arch.clone(),
        })?;
    let model = Model::from_stored(&stored, kind, &arch)?;
    Ok((arch, model.predict(features)))
}

/// A featurized set of records and what it cost.
#[derive(Debug)]
pub struct Featurized {
    pub set: TrainingSet,
    pub arch: String,
    /// Records read.
    pub records: usize,
    /// Records that did not replay or lower.
    pub skipped: usize,
    pub secs: f64,
}

/// The arch to work on: `arch` if given, else the only arch of `kind` in the database.
pub fn resolve_arch(
    db: &Database,
    kind: TargetKind,
    arch: Option<&str>,
) -> Result<String, ModelCmdError> {
    if let Some(a) = arch {
        return Ok(a.to_string());
    }
    let archs = db.record_archs(kind)?;
    match archs.as_slice() {
        [] => Err(ModelCmdError::NoRecords {
            db: db.path().display().to_string(),
            what: kind.name().to_string(),
        }),
        [one] => Ok(one.clone()),
        _ => Err(ModelCmdError::SeveralArchs {
            db: db.path().display().to_string(),
            kind: kind.name(),
            archs: archs.join(", "),
        }),
    }
}

/// Every record of `kind` on `arch`, featurized target by target (a CPU's core count is
/// part of its features). Features come from the database's cache where it has them at
/// this feature-set version; the others are computed and cached.
pub fn featurize_records(
    db: &mut Database,
    kind: TargetKind,
    arch: &str,
) -> Result<Featurized, ModelCmdError> {
    let (records, texts) = db.records_of_arch(kind, arch)?;
    if records.is_empty() {
        return Err(ModelCmdError::NoRecords {
            db: db.path().display().to_string(),
            what: format!("{} {arch}", kind.name()),
        });
    }
    let start = Instant::now();
    let mut by_target: BTreeMap<&TargetKey, Vec<Record>> = BTreeMap::new();
    for r in &records {
        by_target.entry(&r.target).or_default().push(r.clone());
    }
    let mut set = TrainingSet::default();
    let mut skipped = 0;
    for (target, rs) in by_target {
        let features = cached_or_computed(db, &rs, &texts, target)?;
        let (s, k) = TrainingSet::from_features(&rs, features);
        set.extend(s);
        skipped += k;
    }
    Ok(Featurized {
        set,
        arch: arch.to_string(),
        records: records.len(),
        skipped,
        secs: start.elapsed().as_secs_f64(),
    })
}

/// The features of `records` (all of `target`): cached ones read, the others computed
/// and cached.
fn cached_or_computed(
    db: &mut Database,
    records: &[Record],
    texts: &HashMap<String, String>,
    target: &TargetKey,
) -> Result<Vec<Option<Vec<f32>>>, ModelCmdError> {
    let ids: Vec<i64> = records.iter().map(|r| r.id).collect();
    let mut cached = db.cached_features(&ids, FEATURE_SET_VERSION, FEATURE_NAMES.len())?;
    let missing: Vec<Record> = records
        .iter()
        .filter(|r| !cached.contains_key(&r.id))
        .cloned()
        .collect();
    if !missing.is_empty() {
        let computed =
            featurize_records_with(&missing, texts, &device_spec(target), backend(target.kind));
        let rows: Vec<(i64, Option<Vec<f32>>)> =
            missing.iter().map(|r| r.id).zip(computed).collect();
        db.cache_features(&rows, FEATURE_SET_VERSION)?;
        cached.extend(rows);
    }
    Ok(records
        .iter()
        .map(|r| cached.get(&r.id).cloned().flatten())
        .collect())
}

/// What `tessel model train` did.
#[derive(Debug)]
pub struct TrainReport {
    pub arch: String,
    pub model_kind: ModelKind,
    pub records: usize,
    pub skipped: usize,
    pub featurize_secs: f64,
    pub train_secs: f64,
}

/// Trains a `model_kind` model on every record of `kind` (on `arch`, or the database's
/// only arch of that kind) and stores it.
pub fn train(
    db: &mut Database,
    kind: TargetKind,
    arch: Option<&str>,
    model_kind: ModelKind,
) -> Result<TrainReport, ModelCmdError> {
    let arch = resolve_arch(db, kind, arch)?;
    let f = featurize_records(db, kind, &arch)?;
    let start = Instant::now();
    let model = Model::train_kind(&f.set, model_kind)?;
    let train_secs = start.elapsed().as_secs_f64();
    let stored = StoredModel {
        target_kind: kind,
        arch: arch.clone(),
        feature_set_version: FEATURE_SET_VERSION,
        model_kind: model_kind.name().to_string(),
        records_trained_on: f.set.len() as u64,
        created_at: now_unix(),
        bytes: model.to_bytes(),
    };
    db.save_model(kind, &arch, &stored)?;
    Ok(TrainReport {
        arch,
        model_kind,
        records: f.set.len(),
        skipped: f.skipped,
        featurize_secs: f.secs,
        train_secs,
    })
}

/// Leave-one-workload-out of `kinds` (the first the main one) over the records of `kind`
/// on `arch` whose workloads are in `subset`.
pub fn eval(
    db: &mut Database,
    kind: TargetKind,
    arch: Option<&str>,
    kinds: &[ModelKind],
    seed: u64,
    subset: Subset,
) -> Result<(Featurized, EvalReport), ModelCmdError> {
    let arch = resolve_arch(db, kind, arch)?;
    let mut f = featurize_records(db, kind, &arch)?;
    f.set = subset.of(&f.set);
    let report = leave_one_workload_out(&f.set, kinds, seed)?;
    Ok((f, report))
}

/// The report as one JSON object: `workloads` (one entry per workload and target) and
/// `mean`, each with the main kind's `top1`, `top5`, `pairwise` and a `baselines` object
/// with the other kinds' and the random order's.
pub fn eval_json(f: &Featurized, r: &EvalReport) -> serde_json::Value {
    let main = r.kinds.first().cloned().unwrap_or_default();
    let entry = |metrics: &BTreeMap<String, crate::cost_model::eval::Metrics>| {
        let mut obj = serde_json::Map::new();
        if let Some(m) = metrics.get(&main) {
            obj.insert("top1".into(), m.top1.into());
            obj.insert("top5".into(), m.top5.into());
            obj.insert("pairwise".into(), m.pairwise.into());
        }
        let baselines: serde_json::Map<String, serde_json::Value> = metrics
            .iter()
            .filter(|(k, _)| **k != main)
            .map(|(k, m)| (k.clone(), serde_json::to_value(m).unwrap_or_default()))
            .collect();
        obj.insert("baselines".into(), baselines.into());
        obj
    };
    let workloads: Vec<serde_json::Value> = r
        .groups
        .iter()
        .map(|g| {
            let mut obj = entry(&g.metrics);
            obj.insert("workload".into(), g.workload.clone().into());
            obj.insert("target".into(), g.target.clone().into());
            obj.insert("records".into(), g.records.into());
            obj.insert("ok".into(), g.ok.into());
            obj.into()
        })
        .collect();
    serde_json::json!({
        "model": main,
        "arch": f.arch,
        "feature_set_version": FEATURE_SET_VERSION,
        "records": f.records,
        "skipped": f.skipped,
        "featurize_secs": f.secs,
        "train_secs": r.train_secs,
        "workloads": workloads,
        "mean": entry(&r.mean),
    })
}

/// The report as a table: one row per workload and target, the main kind's figures and
/// the baselines', then the mean.
pub fn eval_table(f: &Featurized, r: &EvalReport) -> String {
    let mut names = r.kinds.clone();
    names.push(RANDOM.to_string());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} records of {} ({} skipped), featurized in {:.1} s; leave-one-workload-out",
        f.records, f.arch, f.skipped, f.secs
    );
    let _ = write!(s, "{:<18} {:<28} {:>6}", "workload", "target", "ok");
    for n in &names {
        let _ = write!(s, " | {n:^20}");
    }
    let _ = writeln!(s);
    let _ = write!(s, "{:<18} {:<28} {:>6}", "", "", "");
    for _ in &names {
        let _ = write!(s, " | {:>6} {:>6} {:>6}", "top1", "top5", "pair");
    }
    let _ = writeln!(s);
    let row = |s: &mut String, metrics: &BTreeMap<String, crate::cost_model::eval::Metrics>| {
        for n in &names {
            match metrics.get(n) {
                Some(m) => {
                    let _ = write!(s, " | {:>6.3} {:>6.3} {:>6.3}", m.top1, m.top5, m.pairwise);
                }
                None => {
                    let _ = write!(s, " | {:>20}", "-");
                }
            }
        }
        let _ = writeln!(s);
    };
    for g in &r.groups {
        let short = &g.workload[..g.workload.len().min(16)];
        let target = &g.target[..g.target.len().min(28)];
        let _ = write!(s, "{short:<18} {target:<28} {:>6}", g.ok);
        row(&mut s, &g.metrics);
    }
    let _ = write!(s, "{:<18} {:<28} {:>6}", "mean", "", "");
    row(&mut s, &r.mean);
    for (k, secs) in &r.train_secs {
        let _ = writeln!(s, "training {k}: {secs:.1} s over all folds");
    }
    s
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
