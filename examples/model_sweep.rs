//! The sweep that chooses the cost model's settings: leave-one-workload-out over the
//! *development* half of the workloads only (the first half of the sorted workload keys,
//! `Subset::Dev`), so that the other half stays unseen until the one final table.
//!
//! ```text
//! cargo run --release --example model_sweep -- DB CONFIG...
//! ```
//!
//! DB is a record database (`tessel db import` the shipped files into it; the features are
//! cached there by `tessel model train|eval`). Each CONFIG is `key=value` pairs joined by
//! commas, the ranker's parameters prefixed `r.`, the failure classifier's `f.`:
//! `r.trees`, `r.lr`, `r.depth`, `r.leaf`, `r.lambda`, `r.bins`, `r.seed`, `r.pairs` (0: squared
//! loss), `r.stretch`, `r.better`, `r.lambdak`, `r.top`, `r.toppairs` (the pair
//! weights and top pairs of `PairLoss`), `r.okonly` (1: the ranker sees `ok` records only), the same for `f.` (no
//! `pairs`/`okonly`), `r.bag` (rankers of seeds `r.seed + i` averaged), and `penalties` (slash-separated, one scored column each: a number
//! `c` scores `rank - c * p_fail`, 0 being the ranker alone; `tX` ranks every candidate
//! whose probability of failure is above X after the others, `gbdt-rank-fail`'s rule;
//! `lX` adds X times the log of the probability of success). `subset=test|all` evaluates
//! on another subset (for the final report only). Every fold trains the ranker and the
//! classifier once and scores every penalty.

use std::time::Instant;
use tessel::cost_model::eval::{leave_one_workload_out_with, Subset};
use tessel::cost_model::gbdt::{GbdtParams, Loss, PairLoss};
use tessel::cost_model::model::{
    combined_score, train_failure_classifier, train_ranker_bagged, RankFailConfig,
};
use tessel::database::{Database, TargetKind};

struct Config {
    text: String,
    base: RankFailConfig,
    ok_only: bool,
    bag: usize,
    penalties: Vec<Combine>,
    subset: Subset,
    picks: bool,
}

/// How a column combines the ranker's score with the classifier's log-odds.
#[derive(Copy, Clone)]
enum Combine {
    Linear(f64),
    Threshold(f64),
    Log(f64),
}

impl Combine {
    fn parse(s: &str) -> Combine {
        let num = |t: &str| t.parse::<f64>().expect("a number");
        if let Some(t) = s.strip_prefix('t') {
            Combine::Threshold(num(t))
        } else if let Some(t) = s.strip_prefix('l') {
            Combine::Log(num(t))
        } else {
            Combine::Linear(num(s))
        }
    }
    fn name(self) -> String {
        match self {
            Combine::Linear(p) => format!("p={p}"),
            Combine::Threshold(t) => format!("t={t}"),
            Combine::Log(x) => format!("log={x}"),
        }
    }
    fn needs_fail(self) -> bool {
        !matches!(self, Combine::Linear(p) if p == 0.0)
    }
    fn score(self, rank: f64, fail_logit: f64) -> f64 {
        let p = 1.0 / (1.0 + (-fail_logit).exp());
        match self {
            Combine::Linear(pen) => rank - pen * p,
            Combine::Threshold(t) => combined_score(rank, fail_logit, t),
            Combine::Log(x) => rank + x * (1.0 - p).max(1e-12).ln(),
        }
    }
}

/// The pairwise loss of `p`, or the default one if `p` has another loss.
fn pair_loss(p: &GbdtParams) -> PairLoss {
    match p.loss {
        Loss::Pairwise(l) => l,
        _ => PairLoss::DEFAULT,
    }
}

