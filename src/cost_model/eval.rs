//! The evaluation of cost models on workloads they never saw: leave one workload out,
//! train on all the others, rank the held-out workload's records.
//!
//! Metrics, per group (one workload on one target) with at least one `ok` record:
//! * top-k (TenSet): the best measured latency of the group / the best latency among the
//!   k candidates the model ranks highest; a failure counts as infinitely slow, so a top-k
//!   of failures scores 0;
//! * pairwise accuracy: over pairs of `ok` records of different latency, the share the
//!   model orders like the latencies (equal scores count one half).
//!
//! A random order (seeded, averaged over [`RANDOM_DRAWS`] draws) is reported beside.

use super::dataset::TrainingSet;
use super::model::{Model, ModelError, ModelKind};
use crate::database::TargetKey;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

/// Random orders averaged for the random baseline.
pub const RANDOM_DRAWS: usize = 8;

/// The name of the random baseline in reports.
pub const RANDOM: &str = "random";

/// The three figures of one ranking.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize)]
pub struct Metrics {
    pub top1: f64,
    pub top5: f64,
    pub pairwise: f64,
}

impl Metrics {
    /// The figures of ranking by `scores` (higher first) candidates of `latency` (`None`:
    /// failed). `None` when no candidate is `ok`.
    pub fn of(scores: &[f64], latency: &[Option<f64>]) -> Option<Metrics> {
        let best = latency.iter().flatten().copied().reduce(f64::min)?;
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
        let top = |k: usize| {
            order
                .iter()
                .take(k)
                .filter_map(|i| latency[*i])
                .reduce(f64::min)
                .map_or(0.0, |l| best / l)
        };
        Some(Metrics {
            top1: top(1),
            top5: top(5),
            pairwise: pairwise_accuracy(scores, latency),
        })
    }

    fn mean(ms: &[Metrics]) -> Metrics {
        let n = ms.len().max(1) as f64;
        Metrics {
            top1: ms.iter().map(|m| m.top1).sum::<f64>() / n,
            top5: ms.iter().map(|m| m.top5).sum::<f64>() / n,
            pairwise: ms.iter().map(|m| m.pairwise).sum::<f64>() / n,
        }
    }
}

/// The share of pairs of `ok` records with different latencies that `scores` orders
/// right; 1 when there is no such pair.
pub fn pairwise_accuracy(scores: &[f64], latency: &[Option<f64>]) -> f64 {
    let ok: Vec<(f64, f64)> = latency
        .iter()
        .zip(scores)
        .filter_map(|(l, s)| l.map(|l| (l, *s)))
        .collect();
    let (mut right, mut pairs) = (0.0, 0u64);
    for (i, (li, si)) in ok.iter().enumerate() {
        for (lj, sj) in &ok[i + 1..] {
            if li == lj {
                continue;
            }
            pairs += 1;
            // The faster one should score higher.
            let agree = (li < lj) == (si > sj);
            right += if si == sj {
                0.5
            } else if agree {
                1.0
            } else {
                0.0
            };
        }
    }
    if pairs == 0 {
        1.0
    } else {
        right / pairs as f64
    }
}

/// The evaluation of one group.
#[derive(Clone, Debug, Serialize)]
pub struct GroupEval {
    pub workload: String,
    pub target: String,
    /// Records ranked (failures included).
    pub records: usize,
    /// Of which `ok`.
    pub ok: usize,
    /// The figures of each model kind and of the random order, by name.
    pub metrics: BTreeMap<String, Metrics>,
}

/// What [`leave_one_workload_out`] found.
#[derive(Clone, Debug, Serialize)]
pub struct EvalReport {
    /// The model kinds evaluated, the first one the main one.
    pub kinds: Vec<String>,
    pub groups: Vec<GroupEval>,
    /// The mean over groups, by name.
    pub mean: BTreeMap<String, Metrics>,
    /// Seconds spent training each kind, summed over the folds.
    pub train_secs: BTreeMap<String, f64>,
}

/// Leave-one-workload-out over `set` for every kind of `kinds`: for each workload, each
/// kind trains on the other workloads and ranks this workload's records, group by group.
/// A workload that is the only one cannot be held out (nothing to train on) and is left
/// out of the report. `seed` fixes the random baseline.
pub fn leave_one_workload_out(
    set: &TrainingSet,
    kinds: &[ModelKind],
    seed: u64,
) -> Result<EvalReport, ModelError> {
    let names: Vec<String> = kinds.iter().map(|k| k.name().to_string()).collect();
    let mut train_secs: BTreeMap<String, f64> = BTreeMap::new();
    let mut report = leave_one_workload_out_with(set, &names, seed, |train, test| {
        let mut scores = Vec::new();
        for kind in kinds {
            let start = Instant::now();
            let model = Model::train_kind(train, *kind)?;
            *train_secs.entry(kind.name().to_string()).or_default() +=
                start.elapsed().as_secs_f64();
            scores.push(model.predict(&test.features));
        }
        Ok(scores)
    })?;
    report.train_secs = train_secs;
    Ok(report)
}

