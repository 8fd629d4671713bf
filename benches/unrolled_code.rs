//! How much code a CUDA kernel's unrolled loops expand to (`Kernel::unrolled_statements`),
//! the quantity `postprocess.max_unrolled_statements` bounds. No device is needed.
//!
//! ```text
//! cargo bench --bench unrolled_code -- records FILE...   # `tessel db export --format jsonl` files (.gz too)
//! cargo bench --bench unrolled_code -- propose DB W...   # a database with a trained CUDA model
//! ```
//!
//! `records`: every CUDA record replayed and lowered; the statements by status (measured,
//! timed out, rejected), the largest among the best record of each workload on each
//! device, and for bounds of 2,048-8,192 how many timeouts and measured kernels lie above
//! (and how many of those within 0.9x of their workload's best on their device). `propose`: for each workload, the
//! statements of the first evolutionary round of 64 ranked by the database's model
//! against 64 random samples (seed 11).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use tessel::database::canonical_program;
use tessel::lower::{lower, Backend};
use tessel::search::{
    EvolutionarySearch, Proposal, RandomSearch, SearchSpace, SearchStrategy, TargetLimits,
};
use tessel::target::cuda::CudaLimits;

mod common;
use common::cuda_scorer;

/// One replayed record: its workload and device, status, median seconds and unrolled
/// statements.
struct Row {
    key: String,
    device: String,
    status: String,
    secs: f64,
    statements: i64,
}

fn quantiles(name: &str, mut xs: Vec<i64>) {
    if xs.is_empty() {
        return;
    }
    xs.sort_unstable();
    let q = |f: f64| xs[((xs.len() - 1) as f64 * f) as usize];
    println!(
        "{name}: {} kernels, statements p10 {} p50 {} p90 {} max {}",
        xs.len(),
        q(0.1),
        q(0.5),
        q(0.9),
        xs[xs.len() - 1]
    );
}

fn records(paths: &[String]) {
    let mut programs = BTreeMap::new();
    let mut rows = Vec::new();
    let lines = paths.iter().flat_map(|path| {
        let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let reader: Box<dyn Read> = if path.ends_with(".gz") {
            Box::new(flate2::read::GzDecoder::new(file))
        } else {
            Box::new(file)
        };
        BufReader::new(reader).lines()
    });
    for line in lines {
        let v: serde_json::Value = serde_json::from_str(&line.expect("a line")).expect("JSON");
        if v["target"]["kind"] != "cuda" {
            continue;
        }
        let key = v["workload_key"].as_str().unwrap_or_default().to_string();
        let program = programs.entry(key.clone()).or_insert_with(|| {
            let w = tessel::workload::parse(v["workload"].as_str().unwrap_or_default())
                .expect("a workload");
            canonical_program(&w).expect("a program")
        });
        let Ok(trace) = tessel::schedule::json::from_json(&v["trace"].to_string()) else {
            continue;
        };
        let Ok(sch) = tessel::schedule::replay(&trace, program.clone(), 0) else {
            continue;
        };
        let Ok(lowered) = lower(sch.program(), Backend::Cuda) else {
            continue;
        };
        rows.push(Row {
            key,
            device: v["target"]["device"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            status: v["status"].as_str().unwrap_or("?").to_string(),
            secs: v["median_secs"].as_f64().unwrap_or(f64::INFINITY),
            statements: lowered
                .kernels
                .iter()
                .map(|k| k.unrolled_statements())
                .max()
                .unwrap_or(0),
        });
    }
    for status in ["ok", "timeout", "rejected"] {
        let xs = rows
            .iter()
            .filter(|r| r.status == status)
            .map(|r| r.statements);
        quantiles(status, xs.collect());
    }
    // Bests per workload and device: latencies of two devices do not compare.
    let mut best: BTreeMap<(&str, &str), &Row> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.status == "ok") {
        let b = best.entry((&r.key, &r.device)).or_insert(r);
        if r.secs < b.secs {
            *b = r;
        }
    }
    quantiles(
        "best of each workload and device",
        best.values().map(|r| r.statements).collect(),
    );
    let timeouts = rows.iter().filter(|r| r.status == "timeout").count();
    for bound in [2048, 3072, 4096, 6144, 8192] {
        let over: Vec<&Row> = rows
            .iter()
            .filter(|r| r.status == "ok" && r.statements > bound)
            .collect();
        let near = over
            .iter()
            .filter(|r| best[&(r.key.as_str(), r.device.as_str())].secs / r.secs > 0.9)
            .count();
        // Where a best lies above: the best within the bound, as a share of its speed.
        let kept: Vec<String> = best
            .iter()
            .filter(|(_, b)| b.statements > bound)
            .map(|((key, device), b)| {
                let within = rows
                    .iter()
                    .filter(|r| r.status == "ok" && r.key == *key && r.device == *device)
                    .filter(|r| r.statements <= bound)
                    .map(|r| r.secs)
                    .fold(f64::INFINITY, f64::min);
                format!("{:.3}", b.secs / within)
            })
            .collect();
        let t = rows
            .iter()
            .filter(|r| r.status == "timeout" && r.statements > bound)
            .count();
        println!(
            "bound {bound}: timeouts above {t}/{timeouts}, measured above {}/{} ({near} within 0.9x of their best), workloads (per device) whose best lies above {} (the best within the bound at {:?} of its speed)",
            over.len(),
            rows.iter().filter(|r| r.status == "ok").count(),
            kept.len(),
            kept
        );
    }
}

fn statements(name: &str, p: &Proposal) {
    let xs = p.candidates.iter().map(|c| {
        c.verified
            .lowered
            .kernels
            .iter()
            .map(|k| k.unrolled_statements())
            .max()
            .unwrap_or(0)
    });
    quantiles(name, xs.collect());
}

fn propose(db: &str, workloads: &[String]) {
    let scorer = cuda_scorer(db, None);
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    for spec in workloads {
        let w = tessel::workload::from_cli(spec, |_| Err(std::io::Error::other("no files")))
            .expect("workload");
        let program = canonical_program(&w).expect("canonical program");
        println!("{spec}");
        let space = SearchSpace::cuda_default();
        let mut evo = EvolutionarySearch::new(space.clone(), target.clone(), program.clone(), 11);
        evo.set_scorer(Some(scorer.clone()));
        statements(
            "  evolutionary + model, round 1",
            &evo.propose(64, &mut |_| false),
        );
        let mut random = RandomSearch::new(space, target.clone(), program, 11);
        statements("  random", &random.propose(64, &mut |_| false));
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map(String::as_str) {
        Some("records") if args.len() >= 2 => records(&args[1..]),
        Some("propose") if args.len() >= 3 => propose(&args[1], &args[2..]),
        _ => eprintln!("usage: unrolled_code records FILE... | propose DB WORKLOAD..."),
    }
}
