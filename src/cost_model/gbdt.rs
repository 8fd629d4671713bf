//! A histogram gradient-boosted decision tree ensemble, written against linfa's traits:
//! [`GbdtParams`] implements `Fit` over a linfa `Dataset` of `f32` features with
//! [`GroupedTargets`], the fitted [`Gbdt`] implements `PredictInplace`.
//!
//! 1. Every feature is cut into at most `max_bins` bins at quantiles of its training
//!    values (every distinct value gets its own bin when there are few).
//! 2. Each round computes the gradient and hessian of the loss at the current scores and
//!    grows one tree depth-first to `max_depth`: a node's split is the (feature, bin) of
//!    largest second-order gain over its gradient histogram; a child's histogram is built
//!    for the smaller child only, the larger one's is the parent's minus it.
//! 3. Leaves hold `-G / (H + lambda)` scaled by the learning rate.
//!
//! Three losses: squared error on the label with the dataset's sample weights; a
//! pairwise logistic (RankNet) loss over pairs of one group, each sample paired with a
//! few random partners of another label per round, each pair weighted by the difference
//! of their labels (so pairs involving fast programs count most, as LambdaRank weighs
//! them); and the binary logistic loss (labels 0 or 1, the scores log-odds of label 1,
//! with the sample weights), the failure classifier's. No IO; training parallelizes over
//! features with rayon.

use linfa::dataset::DatasetBase;
use linfa::traits::{Fit, PredictInplace};
use ndarray::{Array1, ArrayBase, Data, Ix2};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a GBDT cannot be trained.
#[derive(Debug, Error)]
pub enum GbdtError {
    /// The dataset has no samples.
    #[error("no training samples")]
    Empty,
    /// Labels, groups or weights do not match the number of samples.
    #[error("{what} has {found} entries for {samples} samples")]
    Shape {
        what: &'static str,
        found: usize,
        samples: usize,
    },
    /// A parameter is out of range.
    #[error("invalid parameter: {0}")]
    Param(String),
    /// linfa refused the dataset.
    #[error(transparent)]
    Linfa(#[from] linfa::error::Error),
}

/// The targets of a ranking dataset: a label per sample and the group it is ranked in.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupedTargets {
    /// What the model learns (normalized throughput).
    pub labels: Array1<f64>,
    /// The group of each sample; only samples of one group are compared.
    pub groups: Vec<u32>,
}

/// What the trees minimize.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Loss {
    /// Weighted squared error on the label.
    Squared,
    /// Pairwise logistic loss within groups: which pairs are drawn and how each weighs
    /// ([`PairLoss`]).
    Pairwise(PairLoss),
    /// Binary cross-entropy on labels in `{0, 1}` (a label above 0.5 counts as 1); the
    /// scores are log-odds of label 1 ([`sigmoid`] turns them into probabilities).
    Logistic,
}

/// `1 / (1 + e^-x)`: a logistic model's log-odds as a probability.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Training parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GbdtParams {
    pub trees: usize,
    pub learning_rate: f64,
    pub max_depth: usize,
    pub min_samples_leaf: usize,
    /// L2 regularization of leaf values.
    pub lambda: f64,
    /// At most 256.
    pub max_bins: usize,
    pub loss: Loss,
    pub seed: u64,
}

impl GbdtParams {
    /// The default parameters (squared loss), usable in constants.
    pub const DEFAULT: GbdtParams = GbdtParams {
        trees: 200,
        learning_rate: 0.1,
        max_depth: 6,
        min_samples_leaf: 16,
        lambda: 1.0,
        max_bins: 64,
        loss: Loss::Squared,
        seed: 0,
    };
}

impl Default for GbdtParams {
    fn default() -> Self {
        GbdtParams::DEFAULT
    }
}

/// A node of a tree: samples with `x[feature] <= threshold` go left.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Node {
    Split {
        feature: u32,
        threshold: f32,
        left: u32,
        right: u32,
    },
    Leaf(f64),
}

