//! The cost model: one trained predictor of a [`ModelKind`], trained on a
//! [`TrainingSet`], scoring feature vectors (higher is faster), and its bytes.
//!
//! The bytes are a header line `tessel-cost-model v1 kind=<kind> features=<n>
//! feature_set=<version>` and the model as JSON. [`Model::from_bytes`] refuses anything
//! else with a typed error: another magic or format version, an unknown kind, a feature
//! count or feature-set version that is not this build's, unparsable JSON, a tree that
//! points outside itself.

use super::dataset::TrainingSet;
use super::features::{FEATURE_NAMES, FEATURE_SET_VERSION};
use super::gbdt::{sigmoid, Gbdt, GbdtError, GbdtParams, GroupedTargets, Loss, PairLoss};
use super::linear::Linear;
use crate::database::{StoredModel, TargetKind};
use linfa::traits::Fit;
use linfa::DatasetBase;
use ndarray::{Array1, Array2};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The version of the byte format.
pub const MODEL_FORMAT_VERSION: u32 = 1;

const MAGIC: &str = "tessel-cost-model";

/// The kinds of model this build can train.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ModelKind {
    /// The own histogram GBDT with squared loss on the label, weighted toward fast
    /// programs (best with the placeholder features; three times faster to train).
    Gbdt,
    /// The own histogram GBDT with the pairwise RankNet loss within groups, its pairs
    /// [`RANK_PAIRS`] (random ones and extra ones among each group's best), [`RANK_BAG`]
    /// rankers of different seeds averaged (the default: it ranked best with the full
    /// feature set, see benches/RESULTS.md).
    GbdtRank,
    /// The pairwise GBDT of `gbdt-rank` beside a GBDT failure classifier (logistic loss on
    /// "the record failed": rejected for spills or build limits, timed out, crashed);
    /// candidates the classifier thinks likelier to fail than not are ranked after all
    /// others, each part in the ranker's order ([`combined_score`]).
    GbdtRankFail,
    /// Least squares on standardized features (linfa-linear): the baseline.
    Linear,
    /// The `perpetual` crate's booster, squared loss (built with `--features perpetual`).
    #[cfg(feature = "perpetual")]
    Perpetual,
}

impl ModelKind {
    /// The kind `Model::train` trains.
    /// The pairwise loss ranked best on the shipped H100/H200 records (H100 run of
    /// 2026-11-23, benches/RESULTS.md): top-1 0.805 against the squared loss's 0.733; with
    /// feature set v2 and three rankers averaged 0.825 (2-core run, same day), the failure
    /// classifier of `gbdt-rank-fail` adding nothing to top-1 or top-5; with the extra
    /// pairs among each workload's best ([`RANK_PAIRS`], feature set v3) see the section
    /// "The cost model with feature set v3" of benches/RESULTS.md.
    pub const DEFAULT: ModelKind = ModelKind::GbdtRank;

    /// Every kind of this build.
    pub fn all() -> Vec<ModelKind> {
        vec![
            ModelKind::Gbdt,
            ModelKind::GbdtRank,
            ModelKind::GbdtRankFail,
            ModelKind::Linear,
            #[cfg(feature = "perpetual")]
            ModelKind::Perpetual,
        ]
    }

    /// The name stored in the database and printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Gbdt => "gbdt",
            ModelKind::GbdtRank => "gbdt-rank",
            ModelKind::GbdtRankFail => "gbdt-rank-fail",
            ModelKind::Linear => "linear",
            #[cfg(feature = "perpetual")]
            ModelKind::Perpetual => "perpetual",
        }
    }

    /// The kind named `s` in this build.
    pub fn parse(s: &str) -> Option<ModelKind> {
        ModelKind::all().into_iter().find(|k| k.name() == s)
    }
}

