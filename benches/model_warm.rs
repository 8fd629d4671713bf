//! How the cost model ranks a workload nobody tuned once it has measured the first K of
//! that workload's candidates, as a tuning run has after its first rounds. For each named
//! workload of the database, its CUDA records in measurement order (record id) are split
//! into the first K (what the run has measured) and the rest (what it proposes next);
//! rankers of the rest:
//!
//! * `cold`: the model trained on every other workload's records (the run's start);
//! * `cold-1/8`: trained on every 8th record of the other workloads alone (what a model
//!   stored after a focused retraining knows of workloads it was not focused on);
//! * `warm`: the same trained also on the first K (a retraining during the run: the
//!   workload's own records are a small share of the pairs);
//! * `warm-1/8`: trained on every 8th record of the other workloads and the first K (a
//!   retraining an eighth the size, so the workload's pairs weigh eight times as much);
//! * `local`: a model trained on the first K alone;
//! * `cold+local`: the sum of the two rankings' standardized scores.
//!
//! Top-1, top-5 (the best latency of the rest over the best among the k ranked highest)
//! and pairwise accuracy on the rest, with a random order beside.
//!
//! ```text
//! cargo bench --bench model_warm -- DB K WORKLOAD...
//! ```
//!
//! The labels of the first K are relative to the best among them (what the run knows).
//! Nothing is measured; DB needs CUDA records of the named workloads and of others.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;
use tessel::cost_model::dataset::TrainingSet;
use tessel::cost_model::eval::Metrics;
use tessel::cost_model::{Model, ModelKind};
use tessel::database::{Database, TargetKind};
use tessel::model_cmd::featurize_records;

/// Rest records needed for a workload to be reported.
const MIN_REST: usize = 32;
/// `warm-1/8`: every 8th record of the other workloads with the first K.
const SUBSAMPLE: usize = 8;

fn standardized(xs: &[f64]) -> Vec<f64> {
    let n = xs.len().max(1) as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    xs.iter().map(|x| (x - mean) / sd.max(1e-12)).collect()
}

/// The samples `first` with labels relative to the best among them.
fn relabeled(set: &TrainingSet, first: &[usize]) -> TrainingSet {
    let mut s = set.subset(first);
    let best = s
        .latency
        .iter()
        .flatten()
        .copied()
        .fold(f64::INFINITY, f64::min);
    for (label, latency) in s.labels.iter_mut().zip(&s.latency) {
        *label = latency.map_or(0.0, |l| (best / l).clamp(0.0, 1.0));
    }
    s
}

fn row(name: &str, m: Option<Metrics>) {
    match m {
        Some(m) => println!(
            "  {name:<11} top-1 {:.3}  top-5 {:.3}  pairwise {:.3}",
            m.top1, m.top5, m.pairwise
        ),
        None => println!("  {name:<11} (no ok record in the rest)"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.len() < 3 {
        eprintln!("usage: model_warm DB K WORKLOAD...");
        return;
    }
    let mut db = Database::open(&args[0]).expect("database");
    let k: usize = args[1].parse().expect("K");
    let start = Instant::now();
    let all = featurize_records(&mut db, TargetKind::Cuda, "sm_90a").expect("records");
    let set = all.set;
    println!(
        "{} samples featurized in {:.1} s",
        set.len(),
        start.elapsed().as_secs_f64()
    );
    let kind = ModelKind::DEFAULT;
    let mut sums: Vec<(String, Vec<Metrics>)> = [
        "cold",
        "cold-1/8",
        "warm",
        "warm-1/8",
        "local",
        "cold+local",
        "random",
    ]
    .iter()
    .map(|n| (n.to_string(), Vec::new()))
    .collect();
    for spec in &args[2..] {
        let w = tessel::workload::from_cli(spec, |_| Err(std::io::Error::other("no files")))
            .expect("workload");
        let key = w.key();
        let mut held: Vec<usize> = (0..set.len())
            .filter(|i| set.workload_of(*i) == key)
            .collect();
        held.sort_by_key(|i| set.record_ids[*i]);
        if held.len() < k + MIN_REST {
            println!("{spec}: {} records, fewer than K + {MIN_REST}", held.len());
            continue;
        }
        let (first, rest) = held.split_at(k);
        let others: Vec<usize> = (0..set.len())
            .filter(|i| set.workload_of(*i) != key)
            .collect();
        let test = set.subset(rest);
        let adapt = relabeled(&set, first);
        let mut warm_set = set.subset(&others);
        warm_set.extend(adapt.clone());
        // Every SUBSAMPLE-th other record, then the first K.
        let sampled: Vec<usize> = others.iter().copied().step_by(SUBSAMPLE).collect();
        let sampled_others = set.subset(&sampled);
        let mut small_set = sampled_others.clone();
        small_set.extend(adapt.clone());
        let t = Instant::now();
        let cold = Model::train_kind(&set.subset(&others), kind).expect("cold model");
        let cold_small = Model::train_kind(&sampled_others, kind).expect("small cold model");
        let warm = Model::train_kind(&warm_set, kind).expect("warm model");
        let t_small = Instant::now();
        let small = Model::train_kind(&small_set, kind).expect("small warm model");
        let small_secs = t_small.elapsed().as_secs_f64();
        let t_local = Instant::now();
        let local = Model::train_kind(&adapt, kind).expect("local model");
        let local_secs = t_local.elapsed().as_secs_f64();
        let cold_s = cold.predict(&test.features);
        let local_s = local.predict(&test.features);
        let both: Vec<f64> = standardized(&cold_s)
            .iter()
            .zip(standardized(&local_s))
            .map(|(a, b)| a + b)
            .collect();
        let scores = [
            cold_s,
            cold_small.predict(&test.features),
            warm.predict(&test.features),
            small.predict(&test.features),
            local_s,
            both,
        ];
        let ok = test.latency.iter().flatten().count();
        println!(
            "{spec}: first {k}, rest {} ({ok} ok); trained in {:.1} s (warm-1/{SUBSAMPLE} {small_secs:.2} s, local {local_secs:.2} s)",
            rest.len(),
            t.elapsed().as_secs_f64()
        );
        for ((name, ms), s) in sums.iter_mut().zip(&scores) {
            let m = Metrics::of(s, &test.latency);
            row(name, m);
            ms.extend(m);
        }
        // A random order: the mean of 16 seeded draws.
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let draws: Vec<Metrics> = (0..16)
            .filter_map(|_| {
                let s: Vec<f64> = (0..test.len()).map(|_| rng.gen::<f64>()).collect();
                Metrics::of(&s, &test.latency)
            })
            .collect();
        let n = draws.len().max(1) as f64;
        let random = Metrics {
            top1: draws.iter().map(|m| m.top1).sum::<f64>() / n,
            top5: draws.iter().map(|m| m.top5).sum::<f64>() / n,
            pairwise: draws.iter().map(|m| m.pairwise).sum::<f64>() / n,
        };
        row("random", Some(random));
        sums[6].1.push(random);
    }
    println!("mean over workloads:");
    for (name, ms) in &sums {
        let n = ms.len().max(1) as f64;
        row(
            name,
            (!ms.is_empty()).then(|| Metrics {
                top1: ms.iter().map(|m| m.top1).sum::<f64>() / n,
                top5: ms.iter().map(|m| m.top5).sum::<f64>() / n,
                pairwise: ms.iter().map(|m| m.pairwise).sum::<f64>() / n,
            }),
        );
    }
}
