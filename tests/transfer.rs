//! Transfer between shapes: a trace sampled for one GEMM replays on a GEMM of other
//! extents once its tile decisions are fitted (`replay_fitted`), and the fitted schedule
//! computes the other GEMM's reference in the interpreter. Plain `replay` refuses such
//! traces, which is why the tuner's warm start fits the traces of other workloads.

use tessel::database::canonical_program;
use tessel::schedule::{replay, replay_fitted, Decision, InstKind};
use tessel::search::{RandomSearch, SearchSpace, TargetLimits};
use tessel::target::cuda::CudaLimits;

fn program(spec: &str) -> tessel::ir::Program {
    let w = tessel::workload::from_cli(spec, |_| Err(std::io::Error::other("no files")))
        .expect("workload");
    canonical_program(&w).expect("canonical program")
}

fn tiles(trace: &tessel::schedule::Trace) -> Vec<Vec<i64>> {
    trace
        .insts
        .iter()
        .filter(|i| i.kind == InstKind::SamplePerfectTile)
        .filter_map(|i| match &i.decision {
            Some(Decision::Tile(t)) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn gemm_traces_fit_another_shape_and_compute_its_reference() {
    let from = program("matmul:64x48x32");
    let to = program("matmul:96x40x24");
    let space = SearchSpace::cuda_default();
    let limits = TargetLimits::Cuda(CudaLimits::sm90_default());
    let mut search = RandomSearch::new(space, limits, from.clone(), 5);
    let (mut fitted, mut refused_plainly) = (0, 0);
    for _ in 0..12 {
        let Ok(sch) = search.sample() else { continue };
        let trace = sch.trace().clone();
        let Ok(on_to) = replay_fitted(&trace, to.clone(), 0) else {
            continue;
        };
        fitted += 1;
        if replay(&trace, to.clone(), 0).is_err() {
            refused_plainly += 1;
        }
        // The fitted trace is a trace of `to`: it replays plainly and computes its answer.
        let again = replay(on_to.trace(), to.clone(), 0).expect("the fitted trace replays");
        assert_eq!(again.program(), on_to.program());
        if let Err(e) = tessel::interp::check(&to, on_to.program(), 3) {
            panic!("fitted schedule is wrong: {e}\n{}", on_to.trace());
        }
        // Fitting keeps the innermost factors where they divide: the number of tile
        // decisions is the same and none is longer.
        let (a, b) = (tiles(&trace), tiles(on_to.trace()));
        assert_eq!(a.len(), b.len());
    }
    assert!(fitted >= 6, "only {fitted} of 12 samples fitted");
    assert!(refused_plainly >= 1, "no sample needed fitting");
}