/// Why a model cannot be trained or read.
#[derive(Debug, Error)]
pub enum ModelError {
    /// Nothing to train on.
    #[error("no training samples")]
    Empty,
    /// The trainer failed.
    #[error("training a {kind} model: {detail}")]
    Train { kind: &'static str, detail: String },
    /// The bytes are not a model this build wrote.
    #[error("corrupt model bytes: {0}")]
    Corrupt(String),
    /// The model is of a kind this build does not know.
    #[error("model kind {0:?} is unknown to this build")]
    UnknownKind(String),
    /// A stored model of another target was handed over.
    #[error("the stored model is for {found}, not {expected}")]
    OtherTarget { found: String, expected: String },
    /// The model was trained on another feature set.
    #[error(
        "the model was trained on feature set v{found}, this tessel computes v{expected}: \
         retrain it (`tessel model train`)"
    )]
    FeatureSet { found: u32, expected: u32 },
    /// The caller asked the training to stop before it finished.
    #[error("the training was stopped before it finished")]
    Stopped,
}

impl From<GbdtError> for ModelError {
    fn from(e: GbdtError) -> Self {
        ModelError::Train {
            kind: "gbdt",
            detail: e.to_string(),
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
enum Inner {
    Gbdt(Gbdt),
    /// A ranker and a failure classifier, combined by [`combined_score`].
    RankFail {
        rank: Gbdt,
        fail: Gbdt,
        threshold: f64,
    },
    Linear(Linear),
    #[cfg(feature = "perpetual")]
    Perpetual(Box<perpetual::PerpetualBooster>),
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inner::Gbdt(g) => write!(f, "Gbdt({} trees)", g.trees.len()),
            Inner::RankFail { rank, fail, .. } => write!(
                f,
                "RankFail({} + {} trees)",
                rank.trees.len(),
                fail.trees.len()
            ),
            Inner::Linear(l) => write!(f, "Linear({} coefficients)", l.coef.len()),
            #[cfg(feature = "perpetual")]
            Inner::Perpetual(_) => write!(f, "Perpetual"),
        }
    }
}

/// A trained cost model.
#[derive(Clone, Debug)]
pub struct Model {
    kind: ModelKind,
    features: usize,
    inner: Inner,
}

impl Model {
    /// Trains a model of [`ModelKind::DEFAULT`] on `set`.
    pub fn train(set: &TrainingSet) -> Result<Model, ModelError> {
        Model::train_kind(set, ModelKind::DEFAULT)
    }

    /// Trains a model of `kind` on `set`.
    pub fn train_kind(set: &TrainingSet, kind: ModelKind) -> Result<Model, ModelError> {
        Model::train_kind_until(set, kind, &|| false)
    }

    /// Trains a model of `kind` on `set`, giving up with [`ModelError::Stopped`] when
    /// `stop` says so; it is asked between the ensemble's members (each a few seconds of
    /// training on the shipped records).
    pub fn train_kind_until(
        set: &TrainingSet,
        kind: ModelKind,
        stop: &dyn Fn() -> bool,
    ) -> Result<Model, ModelError> {
        if set.is_empty() {
            return Err(ModelError::Empty);
        }
        let features = set.features[0].len();
        if let Some(bad) = set.features.iter().find(|f| f.len() != features) {
            return Err(ModelError::Train {
                kind: kind.name(),
                detail: format!("feature vectors of {} and {} entries", features, bad.len()),
            });
        }
        let inner = match kind {
            ModelKind::Gbdt => Inner::Gbdt(train_ranker(set, &GbdtParams::default())?),
            ModelKind::GbdtRank => {
                Inner::Gbdt(train_ranker_bagged(set, &RANK_PARAMS, RANK_BAG, stop)?)
            }
            ModelKind::GbdtRankFail => {
                let config = RankFailConfig::default();
                Inner::RankFail {
                    rank: train_ranker_bagged(set, &config.rank, RANK_BAG, stop)?,
                    fail: train_failure_classifier(set, &config.fail)?,
                    threshold: config.threshold,
                }
            }
            ModelKind::Linear => {
                Inner::Linear(Linear::fit(&set.features, &set.labels).map_err(|detail| {
                    ModelError::Train {
                        kind: kind.name(),
                        detail,
                    }
                })?)
            }
            #[cfg(feature = "perpetual")]
            ModelKind::Perpetual => Inner::Perpetual(Box::new(train_perpetual(set)?)),
        };
        Ok(Model {
            kind,
            features,
            inner,
        })
    }

    /// Its kind.
    pub fn kind(&self) -> ModelKind {
        self.kind
    }

    /// The length of the feature vectors it takes.
    pub fn feature_count(&self) -> usize {
        self.features
    }

