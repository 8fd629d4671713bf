//! What the CUDA cost model makes of tight padding (`tiling.tight_padding`): for each GEMM,
//! N postprocessed draws of the embedded space with the option off and the same draws with
//! it on (`RandomSearch`, seed 3), all scored by the model stored in DB. Prints how many
//! draws tight padding changed, in how many of those the model scores the tightened twin
//! higher, and the mean padded work (the padded einsum's iterations over the GEMM's) of
//! the model's first 32 of each side and of all draws. No device is needed.
//!
//! ```text
//! cargo bench --bench padding_rank -- DB N GEMM...
//! ```
//!
//! DB holds a CUDA model of this build's feature set (`tessel model train --target cuda`).

mod common;

use common::cuda_scorer;
use tessel::database::canonical_program;
use tessel::ir::Program;
use tessel::schedule::{Decision, InstKind, Operand, Trace};
use tessel::search::postproc::check;
use tessel::search::{RandomSearch, SearchSpace, TargetLimits};
use tessel::target::cuda::CudaLimits;

/// How many of the model's first-ranked draws the padded work is averaged over.
const TOP: usize = 32;

/// The padded einsum's iterations over the unpadded ones: each axis's extent in `program`
/// rounded up to the multiple the trace's `pad_einsum` pads it to (1 where none pads).
fn padded_work(program: &Program, trace: &Trace) -> f64 {
    let Some(pad) = trace.insts.iter().find(|i| i.kind == InstKind::PadEinsum) else {
        return 1.0;
    };
    let produced = |rv: &Operand| {
        trace
            .insts
            .iter()
            .find(|i| matches!(rv, Operand::Rv(r) if i.outputs.contains(r)))
    };
    let name = match produced(&pad.inputs[0]).and_then(|g| g.attr("name")) {
        Some(Operand::Str(n)) => n.clone(),
        _ => return 1.0,
    };
    let Some(Operand::List(padding)) = pad.attr("padding") else {
        return 1.0;
    };
    let block = program.block(program.find_block(&name)[0]);
    let multiple = |item: &Operand| -> i64 {
        match item {
            Operand::Int(m) => *m,
            rv => {
                let sample = produced(rv).expect("the multiple's sample_categorical");
                let (Some(Decision::Categorical(d)), Some(Operand::List(c))) =
                    (&sample.decision, sample.attr("candidates"))
                else {
                    panic!("a categorical decision among candidates");
                };
                match c[*d] {
                    Operand::Int(m) => m,
                    _ => panic!("an integer multiple"),
                }
            }
        }
    };
    block
        .iter_vars
        .iter()
        .zip(padding)
        .map(|(v, item)| {
            let m = multiple(item);
            ((v.extent + m - 1) / m * m) as f64 / v.extent as f64
        })
        .product()
}

fn mean_of_top(scores: &[f64], work: &[f64]) -> f64 {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
    let top = &order[..TOP.min(order.len())];
    top.iter().map(|i| work[*i]).sum::<f64>() / top.len() as f64
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let [db, draws, specs @ ..] = &args[..] else {
        eprintln!("usage: cargo bench --bench padding_rank -- DB N GEMM...");
        std::process::exit(2);
    };
    let draws: usize = draws.parse().expect("N, the number of draws");
    let scorer = cuda_scorer(db, None);
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let off = SearchSpace::cuda_default();
    let on = SearchSpace {
        tight_padding: true,
        ..off.clone()
    };
    for spec in specs {
        let w = tessel::workload::from_cli(spec, |_| Err(std::io::Error::other("no files")))
            .expect("the workload");
        let program = canonical_program(&w).expect("its canonical program");
        let mut loose = RandomSearch::new(off.clone(), target.clone(), program.clone(), 3);
        let mut tight = RandomSearch::new(on.clone(), target.clone(), program.clone(), 3);
        let (mut sides, mut work, mut changed) = (
            [Vec::new(), Vec::new()],
            [Vec::new(), Vec::new()],
            Vec::new(),
        );
        let mut attempts = 0;
        while sides[0].len() < draws && attempts < 10 * draws {
            attempts += 1;
            let (Ok(a), Ok(b)) = (loose.sample(), tight.sample()) else {
                continue;
            };
            let (Ok(x), Ok(y)) = (
                check(a.program(), &off, &target),
                check(b.program(), &on, &target),
            ) else {
                continue;
            };
            changed.push(a.trace() != b.trace());
            work[0].push(padded_work(&program, a.trace()));
            work[1].push(padded_work(&program, b.trace()));
            sides[0].push(x);
            sides[1].push(y);
        }
        let [loose_scores, tight_scores] = sides
            .each_ref()
            .map(|s| scorer.score(&s.iter().collect::<Vec<_>>()));
        let tightened = changed.iter().filter(|c| **c).count();
        let preferred = (0..changed.len())
            .filter(|&i| changed[i] && tight_scores[i] > loose_scores[i])
            .count();
        let mean = |w: &[f64]| w.iter().sum::<f64>() / w.len().max(1) as f64;
        println!(
            "{spec}: {} draws, {tightened} tightened, the tightened twin scored higher in \
             {preferred}; padded work of the model's first {TOP}: off {:.3}, on {:.3}; of \
             all: off {:.3}, on {:.3}",
            changed.len(),
            mean_of_top(&loose_scores, &work[0]),
            mean_of_top(&tight_scores, &work[1]),
            mean(&work[0]),
            mean(&work[1]),
        );
    }
}