/// One tree; node 0 is the root.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    pub nodes: Vec<Node>,
}

impl Tree {
    fn predict(&self, x: &[f32]) -> f64 {
        let mut i = 0usize;
        loop {
            match &self.nodes[i] {
                Node::Leaf(v) => return *v,
                Node::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    let v = clean(x.get(*feature as usize).copied().unwrap_or(0.0));
                    i = if v <= *threshold { *left } else { *right } as usize;
                }
            }
        }
    }
}

/// A trained ensemble.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gbdt {
    /// The number of features it was trained on.
    pub features: usize,
    pub base_score: f64,
    pub trees: Vec<Tree>,
}

impl Gbdt {
    /// The score of one feature vector.
    pub fn predict_one(&self, x: &[f32]) -> f64 {
        self.base_score + self.trees.iter().map(|t| t.predict(x)).sum::<f64>()
    }

    /// Multiplies every score by `k` (the base score and every leaf).
    pub fn scale(&mut self, k: f64) {
        self.base_score *= k;
        for t in &mut self.trees {
            for n in &mut t.nodes {
                if let Node::Leaf(v) = n {
                    *v *= k;
                }
            }
        }
    }

    /// Whether every node index points inside its tree and every split feature is
    /// one of `features` (a deserialized model is checked before use).
    pub fn is_well_formed(&self) -> bool {
        self.trees.iter().all(|t| {
            !t.nodes.is_empty()
                && t.nodes.iter().enumerate().all(|(i, n)| match n {
                    Node::Leaf(v) => v.is_finite(),
                    Node::Split {
                        feature,
                        left,
                        right,
                        ..
                    } => {
                        (*feature as usize) < self.features
                            && (*left as usize) > i
                            && (*right as usize) > i
                            && (*left as usize) < t.nodes.len()
                            && (*right as usize) < t.nodes.len()
                    }
                })
        }) && self.base_score.is_finite()
    }
}

/// Non-finite feature values are read as 0, in training and prediction alike.
fn clean(v: f32) -> f32 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

impl<D: Data<Elem = f32> + Sync> Fit<ArrayBase<D, Ix2>, GroupedTargets, GbdtError> for GbdtParams {
    type Object = Gbdt;

    fn fit(&self, ds: &DatasetBase<ArrayBase<D, Ix2>, GroupedTargets>) -> Result<Gbdt, GbdtError> {
        let x = &ds.records;
        let t = &ds.targets;
        let n = x.nrows();
        if n == 0 {
            return Err(GbdtError::Empty);
        }
        check_len("labels", t.labels.len(), n)?;
        check_len("groups", t.groups.len(), n)?;
        let weights: Vec<f64> = match ds.weights() {
            Some(w) => {
                check_len("weights", w.len(), n)?;
                w.iter().map(|w| f64::from(*w)).collect()
            }
            None => vec![1.0; n],
        };
        if !(2..=256).contains(&self.max_bins) || self.max_depth == 0 {
            return Err(GbdtError::Param(format!(
                "max_bins {} (2..=256), max_depth {} (>= 1)",
                self.max_bins, self.max_depth
            )));
        }
        let binned = Binned::new(x, self.max_bins);
        let labels = t.labels.to_vec();
        let base_score = match self.loss {
            Loss::Squared => {
                let wsum: f64 = weights.iter().sum();
                labels.iter().zip(&weights).map(|(y, w)| y * w).sum::<f64>() / wsum.max(1e-12)
            }
            Loss::Pairwise(_) => 0.0,
            Loss::Logistic => {
                let wsum: f64 = weights.iter().sum();
                let pos: f64 = labels
                    .iter()
                    .zip(&weights)
                    .filter(|(y, _)| **y > 0.5)
                    .map(|(_, w)| w)
                    .sum();
                let p = (pos / wsum.max(1e-12)).clamp(1e-6, 1.0 - 1e-6);
                (p / (1.0 - p)).ln()
            }
        };
        let groups = group_members(&t.groups);
        let tops = match self.loss {
            Loss::Pairwise(p) if p.top > 0 && p.top_pairs > 0 => {
                top_members(&labels, &groups, p.top)
            }
            _ => Vec::new(),
        };
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut scores = vec![base_score; n];
        let mut trees = Vec::with_capacity(self.trees);
        let all: Vec<u32> = (0..n as u32).collect();
        for _ in 0..self.trees {
            let (g, h) = match self.loss {
                Loss::Squared => squared_gradients(&scores, &labels, &weights),
                Loss::Pairwise(p) => {
                    let pairs = Pairs {
                        labels: &labels,
                        group_of: &t.groups,
                        groups: &groups,
                        tops: &tops,
                    };
                    pairwise_gradients(&scores, &pairs, &p, &mut rng)
                }
                Loss::Logistic => logistic_gradients(&scores, &labels, &weights),
            };
            let grower = Grower {
                binned: &binned,
                g: &g,
                h: &h,
                params: self,
            };
            let tree = grower.grow(all.clone());
            for (i, s) in scores.iter_mut().enumerate() {
                let row = x.row(i);
                *s += match row.as_slice() {
                    Some(r) => tree.predict(r),
                    None => tree.predict(&row.to_vec()),
                };
            }
            trees.push(tree);
        }
        Ok(Gbdt {
            features: x.ncols(),
            base_score,
            trees,
        })
    }
}