fn parse(text: &str) -> Config {
    let mut c = Config {
        text: text.to_string(),
        base: RankFailConfig::default(),
        ok_only: false,
        bag: 1,
        penalties: vec![
            Combine::Linear(0.0),
            Combine::Threshold(RankFailConfig::default().threshold),
        ],
        subset: Subset::Dev,
        picks: false,
    };
    for kv in text.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').expect("key=value");
        let num = || v.parse::<f64>().expect("a number");
        let (which, key) = match k.split_once('.') {
            Some(("r", key)) => (Some(&mut c.base.rank), key),
            Some(("f", key)) => (Some(&mut c.base.fail), key),
            _ => (None, k),
        };
        match (which, key) {
            (Some(p), "trees") => p.trees = num() as usize,
            (Some(p), "lr") => p.learning_rate = num(),
            (Some(p), "depth") => p.max_depth = num() as usize,
            (Some(p), "leaf") => p.min_samples_leaf = num() as usize,
            (Some(p), "lambda") => p.lambda = num(),
            (Some(p), "bins") => p.max_bins = num() as usize,
            (Some(p), "seed") => p.seed = num() as u64,
            (Some(p), "pairs") => {
                p.loss = match num() as usize {
                    0 => Loss::Squared,
                    n => Loss::Pairwise(PairLoss {
                        pairs: n,
                        ..pair_loss(p)
                    }),
                }
            }
            (Some(p), "stretch") => {
                p.loss = Loss::Pairwise(PairLoss {
                    stretch: num(),
                    ..pair_loss(p)
                })
            }
            (Some(p), "better") => {
                p.loss = Loss::Pairwise(PairLoss {
                    better: num(),
                    ..pair_loss(p)
                })
            }
            (Some(p), "lambdak") => {
                p.loss = Loss::Pairwise(PairLoss {
                    lambda_k: num() as usize,
                    ..pair_loss(p)
                })
            }
            (Some(p), "top") => {
                p.loss = Loss::Pairwise(PairLoss {
                    top: num() as usize,
                    ..pair_loss(p)
                })
            }
            (Some(p), "toppairs") => {
                p.loss = Loss::Pairwise(PairLoss {
                    top_pairs: num() as usize,
                    ..pair_loss(p)
                })
            }
            (Some(_), "okonly") => c.ok_only = num() != 0.0,
            (Some(_), "bag") => c.bag = num() as usize,
            (None, "penalties") => c.penalties = v.split('/').map(Combine::parse).collect(),
            (None, "picks") => c.picks = num() != 0.0,
            (None, "subset") => c.subset = Subset::parse(v).expect("all, dev or test"),
            _ => panic!("unknown key {k}"),
        }
    }
    c
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (db, configs) = args.split_first().expect("DB CONFIG...");
    let mut db = Database::open(std::path::Path::new(db)).expect("database");
    let arch = tessel::model_cmd::resolve_arch(&db, TargetKind::Cuda, None).expect("arch");
    let f =
        tessel::model_cmd::featurize_records(&mut db, TargetKind::Cuda, &arch).expect("features");
    let configs: Vec<Config> = if configs.is_empty() {
        vec![parse("")]
    } else {
        configs.iter().map(|c| parse(c)).collect()
    };
    for c in configs {
        let set = c.subset.of(&f.set);
        let names: Vec<String> = c.penalties.iter().map(|p| p.name()).collect();
        let needs_fail = c.penalties.iter().any(|p| p.needs_fail());
        let start = Instant::now();
        let report = leave_one_workload_out_with(&set, &names, 0, |train, test| {
            let rank_set = if c.ok_only {
                let ok: Vec<usize> = (0..train.len())
                    .filter(|i| train.latency[*i].is_some())
                    .collect();
                train.subset(&ok)
            } else {
                train.clone()
            };
            let rank = train_ranker_bagged(&rank_set, &c.base.rank, c.bag, &|| false)?;
            let fail = if needs_fail {
                Some(train_failure_classifier(train, &c.base.fail)?)
            } else {
                None
            };
            let r: Vec<f64> = test.features.iter().map(|x| rank.predict_one(x)).collect();
            if c.picks {
                print_picks(test, &r);
            }
            let p: Vec<f64> = test
                .features
                .iter()
                .map(|x| fail.as_ref().map_or(0.0, |g| g.predict_one(x)))
                .collect();
            Ok(c.penalties
                .iter()
                .map(|how| r.iter().zip(&p).map(|(r, p)| how.score(*r, *p)).collect())
                .collect())
        })
        .expect("eval");
        let workloads = set.workloads().len();
        if std::env::var_os("SWEEP_ROWS").is_some() {
            for g in &report.groups {
                let cells: Vec<String> = names
                    .iter()
                    .map(|n| format!("{:.2}/{:.2}", g.metrics[n].top1, g.metrics[n].top5))
                    .collect();
                println!(
                    "  {} {:<24} ok {:>5}/{:<5} {}",
                    &g.workload[..8],
                    &g.target[..g.target.len().min(24)],
                    g.ok,
                    g.records,
                    cells.join(" ")
                );
            }
        }
        for name in &names {
            let m = report.mean[name];
            println!(
                "{:<60} {:<8} top1 {:.3} top5 {:.3} pair {:.3}  ({} workloads, {} rows, {:.0} s)",
                c.text,
                name,
                m.top1,
                m.top5,
                m.pairwise,
                workloads,
                report.groups.len(),
                start.elapsed().as_secs_f64()
            );
        }
    }
}

/// For each group of `test`: the labels of the model's five first picks, and the
/// features in which its first pick differs most from the best record.
fn print_picks(test: &tessel::cost_model::dataset::TrainingSet, scores: &[f64]) {
    use tessel::cost_model::FEATURE_NAMES;
    for (g, group) in test.groups.iter().enumerate() {
        let mut members: Vec<usize> = (0..test.len())
            .filter(|i| test.group[*i] as usize == g)
            .collect();
        members.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
        let Some(best) = members
            .iter()
            .copied()
            .max_by(|a, b| test.labels[*a].total_cmp(&test.labels[*b]))
        else {
            continue;
        };
        let best_rank = members.iter().position(|i| *i == best).unwrap_or(0);
        let labels: Vec<String> = members[..members.len().min(5)]
            .iter()
            .map(|i| format!("{:.2}", test.labels[*i]))
            .collect();
        println!(
            "PICK {} {} picks {} (records {:?}); best record {} ranked {}",
            &group.workload_key[..8],
            group.target.device,
            labels.join(" "),
            &members[..members.len().min(3)]
                .iter()
                .map(|i| test.record_ids[*i])
                .collect::<Vec<_>>(),
            test.record_ids[best],
            best_rank
        );
        let pick = members[0];
        let (a, b) = (&test.features[pick], &test.features[best]);
        let mut diffs: Vec<(f64, usize)> = a
            .iter()
            .zip(b)
            .enumerate()
            .filter(|(_, (x, y))| x != y)
            .map(|(j, (x, y))| {
                let (x, y) = (f64::from(*x), f64::from(*y));
                ((x - y).abs() / x.abs().max(y.abs()).max(1e-9), j)
            })
            .collect();
        diffs.sort_by(|p, q| q.0.total_cmp(&p.0));
        for (_, j) in diffs.iter().take(24) {
            println!(
                "    {:<40} pick {:>12.4} best {:>12.4}",
                FEATURE_NAMES[*j], a[*j], b[*j]
            );
        }
    }
}
