//! Time of evolutionary-search rounds with the space's `[search]` parameters (population
//! 512, 4 generations in the shipped files), where that time goes phase by phase, and the
//! share of mutants each mutator gets accepted. No device is needed: nothing is measured.
//!
//! ```text
//! cargo bench --bench search_round [-- [--db DB [--arch ARCH]] [--cuda-only] [--batch N]
//!     [--branch-share S] [--thread-tile-share S] [WORKLOAD ...]]
//! ```
//!
//! Each round proposes `--batch` candidates (64, the tuner's default; a network tune's
//! rounds are 16), which sets its population (`SearchParams::population_for`), and says
//! how they spread over the sketches' branches (`tessel::search::Branch`) and over block
//! shapes (`tessel::search::BlockShape`: how many, the largest groups) and classes of
//! outputs per thread (`tessel::search::TileClass`); `--branch-share` sets the CUDA
//! space's `search.branch_share` (1 lifts the cap), `--thread-tile-share` its
//! `search.thread_tile_share` (0 is off).
//!
//! Without `--db` the search has no cost model (it scores by measured ancestry, here all
//! alike). With `--db` the CUDA rounds are ranked by the model stored in that database for
//! CUDA `ARCH` (the database's only CUDA arch if not given), trained with
//! `tessel model train --db DB --target cuda`.
//!
//! Each round prints its wall time, the CPU time of the process (on a shared machine the
//! latter divided by the threads is what an idle machine would take) and its phases
//! (`tessel::search::RoundTimes`: serial phases in wall time, the per-candidate work of
//! the parallel evaluation in time summed over threads).

use std::time::Instant;

mod common;
use common::cuda_scorer;
use tessel::database::canonical_program;
use tessel::search::{
    BlockShape, Branch, EvolutionarySearch, RoundTimes, SearchSpace, SearchStrategy, TargetLimits,
    TileClass,
};
use tessel::target::cuda::CudaLimits;

const DEFAULT_WORKLOADS: &[&str] = &[
    "matmul:1024x1024x1024",
    "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
    "matmul:1009x523x311",
];
/// The `tessel` binary's allocator, so the rounds cost what they cost the tuner.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ROUNDS: usize = 2;

/// What the command line asks for.
#[derive(Default)]
struct Args {
    db: Option<String>,
    arch: Option<String>,
    cuda_only: bool,
    batch: Option<usize>,
    branch_share: Option<f64>,
    thread_tile_share: Option<f64>,
    workloads: Vec<String>,
}

fn args() -> Args {
    let mut out = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--db" => out.db = it.next(),
            "--arch" => out.arch = it.next(),
            "--cuda-only" => out.cuda_only = true,
            "--batch" => out.batch = it.next().and_then(|n| n.parse().ok()),
            "--branch-share" => out.branch_share = it.next().and_then(|n| n.parse().ok()),
            "--thread-tile-share" => out.thread_tile_share = it.next().and_then(|n| n.parse().ok()),
            // `--bench` and the like, from cargo.
            _ if a.starts_with("--") => {}
            _ => out.workloads.push(a),
        }
    }
    out
}