impl<D: Data<Elem = f32> + Sync> PredictInplace<ArrayBase<D, Ix2>, Array1<f64>> for Gbdt {
    fn predict_inplace(&self, x: &ArrayBase<D, Ix2>, y: &mut Array1<f64>) {
        let out: Vec<f64> = (0..x.nrows())
            .into_par_iter()
            .map(|i| {
                let row = x.row(i);
                match row.as_slice() {
                    Some(r) => self.predict_one(r),
                    None => self.predict_one(&row.to_vec()),
                }
            })
            .collect();
        *y = Array1::from(out);
    }

    fn default_target(&self, x: &ArrayBase<D, Ix2>) -> Array1<f64> {
        Array1::zeros(x.nrows())
    }
}

fn check_len(what: &'static str, found: usize, samples: usize) -> Result<(), GbdtError> {
    if found == samples {
        Ok(())
    } else {
        Err(GbdtError::Shape {
            what,
            found,
            samples,
        })
    }
}

/// Features cut into bins: `bins[f][i]` is sample `i`'s bin of feature `f`; values
/// `<= thresholds[f][b]` fall in bins `0..=b`.
struct Binned {
    bins: Vec<Vec<u8>>,
    thresholds: Vec<Vec<f32>>,
}

impl Binned {
    fn new<D: Data<Elem = f32> + Sync>(x: &ArrayBase<D, Ix2>, max_bins: usize) -> Binned {
        let (bins, thresholds) = (0..x.ncols())
            .into_par_iter()
            .map(|f| {
                let col: Vec<f32> = x.column(f).iter().map(|v| clean(*v)).collect();
                let th = thresholds(&col, max_bins);
                let b = col
                    .iter()
                    .map(|v| th.partition_point(|t| t < v) as u8)
                    .collect();
                (b, th)
            })
            .unzip();
        Binned { bins, thresholds }
    }
}

/// At most `max_bins - 1` cut points: midpoints between distinct values when there are
/// few, else between values at evenly spaced quantiles.
fn thresholds(col: &[f32], max_bins: usize) -> Vec<f32> {
    let mut v = col.to_vec();
    v.sort_by(f32::total_cmp);
    v.dedup();
    if v.len() <= 1 {
        return Vec::new();
    }
    if v.len() <= max_bins {
        return v.windows(2).map(|w| w[0] + (w[1] - w[0]) / 2.0).collect();
    }
    let mut sorted = col.to_vec();
    sorted.sort_by(f32::total_cmp);
    let mut th: Vec<f32> = (1..max_bins)
        .map(|q| {
            let i = q * sorted.len() / max_bins;
            let (a, b) = (sorted[i.saturating_sub(1)], sorted[i]);
            a + (b - a) / 2.0
        })
        .collect();
    th.dedup();
    th
}

