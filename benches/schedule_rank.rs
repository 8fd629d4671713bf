//! Where the CUDA cost model ranks given schedules of a workload among random samples of
//! the space: with `tiling.gemm_view_windowed` at 0 and at 1, 300 samples each (seed 3),
//! all scored together by the model stored in the database. No device is needed.
//!
//! ```text
//! cargo bench --bench schedule_rank -- DB WORKLOAD SCHED...
//! ```
//!
//! DB holds a trained CUDA model (`benches/shipped_db.sh` builds one from the shipped
//! records). Prints the 25 best-scored candidates (random samples as `view<bool>
//! tk<bool>`: whether they took the GEMM view, whether they copy operands by kernels of
//! their own) and the rank and score of each given schedule.

mod common;
use common::cuda_scorer;
use tessel::database::canonical_program;
use tessel::search::postproc::check;
use tessel::search::{RandomSearch, SearchSpace, TargetLimits};
use tessel::target::cuda::CudaLimits;

const SAMPLES: usize = 300;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let [db, spec, files @ ..] = &args[..] else {
        eprintln!("usage: cargo bench --bench schedule_rank -- DB WORKLOAD SCHED...");
        std::process::exit(2);
    };
    let scorer = cuda_scorer(db, None);
    let workload =
        tessel::workload::from_cli(spec, |path| std::fs::read_to_string(path)).expect("a workload");
    let program = canonical_program(&workload).expect("a canonical program");
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let shipped = SearchSpace::cuda_default();
    let mut all = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).expect("a schedule file");
        let trace = tessel::schedule::text::parse(&text).expect("a trace");
        let sch = tessel::schedule::replay(&trace, program.clone(), 0).expect("it replays");
        let lowered = check(sch.program(), &shipped, &target).expect("it passes the checks");
        all.push((f.clone(), lowered));
    }
    for view in [0.0, 1.0] {
        let mut space = SearchSpace::cuda_default();
        space.gemm_view_windowed = view;
        let mut search = RandomSearch::new(space.clone(), target.clone(), program.clone(), 3);
        let mut n = 0;
        while n < SAMPLES {
            let Ok(sch) = search.sample() else { continue };
            let Ok(lowered) = check(sch.program(), &space, &target) else {
                continue;
            };
            let t = tessel::schedule::text::print(sch.trace());
            let tag = format!(
                "view{} tk{}",
                t.contains("im2col("),
                t.contains("scope=\"global\"")
            );
            all.push((tag, lowered));
            n += 1;
        }
    }
    let scores = scorer.score(&all.iter().map(|(_, l)| l).collect::<Vec<_>>());
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
    println!("{} candidates, best-scored first", all.len());
    for (rank, i) in order.iter().enumerate() {
        if rank < 25 || files.contains(&all[*i].0) {
            println!("{rank:4} {:8.3} {}", scores[*i], all[*i].0);
        }
    }
}
