//! What a shipped record set teaches the CUDA cost model about workloads it never saw:
//! for each workload of the set (its `*.best.jsonl` names them), held out, a model trained
//! (a) on the records of every workload not in the set and (b) on those of every workload
//! but the held-out one ranks the held-out workload's records of the set's device (none of
//! its records, of any device, trained on). Prints top-1, top-5 and pairwise accuracy of
//! each, and the branch (a conv's GEMM view or its loops, with or without operands copied
//! by kernels of their own: `+tk`) of the 20 records each ranks first beside the 20
//! fastest; then each arm's means over the set. No device is needed.
//!
//! ```text
//! cargo bench --bench record_set_rank -- DB SET.best.jsonl
//! ```
//!
//! DB holds the set's records and others (`benches/shipped_db.sh` builds one from every
//! shipped set).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use tessel::cost_model::dataset::TrainingSet;
use tessel::cost_model::eval::Metrics;
use tessel::cost_model::{Model, ModelKind};
use tessel::database::{Database, TargetKind};

/// How many of the first-ranked and of the fastest records are sorted into branches.
const TOP: usize = 20;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let [db_path, set_file] = &args[..] else {
        eprintln!("usage: cargo bench --bench record_set_rank -- DB SET.best.jsonl");
        std::process::exit(2);
    };
    let lines: Vec<serde_json::Value> =
        std::io::BufReader::new(std::fs::File::open(set_file).expect("the set's best records"))
            .lines()
            .map(|l| serde_json::from_str(&l.unwrap()).expect("a JSON record"))
            .collect();
    let held: Vec<String> = lines
        .iter()
        .map(|v| v["workload_key"].as_str().unwrap().to_string())
        .collect();
    // The device the set was measured on.
    let device = lines[0]["target"]["device"].as_str().unwrap().to_string();
    let mut db = Database::open(db_path).expect("the database");
    let arch = tessel::model_cmd::resolve_arch(&db, TargetKind::Cuda, None).unwrap();
    let (records, _) = db.records_of_arch(TargetKind::Cuda, &arch).unwrap();
    let branch: HashMap<i64, String> = records
        .iter()
        .map(|r| {
            let t = tessel::schedule::text::print(&r.trace);
            let view = if t.contains("im2col(") {
                "view"
            } else {
                "loops"
            };
            let tk = if t.contains("scope=\"global\")") {
                "+tk"
            } else {
                ""
            };
            (r.id, format!("{view}{tk}"))
        })
        .collect();
    let set = tessel::model_cmd::featurize_records(&mut db, TargetKind::Cuda, &arch)
        .unwrap()
        .set;
    let in_set: HashSet<&String> = held.iter().collect();
    let without_set: Vec<usize> = (0..set.len())
        .filter(|i| !in_set.contains(&set.workload_of(*i).to_string()))
        .collect();
    let shipped_only = train(&set.subset(&without_set));
    println!("trained without the set on {} records", without_set.len());
    // Per arm, the sums of top-1, top-5 and pairwise over the held-out workloads.
    let mut sums = [[0.0f64; 3]; 2];
    let mut ranked = 0;
    for key in &held {
        // The held-out workload's records of the set's device, ranked; none of its
        // records (of any device) trained on.
        let rest: Vec<usize> = (0..set.len())
            .filter(|i| set.workload_of(*i) != key.as_str())
            .collect();
        let test_idx: Vec<usize> = (0..set.len())
            .filter(|i| {
                set.workload_of(*i) == key.as_str()
                    && set.groups[set.group[*i] as usize].target.device == device
            })
            .collect();
        if test_idx.is_empty() {
            println!("{key}: no records in the database");
            continue;
        }
        let test = set.subset(&test_idx);
        let with_others = train(&set.subset(&rest));
        let name = &key[..12];
        println!("{name} ({} records):", test.len());
        let fastest = top_by(
            &test,
            &test
                .latency
                .iter()
                .map(|l| l.map_or(f64::MIN, |l| -l))
                .collect::<Vec<_>>(),
        );
        println!("  fastest {TOP}: {}", branches(&test, &fastest, &branch));
        ranked += 1;
        for (arm, (label, model)) in [
            ("without the set", &shipped_only),
            ("with its others", &with_others),
        ]
        .into_iter()
        .enumerate()
        {
            let scores = model.predict(&test.features);
            let m = Metrics::of(&scores, &test.latency).expect("ok records");
            for (sum, x) in sums[arm].iter_mut().zip([m.top1, m.top5, m.pairwise]) {
                *sum += x;
            }
            let first = top_by(&test, &scores);
            println!(
                "  {label}: top-1 {:.3} top-5 {:.3} pairwise {:.3}; first {TOP}: {}",
                m.top1,
                m.top5,
                m.pairwise,
                branches(&test, &first, &branch)
            );
        }
    }
    let n = f64::from(ranked).max(1.0);
    for (label, [top1, top5, pairwise]) in ["without the set", "with its others"].iter().zip(sums) {
        println!(
            "mean over {ranked} held out, {label}: top-1 {:.3} top-5 {:.3} pairwise {:.3}",
            top1 / n,
            top5 / n,
            pairwise / n
        );
    }
}

fn train(set: &TrainingSet) -> Model {
    Model::train_kind(set, ModelKind::GbdtRank).expect("a model")
}

/// The indices of `set`'s `TOP` highest `values`.
fn top_by(set: &TrainingSet, values: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..set.len()).collect();
    order.sort_by(|a, b| values[*b].total_cmp(&values[*a]));
    order.truncate(TOP);
    order
}

/// How many of `indices` fall in each branch.
fn branches(set: &TrainingSet, indices: &[usize], branch: &HashMap<i64, String>) -> String {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for i in indices {
        let b = branch.get(&set.record_ids[*i]).map_or("?", String::as_str);
        *count.entry(b).or_default() += 1;
    }
    count
        .iter()
        .map(|(b, n)| format!("{b} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