/// The sample indices of each group.
fn group_members(groups: &[u32]) -> Vec<Vec<u32>> {
    let count = groups.iter().map(|g| *g as usize + 1).max().unwrap_or(0);
    let mut out = vec![Vec::new(); count];
    for (i, g) in groups.iter().enumerate() {
        out[*g as usize].push(i as u32);
    }
    out
}

fn squared_gradients(scores: &[f64], labels: &[f64], w: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let g = scores
        .iter()
        .zip(labels)
        .zip(w)
        .map(|((s, y), w)| w * (s - y))
        .collect();
    (g, w.to_vec())
}

/// Binary cross-entropy at log-odds `s`: gradient `w (p - y)`, hessian `w p (1 - p)`.
fn logistic_gradients(scores: &[f64], labels: &[f64], w: &[f64]) -> (Vec<f64>, Vec<f64>) {
    scores
        .iter()
        .zip(labels)
        .zip(w)
        .map(|((s, y), w)| {
            let p = sigmoid(*s);
            let y = if *y > 0.5 { 1.0 } else { 0.0 };
            (w * (p - y), (w * p * (1.0 - p)).max(1e-6))
        })
        .unzip()
}

/// Which pairs the pairwise loss draws and how much each weighs.
///
/// Every sample meets `pairs` random partners of its group; with `top > 0` each of a
/// group's `top` best-labelled samples also meets `top_pairs` partners drawn among those
/// best. A pair (better `i`, worse `j`) weighs `|y_i^stretch - y_j^stretch| * y_i^better`,
/// times `|D(r_i) - D(r_j)|` with LambdaRank's discount `D(r) = 1 / log2(2 + r)` of the
/// current rank `r` within the group (0 first, `D = 0` from rank `lambda_k` on) when
/// `lambda_k > 0`. The weights of one round are then scaled so that they sum to what the
/// plain label gaps `|y_i - y_j|` of the same pairs sum to: the variants move weight
/// between pairs, not the step size the other parameters were tuned for.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairLoss {
    pub pairs: usize,
    pub stretch: f64,
    pub better: f64,
    pub lambda_k: usize,
    pub top: usize,
    pub top_pairs: usize,
}

impl PairLoss {
    /// RankNet weighted by label gaps, 8 random partners per sample.
    pub const DEFAULT: PairLoss = PairLoss {
        pairs: 8,
        stretch: 1.0,
        better: 0.0,
        lambda_k: 0,
        top: 0,
        top_pairs: 0,
    };

    /// The weight of a pair of labels `hi > lo` at current ranks `rank_hi`, `rank_lo`
    /// (only read when `lambda_k > 0`), before the round's scaling.
    pub fn weight(&self, hi: f64, lo: f64, rank_hi: usize, rank_lo: usize) -> f64 {
        let gap = if self.stretch == 1.0 {
            hi - lo
        } else {
            hi.max(0.0).powf(self.stretch) - lo.max(0.0).powf(self.stretch)
        };
        let better = if self.better == 0.0 {
            1.0
        } else {
            hi.max(0.0).powf(self.better)
        };
        let discount = if self.lambda_k == 0 {
            1.0
        } else {
            let d = |r: usize| {
                if r < self.lambda_k {
                    1.0 / (2.0 + r as f64).log2()
                } else {
                    0.0
                }
            };
            (d(rank_hi) - d(rank_lo)).abs()
        };
        gap.abs() * better * discount
    }
}

impl Default for PairLoss {
    fn default() -> Self {
        PairLoss::DEFAULT
    }
}