/// Leave-one-workload-out with any rankers: for each workload, `score(train, test)`
/// returns one score vector over `test` per name of `names` (in that order), `train`
/// holding the other workloads' samples. Used by [`leave_one_workload_out`] and by
/// parameter sweeps that train once per fold and score several ways.
pub fn leave_one_workload_out_with<F>(
    set: &TrainingSet,
    names: &[String],
    seed: u64,
    mut score: F,
) -> Result<EvalReport, ModelError>
where
    F: FnMut(&TrainingSet, &TrainingSet) -> Result<Vec<Vec<f64>>, ModelError>,
{
    let mut groups = Vec::new();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for w in set.workloads() {
        let (held, rest): (Vec<usize>, Vec<usize>) =
            (0..set.len()).partition(|i| set.workload_of(*i) == w);
        if rest.is_empty() {
            continue;
        }
        let train = set.subset(&rest);
        let test = set.subset(&held);
        let scores: Vec<(String, Vec<f64>)> =
            names.iter().cloned().zip(score(&train, &test)?).collect();
        for (g, group) in test.groups.iter().enumerate() {
            let members: Vec<usize> = (0..test.len())
                .filter(|i| test.group[*i] as usize == g)
                .collect();
            let latency: Vec<Option<f64>> = members.iter().map(|i| test.latency[*i]).collect();
            let mut metrics = BTreeMap::new();
            for (name, s) in &scores {
                let s: Vec<f64> = members.iter().map(|i| s[*i]).collect();
                if let Some(m) = Metrics::of(&s, &latency) {
                    metrics.insert(name.clone(), m);
                }
            }
            let draws: Vec<Metrics> = (0..RANDOM_DRAWS)
                .filter_map(|_| {
                    let s: Vec<f64> = members.iter().map(|_| rng.gen::<f64>()).collect();
                    Metrics::of(&s, &latency)
                })
                .collect();
            if draws.is_empty() {
                continue;
            }
            metrics.insert(RANDOM.to_string(), Metrics::mean(&draws));
            groups.push(GroupEval {
                workload: w.clone(),
                target: target_name(&group.target),
                records: members.len(),
                ok: latency.iter().flatten().count(),
                metrics,
            });
        }
    }
    let mut mean = BTreeMap::new();
    for name in names.iter().cloned().chain([RANDOM.to_string()]) {
        let ms: Vec<Metrics> = groups
            .iter()
            .filter_map(|g| g.metrics.get(&name).copied())
            .collect();
        mean.insert(name, Metrics::mean(&ms));
    }
    Ok(EvalReport {
        kinds: names.to_vec(),
        groups,
        mean,
        train_secs: BTreeMap::new(),
    })
}

/// Which workloads an evaluation covers: settings (features, parameters) are chosen on
/// the development half and the full table is reported once with the chosen setting.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Subset {
    /// Every workload.
    All,
    /// The first half of the workload keys in sorted order (the larger half when odd).
    Dev,
    /// The other half.
    Test,
}

impl Subset {
    /// The subset named `s` (`all`, `dev`, `test`).
    pub fn parse(s: &str) -> Option<Subset> {
        match s {
            "all" => Some(Subset::All),
            "dev" => Some(Subset::Dev),
            "test" => Some(Subset::Test),
            _ => None,
        }
    }

    /// The samples of `set` whose workload is in this subset.
    pub fn of(self, set: &TrainingSet) -> TrainingSet {
        let workloads = set.workloads();
        let dev = workloads.len().div_ceil(2);
        let keep: Vec<&String> = match self {
            Subset::All => return set.clone(),
            Subset::Dev => workloads[..dev].iter().collect(),
            Subset::Test => workloads[dev..].iter().collect(),
        };
        let indices: Vec<usize> = (0..set.len())
            .filter(|i| keep.iter().any(|w| *w == set.workload_of(*i)))
            .collect();
        set.subset(&indices)
    }
}

fn target_name(t: &TargetKey) -> String {
    format!("{} {} ({})", t.kind.name(), t.arch, t.device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_counts_failures_as_infinitely_slow() {
        // Latencies 1 (best), 2, failed; the model puts the failure first, then 2, then 1.
        let latency = [Some(1.0), Some(2.0), None];
        let scores = [0.1, 0.5, 0.9];
        let m = Metrics::of(&scores, &latency).unwrap();
        assert_eq!(m.top1, 0.0);
        assert_eq!(m.top5, 1.0);
        assert_eq!(m.pairwise, 0.0);
        let perfect = Metrics::of(&[0.9, 0.5, 0.1], &latency).unwrap();
        assert_eq!((perfect.top1, perfect.pairwise), (1.0, 1.0));
        assert!(Metrics::of(&[1.0], &[None]).is_none());
    }

    #[test]
    fn subsets_split_the_sorted_workloads_in_halves() {
        use super::super::dataset::Group;
        use crate::database::TargetKind;
        let target = TargetKey {
            kind: TargetKind::Cuda,
            arch: "sm_90a".into(),
            device: "d".into(),
            toolchain: "t".into(),
        };
        let keys = ["c", "a", "e", "b", "d"];
        let set = TrainingSet {
            features: vec![vec![0.0]; 5],
            labels: vec![1.0; 5],
            latency: vec![Some(1.0); 5],
            group: (0..5).collect(),
            record_ids: (0..5).collect(),
            groups: keys
                .iter()
                .map(|k| Group {
                    workload_key: k.to_string(),
                    target: target.clone(),
                })
                .collect(),
        };
        assert_eq!(Subset::Dev.of(&set).workloads(), ["a", "b", "c"]);
        assert_eq!(Subset::Test.of(&set).workloads(), ["d", "e"]);
        assert_eq!(Subset::All.of(&set).len(), 5);
        assert_eq!(Subset::parse("dev"), Some(Subset::Dev));
    }

    #[test]
    fn pairwise_skips_equal_latencies_and_halves_ties() {
        let latency = [Some(1.0), Some(1.0), Some(2.0)];
        // Pairs (0,2) and (1,2): the first right, the second a score tie.
        assert_eq!(pairwise_accuracy(&[1.0, 0.0, 0.0], &latency), 0.75);
    }
}