    /// One score per feature vector, higher is faster (in parallel).
    pub fn predict(&self, features: &[Vec<f32>]) -> Vec<f64> {
        match &self.inner {
            Inner::Gbdt(g) => features.par_iter().map(|f| g.predict_one(f)).collect(),
            Inner::RankFail {
                rank,
                fail,
                threshold,
            } => features
                .par_iter()
                .map(|f| combined_score(rank.predict_one(f), fail.predict_one(f), *threshold))
                .collect(),
            Inner::Linear(l) => features.par_iter().map(|f| l.predict_one(f)).collect(),
            #[cfg(feature = "perpetual")]
            Inner::Perpetual(p) => {
                let data = column_major(features, self.features);
                let m = perpetual::Matrix::new(&data, features.len(), self.features);
                p.predict(&m, true)
            }
        }
    }

    /// The model as bytes (header line + JSON).
    pub fn to_bytes(&self) -> Vec<u8> {
        let body = serde_json::to_vec(&self.inner).unwrap_or_default();
        let mut out = format!(
            "{MAGIC} v{MODEL_FORMAT_VERSION} kind={} features={} feature_set={}\n",
            self.kind.name(),
            self.features,
            FEATURE_SET_VERSION
        )
        .into_bytes();
        out.extend(body);
        out
    }

    /// The model of a database row, for records of `kind` on `arch`: refused when it was
    /// stored for another target or feature set, or its bytes are corrupt.
    pub fn from_stored(
        stored: &StoredModel,
        kind: TargetKind,
        arch: &str,
    ) -> Result<Model, ModelError> {
        if stored.target_kind != kind || stored.arch != arch {
            return Err(ModelError::OtherTarget {
                found: format!("{} {}", stored.target_kind.name(), stored.arch),
                expected: format!("{} {arch}", kind.name()),
            });
        }
        if stored.feature_set_version != FEATURE_SET_VERSION {
            return Err(ModelError::FeatureSet {
                found: stored.feature_set_version,
                expected: FEATURE_SET_VERSION,
            });
        }
        Model::from_bytes(&stored.bytes)
    }