fn main() {
    let args = args();
    let workloads: Vec<&str> = if args.workloads.is_empty() {
        DEFAULT_WORKLOADS.to_vec()
    } else {
        args.workloads.iter().map(String::as_str).collect()
    };
    let scorer = args
        .db
        .as_deref()
        .map(|db| cuda_scorer(db, args.arch.as_deref()));
    if scorer.is_none() {
        println!("cost model: none");
    }
    println!("threads: {}", rayon::current_num_threads());
    for spec in workloads {
        let w = tessel::workload::from_cli(spec, |_| Err(std::io::Error::other("no files")))
            .expect("workload");
        let program = canonical_program(&w).expect("canonical program");
        for (space, target) in [
            (
                SearchSpace::cuda_default(),
                TargetLimits::Cuda(CudaLimits::sm90_default()),
            ),
            (SearchSpace::cpu_default(), TargetLimits::Cpu),
        ] {
            if args.cuda_only && !space.is_gpu() {
                continue;
            }
            let mut space = space;
            if let (true, Some(share)) = (space.is_gpu(), args.branch_share) {
                space.search.branch_share = share;
            }
            if let (true, Some(share)) = (space.is_gpu(), args.thread_tile_share) {
                space.search.thread_tile_share = share;
            }
            let gpu = space.is_gpu();
            let name = if gpu { "cuda" } else { "cpu" };
            let bounds = space.search.thread_tile_classes.clone();
            let mut search = EvolutionarySearch::new(space, target, program.clone(), 1);
            if gpu {
                search.set_scorer(scorer.clone());
            }
            let mut all = RoundTimes::default();
            for round in 0..ROUNDS {
                let (start, cpu) = (Instant::now(), cpu_seconds());
                let p = search.propose(
                    args.batch.unwrap_or(tessel::tune::DEFAULT_BATCH),
                    &mut |_| false,
                );
                let cpu = cpu_seconds() - cpu;
                let s = search.last_round();
                println!(
                    "{spec} {name} round {round}: {:.2} s ({cpu:.2} s of CPU), {} proposed, {} scored, {} distinct, \
                     first generation {} fresh, generations {:?}, {} duplicates, exhausted {}",
                    start.elapsed().as_secs_f64(),
                    p.candidates.len(),
                    p.scored,
                    s.distinct,
                    s.fresh,
                    s.generations,
                    p.duplicates,
                    p.exhausted
                );
                println!("    branches: {}", branches(&p.candidates));
                println!("    block shapes: {}", block_shapes(&p.candidates));
                println!(
                    "    outputs a thread: {}",
                    tile_classes(&p.candidates, &bounds)
                );
                println!("    {}", search.last_times());
                all.add(search.last_times());
            }
            println!("{spec} {name} {ROUNDS} rounds: {all}");
            let shares: Vec<String> = search
                .mutator_stats()
                .iter()
                .map(|(m, tried, ok)| {
                    let pct = if *tried == 0 {
                        0.0
                    } else {
                        100.0 * *ok as f64 / *tried as f64
                    };
                    format!("{m} {ok}/{tried} ({pct:.0}%)")
                })
                .collect();
            println!("{spec} {name} mutants accepted: {}", shares.join(", "));
        }
    }
}

/// How many of `candidates` each branch of the sketches has, the largest first.
fn branches(candidates: &[tessel::search::Candidate]) -> String {
    let mut count = std::collections::BTreeMap::new();
    for c in candidates {
        *count
            .entry(Branch::of(&c.trace, &c.verified.lowered))
            .or_insert(0usize) += 1;
    }
    let mut rows: Vec<(Branch, usize)> = count.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    rows.iter()
        .map(|(b, n)| format!("{n} {b}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// How many block shapes `candidates` take and the three largest groups, as
/// `count x threads/outputs`.
fn block_shapes(candidates: &[tessel::search::Candidate]) -> String {
    let mut count = std::collections::HashMap::new();
    for c in candidates {
        *count
            .entry(BlockShape::of(&c.verified.lowered))
            .or_insert(0usize) += 1;
    }
    let mut rows: Vec<(BlockShape, usize)> = count.into_iter().collect();
    rows.sort_by_key(|(s, n)| (std::cmp::Reverse(*n), s.threads, s.outputs));
    let top: Vec<String> = rows
        .iter()
        .take(3)
        .map(|(s, n)| format!("{n} x {}/{}", s.threads, s.outputs))
        .collect();
    format!("{} shapes; largest {}", rows.len(), top.join(", "))
}

/// How many of `candidates` each class of outputs per thread has.
fn tile_classes(candidates: &[tessel::search::Candidate], bounds: &[usize]) -> String {
    TileClass::all(bounds)
        .map(|class| {
            let n = candidates
                .iter()
                .filter(|c| TileClass::of(&c.verified.lowered, bounds) == class)
                .count();
            format!("{n} at {}", class.range(bounds))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// User plus system CPU time of this process so far, in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}
