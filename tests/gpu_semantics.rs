//! The seed schedules, lowered for CUDA, run through the GPU-semantics interpreter on a
//! small shape and on an awkward one (imperfect tiles): no shared-memory race, no
//! out-of-bounds access, no divergent barrier, and the reference's result.
//!
//! Every seed runs as written (`CASES`) and without its `vectorize` instructions
//! (`SCALAR_CASES`). The first version of this test found two lowering bugs, both fixed:
//! virtual-thread copies were sunk inside a vectorized loop, and a vectorized fetch whose
//! guard depends on the lane (an imperfect tile) was rejected instead of emitted as
//! guarded scalar stores.

use tessel::interp::{self, check_lowered, run_kernels, GpuInterpError};
use tessel::lower::{lower, Backend, KStmt, Lowered};
use tessel::schedule::{replay, text};
use tessel::workload;

/// (schedule file, workload) run as written.
const CASES: &[(&str, &str)] = &[
    ("mlc_blocking_shared", "matmul:128x128x16"),
    ("gemm_1_blocked", "matmul:64x48x8"),
    ("gemm_1_blocked", "matmul:50x40x7"),
    ("gemm_2_thread_tiling", "matmul:128x128x16"),
    ("gemm_2_thread_tiling", "matmul:130x120x20"),
    ("gemm_3_vthread", "matmul:128x128x16"),
    ("gemm_3_vthread", "matmul:130x120x20"),
    ("mlc_blocking_shared", "matmul:130x120x20"),
    ("gemm_4_vectorize", "matmul:128x128x16"),
    ("gemm_4_vectorize", "matmul:130x120x20"),
    ("seed_efficient_gemm", "matmul:128x128x16"),
    ("seed_efficient_gemm", "matmul:130x120x20"),
    ("gemm_split_k", "matmul:128x128x64"),
    ("gemm_split_k", "matmul:130x120x36"),
    ("fused_softmax", SMALL_SOFTMAX),
];

/// A softmax over 10 rows of 300 (`fused_softmax.sched` takes 4 rows a block and 128
/// lanes a row: a block and a row left over).
const SMALL_SOFTMAX: &str = "workload softmax\ninput X: f32[10, 300]\n\
                             M[i] = max_reduce(X[i, k], k: 300)\n\
                             E[i, j] = exp(X[i, j] - M[i])\n\
                             S[i] = sum(E[i, k], k: 300)\n\
                             Y[i, j] = E[i, j] / S[i]\n";

/// A preset spec, or a workload's text (starting `workload`), its tensors named as the
/// command line names a workload file's (`t0`, `t1`, ...: the names schedules use).
fn workload_of(spec: &str) -> workload::Workload {
    match spec.starts_with("workload ") {
        true => workload::parse(&workload::parse(spec).unwrap().canonical_text()).unwrap(),
        false => workload::preset(spec).unwrap(),
    }
}

/// (schedule file, workload) run without the schedule's `vectorize` instructions.
const SCALAR_CASES: &[(&str, &str)] = &[
    ("mlc_blocking_shared", "matmul:128x128x16"),
    ("mlc_blocking_shared", "matmul:130x120x20"),
    ("gemm_4_vectorize", "matmul:128x128x16"),
    ("gemm_4_vectorize", "matmul:130x120x20"),
    ("seed_efficient_gemm", "matmul:128x128x16"),
    ("seed_efficient_gemm", "matmul:130x120x20"),
];