/// What the pairwise loss draws its pairs from.
struct Pairs<'a> {
    labels: &'a [f64],
    group_of: &'a [u32],
    /// The members of each group.
    groups: &'a [Vec<u32>],
    /// The best-labelled members of each group (empty without top pairs).
    tops: &'a [Vec<u32>],
}

/// The `k` members of each group with the highest labels (ties by index).
fn top_members(labels: &[f64], groups: &[Vec<u32>], k: usize) -> Vec<Vec<u32>> {
    groups
        .iter()
        .map(|m| {
            let mut m = m.clone();
            m.sort_by(|a, b| {
                labels[*b as usize]
                    .total_cmp(&labels[*a as usize])
                    .then(a.cmp(b))
            });
            m.truncate(k);
            m
        })
        .collect()
}

/// The rank of every sample within its group by `scores`, highest first.
fn ranks_in_groups(scores: &[f64], groups: &[Vec<u32>]) -> Vec<usize> {
    let mut rank = vec![0; scores.len()];
    for m in groups {
        let mut m = m.clone();
        m.sort_by(|a, b| {
            scores[*b as usize]
                .total_cmp(&scores[*a as usize])
                .then(a.cmp(b))
        });
        for (r, i) in m.iter().enumerate() {
            rank[*i as usize] = r;
        }
    }
    rank
}

/// RankNet gradients over the pairs [`PairLoss`] draws: the pair (better i, worse j) of
/// weight `w` adds to i's gradient `-w * rho` and to j's `+w * rho`,
/// `rho = 1 / (1 + e^(s_i - s_j))`, and `w * rho * (1 - rho)` to both hessians.
fn pairwise_gradients(
    scores: &[f64],
    pairs: &Pairs,
    loss: &PairLoss,
    rng: &mut ChaCha8Rng,
) -> (Vec<f64>, Vec<f64>) {
    let n = scores.len();
    let labels = pairs.labels;
    let ranks = if loss.lambda_k > 0 {
        ranks_in_groups(scores, pairs.groups)
    } else {
        Vec::new()
    };
    let mut g = vec![0.0; n];
    let mut h = vec![0.0; n];
    let (mut plain, mut weighted) = (0.0, 0.0);
    let mut add = |i: usize, j: usize| {
        let dy = labels[i] - labels[j];
        if dy == 0.0 {
            return;
        }
        let (hi, lo) = if dy > 0.0 { (i, j) } else { (j, i) };
        let rank = |k: usize| ranks.get(k).copied().unwrap_or(0);
        let w = loss.weight(labels[hi], labels[lo], rank(hi), rank(lo));
        plain += dy.abs();
        weighted += w;
        let rho = 1.0 / (1.0 + (scores[hi] - scores[lo]).exp());
        g[hi] -= w * rho;
        g[lo] += w * rho;
        let hess = w * rho * (1.0 - rho);
        h[hi] += hess;
        h[lo] += hess;
    };
    for i in 0..n {
        let members = &pairs.groups[pairs.group_of[i] as usize];
        if members.len() < 2 {
            continue;
        }
        for _ in 0..loss.pairs.max(1) {
            let j = *members.choose(rng).unwrap_or(&(i as u32)) as usize;
            add(i, j);
        }
    }
    for top in pairs.tops {
        if top.len() < 2 {
            continue;
        }
        for &i in top {
            for _ in 0..loss.top_pairs {
                let j = *top.choose(rng).unwrap_or(&i) as usize;
                add(i as usize, j);
            }
        }
    }
    let scale = if weighted > 0.0 {
        plain / weighted
    } else {
        1.0
    };
    for (gi, hi) in g.iter_mut().zip(h.iter_mut()) {
        *gi *= scale;
        // A sample that met no informative pair still needs a positive hessian.
        *hi = (*hi * scale).max(1e-6);
    }
    (g, h)
}

/// Gradient, hessian and count of the samples in one bin.
#[derive(Copy, Clone, Default)]
struct Bin {
    g: f64,
    h: f64,
    n: u32,
}

