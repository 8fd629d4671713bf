//! Time of evolutionary-search rounds with the space's `[search]` parameters (population
//! 512, 4 generations in the shipped files), without a cost model, and the share of
//! mutants each mutator gets accepted. No device is needed: nothing is measured.
//!
//! ```text
//! cargo bench --bench search_round [-- WORKLOAD ...]
//! ```
//!
//! Each round prints its wall time and the CPU time of the process (on a shared machine
//! the latter divided by the threads is what an idle machine would take).

use std::time::Instant;
use tessel::database::canonical_program;
use tessel::search::{EvolutionarySearch, SearchSpace, SearchStrategy, TargetLimits};
use tessel::target::cuda::CudaLimits;

const DEFAULT_WORKLOADS: &[&str] = &[
    "matmul:1024x1024x1024",
    "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
    "matmul:1009x523x311",
];
const ROUNDS: usize = 2;
const BATCH: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let workloads: Vec<&str> = if args.is_empty() {
        DEFAULT_WORKLOADS.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
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
            let name = if space.is_gpu() { "cuda" } else { "cpu" };
            let mut search = EvolutionarySearch::new(space, target, program.clone(), 1);
            for round in 0..ROUNDS {
                let (start, cpu) = (Instant::now(), cpu_seconds());
                let p = search.propose(BATCH, &mut |_| false);
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
            }
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