fn schedule_text(name: &str, scalar: bool) -> String {
    let path = format!(
        "{}/examples/schedules/{name}.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    src.lines()
        .filter(|l| !(scalar && l.trim_start().starts_with("vectorize(")))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn lowered(name: &str, spec: &str, scalar: bool) -> Lowered {
    let w = workload_of(spec);
    let trace =
        text::parse(&schedule_text(name, scalar)).unwrap_or_else(|e| panic!("{name}.sched:{e}"));
    let sch =
        replay(&trace, w.to_program(), 0).unwrap_or_else(|e| panic!("{name}.sched on {spec}: {e}"));
    lower(sch.program(), Backend::Cuda).unwrap_or_else(|e| panic!("{name} on {spec}: {e}"))
}

fn check_cases(cases: &[(&str, &str)], scalar: bool) {
    for (name, spec) in cases {
        let w = workload_of(spec);
        let err = check_lowered(&w.to_program(), &lowered(name, spec, scalar), 1)
            .unwrap_or_else(|e| panic!("{name} on {spec} (scalar: {scalar}): {e}"));
        assert!(
            err < interp::TOLERANCE,
            "{name} on {spec}: relative error {err}"
        );
    }
}

#[test]
fn seed_kernels_run_with_gpu_semantics() {
    check_cases(CASES, false);
}

#[test]
fn seed_kernels_without_vectorize_run_with_gpu_semantics() {
    check_cases(SCALAR_CASES, true);
}

fn without_barriers(body: &mut Vec<KStmt>) {
    body.retain(|s| !matches!(s, KStmt::Sync));
    for s in body {
        match s {
            KStmt::For { body, .. } | KStmt::If { then: body, .. } => without_barriers(body),
            _ => {}
        }
    }
}

#[test]
fn a_seed_kernel_without_its_barriers_races_on_shared_memory() {
    let mut l = lowered("mlc_blocking_shared", "matmul:128x128x16", false);
    let syncs = format!("{:?}", l.kernels[0].body).matches("Sync").count();
    assert!(syncs >= 2, "the kernel has its two barriers: {syncs}");
    without_barriers(&mut l.kernels[0].body);
    let w = workload::preset("matmul:128x128x16").unwrap();
    let mut params = interp::random_inputs(&w.to_program(), 1).unwrap();
    let err = run_kernels(&l, &mut params).unwrap_err();
    assert!(
        matches!(&err, GpuInterpError::SharedRace { buffer, .. } if buffer.ends_with("_shared")),
        "{err}"
    );
}

/// Removes the last barrier of the innermost-last loop that has one (the barrier that
/// protects shared memory from being overwritten in the next iteration).
fn without_last_barrier(body: &mut Vec<KStmt>) -> bool {
    for s in body.iter_mut().rev() {
        if let KStmt::For { body, .. } | KStmt::If { then: body, .. } = s {
            if without_last_barrier(body) {
                return true;
            }
        }
    }
    match body.iter().rposition(|s| matches!(s, KStmt::Sync)) {
        Some(i) => {
            body.remove(i);
            true
        }
        None => false,
    }
}

#[test]
fn a_seed_kernel_without_its_write_after_read_barrier_races() {
    let mut l = lowered("mlc_blocking_shared", "matmul:128x128x16", false);
    assert!(without_last_barrier(&mut l.kernels[0].body));
    let w = workload::preset("matmul:128x128x16").unwrap();
    let mut params = interp::random_inputs(&w.to_program(), 1).unwrap();
    let err = run_kernels(&l, &mut params).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel matmul_kernel: read-write race on shared A_shared[0] between threads [1, 0, 0] and [0, 0, 0] of block [0, 0, 0]"
    );
}

/// A thread of `gemm_3_vthread` owns 2 x 2 virtual-thread copies of a 4 x 4 tile, 64
/// apart in each direction: its accumulator is stored once per copy (64 floats, like its
/// register fragments 2 x 4 of A and of B), not as the box over the copies (68 x 68), and
/// still computes the reference on an imperfect shape.
#[test]
fn virtual_thread_copies_of_a_local_buffer_are_compacted_each() {
    for spec in ["matmul:128x128x16", "matmul:130x120x20"] {
        let l = lowered("gemm_3_vthread", spec, false);
        let k = &l.kernels[0];
        assert_eq!(k.local_bytes(&l.program), (64 + 8 + 8) * 4, "{spec}");
        let w = workload::preset(spec).unwrap();
        let err = check_lowered(&w.to_program(), &l, 2).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert!(err < interp::TOLERANCE, "{spec}: relative error {err}");
    }
}