/// One histogram per feature.
type Histogram = Vec<Vec<Bin>>;

struct Grower<'a> {
    binned: &'a Binned,
    g: &'a [f64],
    h: &'a [f64],
    params: &'a GbdtParams,
}

/// The best split of a node.
struct Split {
    feature: usize,
    bin: usize,
    gain: f64,
}

impl Grower<'_> {
    fn grow(&self, samples: Vec<u32>) -> Tree {
        let hist = self.histogram(&samples);
        let mut nodes = Vec::new();
        self.node(&mut nodes, samples, hist, 0);
        Tree { nodes }
    }

    /// Grows the node of `samples` (with histogram `hist`) and its subtree into `nodes`;
    /// returns its index.
    fn node(&self, nodes: &mut Vec<Node>, samples: Vec<u32>, hist: Histogram, depth: usize) -> u32 {
        let id = nodes.len() as u32;
        let (gs, hs) = sums(&hist);
        let leaf = Node::Leaf(-gs / (hs + self.params.lambda) * self.params.learning_rate);
        nodes.push(leaf);
        if depth >= self.params.max_depth || samples.len() < 2 * self.params.min_samples_leaf {
            return id;
        }
        let Some(split) = self.best_split(&hist, gs, hs) else {
            return id;
        };
        let col = &self.binned.bins[split.feature];
        let (left, right): (Vec<u32>, Vec<u32>) = samples
            .into_iter()
            .partition(|i| col[*i as usize] as usize <= split.bin);
        let (small, large_is_left) = if left.len() <= right.len() {
            (&left, false)
        } else {
            (&right, true)
        };
        let small_hist = self.histogram(small);
        let large_hist = subtract(hist, &small_hist);
        let (lh, rh) = if large_is_left {
            (large_hist, small_hist)
        } else {
            (small_hist, large_hist)
        };
        let l = self.node(nodes, left, lh, depth + 1);
        let r = self.node(nodes, right, rh, depth + 1);
        nodes[id as usize] = Node::Split {
            feature: split.feature as u32,
            threshold: self.binned.thresholds[split.feature][split.bin],
            left: l,
            right: r,
        };
        id
    }

    fn histogram(&self, samples: &[u32]) -> Histogram {
        self.binned
            .bins
            .par_iter()
            .zip(&self.binned.thresholds)
            .map(|(col, th)| {
                let mut hist = vec![Bin::default(); th.len() + 1];
                for &i in samples {
                    let b = &mut hist[col[i as usize] as usize];
                    b.g += self.g[i as usize];
                    b.h += self.h[i as usize];
                    b.n += 1;
                }
                hist
            })
            .collect()
    }

    fn best_split(&self, hist: &Histogram, gs: f64, hs: f64) -> Option<Split> {
        let lambda = self.params.lambda;
        let min = self.params.min_samples_leaf as u32;
        let total: u32 = hist.first().map_or(0, |h| h.iter().map(|b| b.n).sum());
        let parent = gs * gs / (hs + lambda);
        hist.par_iter()
            .enumerate()
            .filter_map(|(f, bins)| {
                let (mut gl, mut hl, mut nl) = (0.0, 0.0, 0u32);
                let mut best: Option<Split> = None;
                for (b, bin) in bins.iter().enumerate().take(bins.len().saturating_sub(1)) {
                    gl += bin.g;
                    hl += bin.h;
                    nl += bin.n;
                    if nl < min || total - nl < min {
                        continue;
                    }
                    let (gr, hr) = (gs - gl, hs - hl);
                    let gain = gl * gl / (hl + lambda) + gr * gr / (hr + lambda) - parent;
                    if gain > 1e-12 && best.as_ref().is_none_or(|s| gain > s.gain) {
                        best = Some(Split {
                            feature: f,
                            bin: b,
                            gain,
                        });
                    }
                }
                best
            })
            .max_by(|a, b| a.gain.total_cmp(&b.gain).then(b.feature.cmp(&a.feature)))
    }
}