    /// Reads bytes [`Model::to_bytes`] wrote, refusing corrupt ones and models of another
    /// feature set.
    pub fn from_bytes(bytes: &[u8]) -> Result<Model, ModelError> {
        let newline = bytes
            .iter()
            .position(|b| *b == b'\n')
            .ok_or_else(|| ModelError::Corrupt("no header line".into()))?;
        let header = std::str::from_utf8(&bytes[..newline])
            .map_err(|_| ModelError::Corrupt("the header is not UTF-8".into()))?;
        let h = Header::parse(header)?;
        if h.feature_set != FEATURE_SET_VERSION {
            return Err(ModelError::FeatureSet {
                found: h.feature_set,
                expected: FEATURE_SET_VERSION,
            });
        }
        let kind = ModelKind::parse(&h.kind).ok_or(ModelError::UnknownKind(h.kind))?;
        if h.features != FEATURE_NAMES.len() {
            return Err(ModelError::Corrupt(format!(
                "{} features, this feature set has {}",
                h.features,
                FEATURE_NAMES.len()
            )));
        }
        let inner: Inner = serde_json::from_slice(&bytes[newline + 1..])
            .map_err(|e| ModelError::Corrupt(format!("model body: {e}")))?;
        let well_formed = match (&inner, kind) {
            (Inner::Gbdt(g), ModelKind::Gbdt | ModelKind::GbdtRank) => {
                g.features == h.features && g.is_well_formed()
            }
            (
                Inner::RankFail {
                    rank,
                    fail,
                    threshold,
                },
                ModelKind::GbdtRankFail,
            ) => {
                [rank, fail]
                    .iter()
                    .all(|g| g.features == h.features && g.is_well_formed())
                    && (0.0..=1.0).contains(threshold)
            }
            (Inner::Linear(l), ModelKind::Linear) => {
                l.coef.len() == h.features && l.is_well_formed()
            }
            #[cfg(feature = "perpetual")]
            (Inner::Perpetual(_), ModelKind::Perpetual) => true,
            _ => false,
        };
        if !well_formed {
            return Err(ModelError::Corrupt(format!(
                "the {} model body is inconsistent with its header",
                kind.name()
            )));
        }
        Ok(Model {
            kind,
            features: h.features,
            inner,
        })
    }
}

/// The parsed header line.
struct Header {
    kind: String,
    features: usize,
    feature_set: u32,
}

impl Header {
    fn parse(line: &str) -> Result<Header, ModelError> {
        let corrupt = || ModelError::Corrupt(format!("header {line:?}"));
        let mut words = line.split(' ');
        if words.next() != Some(MAGIC) {
            return Err(ModelError::Corrupt(format!(
                "not a tessel cost model (header {line:?})"
            )));
        }
        let version = words.next().ok_or_else(corrupt)?;
        if version != format!("v{MODEL_FORMAT_VERSION}") {
            return Err(ModelError::Corrupt(format!(
                "model format {version}, this tessel reads v{MODEL_FORMAT_VERSION}"
            )));
        }
        let mut field = |name: &str| -> Result<String, ModelError> {
            words
                .next()
                .and_then(|w| w.strip_prefix(name))
                .and_then(|w| w.strip_prefix('='))
                .map(str::to_string)
                .ok_or_else(corrupt)
        };
        let kind = field("kind")?;
        let features = field("features")?.parse().map_err(|_| corrupt())?;
        let feature_set = field("feature_set")?.parse().map_err(|_| corrupt())?;
        Ok(Header {
            kind,
            features,
            feature_set,
        })
    }
}

/// The weight of a sample in the squared losses: fast programs count most.
fn sample_weight(label: f64) -> f64 {
    1.0 + 4.0 * label
}

/// The parameters of `gbdt-rank`'s trees: [`GbdtParams::DEFAULT`] with the pairwise loss,
/// whose pairs include [`RANK_PAIRS`]'s extra pairs among each workload's best.
pub const RANK_PARAMS: GbdtParams = GbdtParams {
    loss: Loss::Pairwise(RANK_PAIRS),
    ..GbdtParams::DEFAULT
};

/// The pairs of `gbdt-rank`: 8 random partners per sample, and 8 more for each of a
/// group's 32 best-labelled samples drawn among those 32, so that the order among the
/// best candidates (what top-1 and top-5 judge) is trained on more than the few pairs a
/// random draw gives it. On the development workloads (two seed triples) top-1 + top-5
/// rose from 1.762 to 1.802; 64 best, or 16 pairs each, scored less, and so did the
/// weightings of `PairLoss` (benches/RESULTS.md).
pub const RANK_PAIRS: PairLoss = PairLoss {
    top: 32,
    top_pairs: 8,
    ..PairLoss::DEFAULT
};

/// Rankers of different seeds `gbdt-rank` (and `gbdt-rank-fail`) average
/// ([`train_ranker_bagged`]): on the development workloads one ranker's top-1 moved
/// between 0.78 and 0.86 with the seed alone; three averaged scored 0.840 with either of
/// two seed triples (benches/RESULTS.md).
pub const RANK_BAG: usize = 3;

/// How `gbdt-rank-fail` is trained: its ranker's and its classifier's parameters and the
/// probability of failure above which a candidate is ranked after the others.
#[derive(Clone, Debug, PartialEq)]
pub struct RankFailConfig {
    pub rank: GbdtParams,
    pub fail: GbdtParams,
    pub threshold: f64,
}

impl Default for RankFailConfig {
    fn default() -> Self {
        RankFailConfig {
            rank: RANK_PARAMS,
            fail: GbdtParams {
                loss: Loss::Logistic,
                ..GbdtParams::default()
            },
            threshold: 0.5,
        }
    }
}

/// What `gbdt-rank-fail` subtracts from the ranker's score of a candidate it expects to
/// fail: far more than the spread of the ranker's scores (tens), so that those candidates
/// come after all others.
pub const FAILURE_OFFSET: f64 = 1e4;

/// The score of `gbdt-rank-fail`: the ranker's score `rank`, less [`FAILURE_OFFSET`] when
/// the probability of failure (`fail_logit` is the classifier's log-odds) is above
/// `threshold`. (A penalty proportional to the probability, `rank - c p`, ranked no better
/// on the development workloads for any `c` tried, 0.5 to 100; see benches/RESULTS.md.)
pub fn combined_score(rank: f64, fail_logit: f64, threshold: f64) -> f64 {
    if sigmoid(fail_logit) > threshold {
        rank - FAILURE_OFFSET
    } else {
        rank
    }
}

/// A GBDT over `set` with `params` learning the labels (normalized throughput), every
/// sample weighted by [`sample_weight`] (the squared loss uses the weights; the pairwise
/// loss weighs pairs by their label difference instead).
pub fn train_ranker(set: &TrainingSet, params: &GbdtParams) -> Result<Gbdt, ModelError> {
    let weights = set.labels.iter().map(|y| sample_weight(*y)).collect();
    fit_gbdt(set, set.labels.clone(), weights, params)
}

/// `bag` rankers of [`train_ranker`] with seeds `params.seed + i`, averaged into one
/// ensemble (every tree kept, its leaves divided by `bag`): the pairwise loss samples its
/// pairs at random, and the average of several draws varies less from seed to seed.
/// `stop` is asked before each ranker ([`ModelError::Stopped`] when it says so).
pub fn train_ranker_bagged(
    set: &TrainingSet,
    params: &GbdtParams,
    bag: usize,
    stop: &dyn Fn() -> bool,
) -> Result<Gbdt, ModelError> {
    let bag = bag.max(1);
    let mut out: Option<Gbdt> = None;
    for i in 0..bag {
        if stop() {
            return Err(ModelError::Stopped);
        }
        let p = GbdtParams {
            seed: params.seed + i as u64,
            ..params.clone()
        };
        let mut g = train_ranker(set, &p)?;
        g.scale(1.0 / bag as f64);
        out = Some(match out {
            None => g,
            Some(mut acc) => {
                acc.base_score += g.base_score;
                acc.trees.extend(g.trees);
                acc
            }
        });
    }
    out.ok_or(ModelError::Empty)
}

/// A GBDT classifier over `set` with `params` (a logistic loss) learning whether a record
/// failed (no `ok` latency); its scores are log-odds of failure.
pub fn train_failure_classifier(
    set: &TrainingSet,
    params: &GbdtParams,
) -> Result<Gbdt, ModelError> {
    let failed = set
        .latency
        .iter()
        .map(|l| f64::from(u8::from(l.is_none())))
        .collect();
    fit_gbdt(set, failed, vec![1.0; set.len()], params)
}

fn fit_gbdt(
    set: &TrainingSet,
    labels: Vec<f64>,
    weights: Vec<f64>,
    params: &GbdtParams,
) -> Result<Gbdt, ModelError> {
    if set.is_empty() {
        return Err(ModelError::Empty);
    }
    let d = set.features[0].len();
    let x = Array2::from_shape_fn((set.len(), d), |(i, j)| set.features[i][j]);
    let targets = GroupedTargets {
        labels: Array1::from(labels),
        groups: set.group.clone(),
    };
    let weights = Array1::from_iter(weights.into_iter().map(|w| w as f32));
    let ds = DatasetBase::new(x, targets).with_weights(weights);
    Ok(params.fit(&ds)?)
}

#[cfg(feature = "perpetual")]
fn column_major(features: &[Vec<f32>], d: usize) -> Vec<f64> {
    let n = features.len();
    let mut data = vec![0.0; n * d];
    for (i, row) in features.iter().enumerate() {
        for (j, v) in row.iter().enumerate().take(d) {
            data[j * n + i] = if v.is_finite() { f64::from(*v) } else { 0.0 };
        }
    }
    data
}

#[cfg(feature = "perpetual")]
fn train_perpetual(set: &TrainingSet) -> Result<perpetual::PerpetualBooster, ModelError> {
    use perpetual::objective::Objective;
    let d = set.features[0].len();
    let data = column_major(&set.features, d);
    let m = perpetual::Matrix::new(&data, set.len(), d);
    let weights: Vec<f64> = set.labels.iter().map(|y| sample_weight(*y)).collect();
    let mut booster = perpetual::PerpetualBooster::default()
        .set_objective(Objective::SquaredLoss)
        .set_budget(0.5)
        .set_seed(0);
    booster
        .fit(&m, &set.labels, Some(&weights), None)
        .map_err(|e| ModelError::Train {
            kind: "perpetual",
            detail: e.to_string(),
        })?;
    Ok(booster)
}