fn sums(hist: &Histogram) -> (f64, f64) {
    hist.first().map_or((0.0, 0.0), |bins| {
        bins.iter().fold((0.0, 0.0), |(g, h), b| (g + b.g, h + b.h))
    })
}

fn subtract(mut parent: Histogram, child: &Histogram) -> Histogram {
    for (p, c) in parent.iter_mut().zip(child) {
        for (pb, cb) in p.iter_mut().zip(c) {
            pb.g -= cb.g;
            pb.h -= cb.h;
            pb.n -= cb.n;
        }
    }
    parent
}

#[cfg(test)]
mod tests {
    use super::*;
    use linfa::traits::Predict;
    use ndarray::Array2;
    use rand::Rng;

    /// y = x0 > 0.5 (a step) plus a little of x1: the trees must find the step.
    #[test]
    fn squared_loss_learns_a_step() {
        let n = 400;
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let x = Array2::from_shape_fn((n, 2), |_| rng.gen::<f32>());
        let labels = Array1::from_shape_fn(n, |i| {
            f64::from(u8::from(x[[i, 0]] > 0.5)) + 0.1 * f64::from(x[[i, 1]])
        });
        let ds = DatasetBase::new(
            x.clone(),
            GroupedTargets {
                labels: labels.clone(),
                groups: vec![0; n],
            },
        );
        let params = GbdtParams {
            loss: Loss::Squared,
            trees: 50,
            ..GbdtParams::default()
        };
        let model = params.fit(&ds).unwrap();
        let pred: Array1<f64> = model.predict(&x);
        let mse = (&pred - &labels).mapv(|d| d * d).mean().unwrap();
        assert!(mse < 0.01, "mse {mse}");
        assert!(model.is_well_formed());
    }

    /// Two groups whose labels live on different scales: the pairwise loss ranks within
    /// each group by x0.
    #[test]
    fn pairwise_loss_ranks_within_groups() {
        let n = 300;
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let x = Array2::from_shape_fn((n, 2), |_| rng.gen::<f32>());
        let groups: Vec<u32> = (0..n as u32).map(|i| i % 2).collect();
        let labels = Array1::from_shape_fn(n, |i| {
            f64::from(x[[i, 0]]) * if groups[i] == 0 { 1.0 } else { 0.01 }
        });
        let ds = DatasetBase::new(x.clone(), GroupedTargets { labels, groups });
        let model = GbdtParams {
            trees: 60,
            loss: Loss::Pairwise(PairLoss::DEFAULT),
            ..GbdtParams::default()
        }
        .fit(&ds)
        .unwrap();
        // Scores rise with x0.
        let lo = model.predict_one(&[0.1, 0.5]);
        let hi = model.predict_one(&[0.9, 0.5]);
        assert!(hi > lo, "{hi} <= {lo}");
    }

    /// Label 1 exactly where x0 + x1 > 1 (a diagonal, which axis-aligned trees must
    /// approximate): the classifier separates it, its probabilities are calibrated to the
    /// right side of 1/2 on clear points.
    #[test]
    fn logistic_loss_learns_a_separable_set() {
        let n = 600;
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let x = Array2::from_shape_fn((n, 2), |_| rng.gen::<f32>());
        let labels = Array1::from_shape_fn(n, |i| f64::from(u8::from(x[[i, 0]] + x[[i, 1]] > 1.0)));
        let ds = DatasetBase::new(
            x.clone(),
            GroupedTargets {
                labels: labels.clone(),
                groups: vec![0; n],
            },
        );
        let model = GbdtParams {
            trees: 100,
            loss: Loss::Logistic,
            min_samples_leaf: 4,
            ..GbdtParams::default()
        }
        .fit(&ds)
        .unwrap();
        let wrong = (0..n)
            .filter(|i| {
                let p = sigmoid(model.predict_one(&[x[[*i, 0]], x[[*i, 1]]]));
                (p > 0.5) != (labels[*i] > 0.5)
            })
            .count();
        assert!(wrong * 50 < n, "{wrong} of {n} misclassified");
        assert!(sigmoid(model.predict_one(&[0.95, 0.9])) > 0.9);
        assert!(sigmoid(model.predict_one(&[0.05, 0.1])) < 0.1);
        assert!(model.is_well_formed());
    }

    /// The weights that stretch the top: with `stretch` or `better`, a pair among the
    /// fastest (labels 1 and 0.75) weighs more than a pair of the same label gap among
    /// the slowest (0.375 and 0.125); with the default they weigh the same.
    #[test]
    fn stretched_pair_weights_favour_pairs_among_the_best() {
        let plain = PairLoss::DEFAULT;
        assert_eq!(
            plain.weight(1.0, 0.75, 0, 0),
            plain.weight(0.375, 0.125, 0, 0)
        );
        for loss in [
            PairLoss {
                stretch: 2.0,
                ..PairLoss::DEFAULT
            },
            PairLoss {
                better: 1.0,
                ..PairLoss::DEFAULT
            },
        ] {
            let top = loss.weight(1.0, 0.75, 0, 0);
            let bottom = loss.weight(0.375, 0.125, 0, 0);
            assert!(top > 2.0 * bottom, "{loss:?}: {top} vs {bottom}");
        }
    }

    /// LambdaRank's discount: the same label gap weighs more between the first two
    /// places than between places 50 and 51, and nothing beyond `lambda_k`.
    #[test]
    fn lambda_weights_favour_pairs_ranked_first() {
        let loss = PairLoss {
            lambda_k: 32,
            ..PairLoss::DEFAULT
        };
        let first = loss.weight(0.6, 0.5, 0, 1);
        let deep = loss.weight(0.6, 0.5, 20, 21);
        assert!(first > 10.0 * deep, "{first} vs {deep}");
        assert_eq!(loss.weight(0.6, 0.5, 50, 51), 0.0);
    }

    /// Top pairs: extra pairs among a group's 4 best put more of the round's curvature
    /// (the hessian, which every pair adds to on both sides) on those 4 than one random
    /// partner per sample does.
    #[test]
    fn top_pairs_put_gradient_on_the_best() {
        let n = 64usize;
        let labels: Vec<f64> = (0..n).map(|i| (i + 1) as f64 / n as f64).collect();
        let group_of = vec![0u32; n];
        let groups = group_members(&group_of);
        let scores = vec![0.0; n];
        let best: Vec<usize> = (n - 4..n).collect();
        let share = |loss: PairLoss| {
            let tops = top_members(&labels, &groups, loss.top);
            let pairs = Pairs {
                labels: &labels,
                group_of: &group_of,
                groups: &groups,
                tops: &tops,
            };
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let (_, h) = pairwise_gradients(&scores, &pairs, &loss, &mut rng);
            best.iter().map(|i| h[*i]).sum::<f64>() / h.iter().sum::<f64>()
        };
        let plain = share(PairLoss {
            pairs: 1,
            ..PairLoss::DEFAULT
        });
        let topped = share(PairLoss {
            pairs: 1,
            top: 4,
            top_pairs: 64,
            ..PairLoss::DEFAULT
        });
        assert_eq!(top_members(&labels, &groups, 4)[0], [63, 62, 61, 60]);
        assert!(topped > plain + 0.05, "{topped} vs {plain}");
    }

    #[test]
    fn mismatched_targets_are_refused() {
        let x = Array2::<f32>::zeros((3, 1));
        let ds = DatasetBase::new(
            x,
            GroupedTargets {
                labels: Array1::zeros(2),
                groups: vec![0; 3],
            },
        );
        let err = GbdtParams::default().fit(&ds).unwrap_err();
        assert_eq!(err.to_string(), "labels has 2 entries for 3 samples");
    }
}
