//! The CUDA and CPU design spaces on shapes nobody tuned for: odd and prime extents and
//! every matmul layout, at sizes the interpreter runs in milliseconds. Each sample either
//! is rejected by a postprocessor with a typed reason or passes the verifier, replays to
//! the same program and computes the reference's answer in the interpreter (outputs and
//! intermediates NaN-poisoned, so a broken guard that reads out of bounds or leaves a
//! value unwritten fails); on CUDA a few per workload, and every sample of a conv in the
//! implicit-GEMM view, also pass the GPU-semantics interpreter (which catches two threads
//! writing one output), and a few compile with NVRTC (required unless
//! `TESSEL_NO_NVRTC=1`).

use std::collections::BTreeMap;
use tessel::database::canonical_program;
use tessel::search::{RandomSearch, SearchSpace, TargetLimits};
use tessel::target::cuda::CudaLimits;

const WORKLOADS: &[&str] = &[
    "matmul:37x29x19",
    "matmul:m=23,n=41,k=13,layout=nt",
    "matmul:m=31,n=17,k=11,layout=tn",
    "matmul:m=19,n=33,k=7,layout=tt",
    "dense_bias_relu:m=13,n=29,k=9",
    "conv2d_nchw:n=3,c=3,h=7,w=7,k=5,r=3,s=3,stride=2,pad=1",
    "conv2d_nhwc:n=2,c=5,h=6,w=5,k=7,r=3,s=3,stride=1,pad=1",
    // Channels that pad to 32 within the waste bound: with `tiling.pad_convolutions`, c
    // and k may be padded.
    "conv2d_nhwc:n=2,c=29,h=6,w=6,k=26,r=3,s=3,stride=2,pad=1",
];

const PASSING: usize = 6;
const MAX_SAMPLES: usize = 300;
const NVRTC_PER_WORKLOAD: usize = 1;
const GPU_INTERP_PER_WORKLOAD: usize = 2;

fn nvrtc_required() -> bool {
    std::env::var("TESSEL_NO_NVRTC").as_deref() != Ok("1")
}

/// What the samples of one workload showed.
#[derive(Default)]
struct Tally {
    /// Passing samples whose main (reduction) block is guarded: an imperfect tile.
    imperfect: usize,
    /// Passing samples padded by `pad_einsum` whose update block runs unguarded.
    padded: usize,
    /// Passing samples that fused spatial axes before tiling (the implicit-GEMM view).
    implicit_gemm: usize,
}

fn explore(spec: &str, space: &SearchSpace, target: &TargetLimits, seed: u64) -> Tally {
    let w = tessel::workload::from_cli(spec, |_| Err(std::io::Error::other("no files")))
        .expect("workload");
    let program = canonical_program(&w).expect("canonical program");
    let mut search = RandomSearch::new(space.clone(), target.clone(), program.clone(), seed);
    let (mut sampled, mut passed) = (0, 0);
    let mut tally = Tally::default();
    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    let (mut compiled, mut gpu_checked) = (0, 0);
    while passed < PASSING && sampled < MAX_SAMPLES {
        sampled += 1;
        let sch = match search.sample() {
            Ok(s) => s,
            Err(e) => {
                *failures.entry(format!("sketch: {e}")).or_insert(0) += 1;
                continue;
            }
        };
        tessel::ir::verify::verify(sch.program()).expect("every sample verifies");
        let again = tessel::schedule::replay(sch.trace(), program.clone(), 99).expect("replay");
        assert_eq!(
            tessel::search::ir_hash(again.program()),
            tessel::search::ir_hash(sch.program()),
            "{spec}: replay differs"
        );
        let verified = match tessel::search::postproc::verify(sch.program(), space, target) {
            Ok(v) => v,
            Err(r) => {
                *failures.entry(format!("rejected {r}")).or_insert(0) += 1;
                continue;
            }
        };
        let text = tessel::schedule::text::print(sch.trace());
        if let Err(e) = tessel::interp::check(&program, sch.program(), 7) {
            panic!("{spec}: a verified candidate computes a wrong answer: {e}\n{text}");
        }
        let p = sch.program();
        if p.blocks_in_order().iter().any(|b| {
            let blk = p.block(*b);
            blk.is_reduction() && blk.predicate.is_some()
        }) {
            tally.imperfect += 1;
        }
        if text.contains("pad_einsum(")
            && p.blocks_in_order().iter().all(|b| {
                let blk = p.block(*b);
                !blk.is_reduction() || blk.predicate.is_none()
            })
        {
            tally.padded += 1;
        }
        // Everything before the first tiling instruction (padded or exact).
        let first_tile = ["sample_tile(", "sample_perfect_tile("]
            .iter()
            .filter_map(|k| text.find(k))
            .min()
            .unwrap_or(text.len());
        let before_tiling = &text[..first_tile];
        // A fuse of the main block's loops; the loops of a padding stage made a kernel of
        // its own (`ax0`, `ax1`, ...) are fused to spread it over threads.
        let fused = before_tiling
            .lines()
            .any(|l| l.contains("fuse(") && !l.contains("fuse(ax"));
        if fused {
            tally.implicit_gemm += 1;
        }
        if let TargetLimits::Cuda(_) = target {
            if gpu_checked < GPU_INTERP_PER_WORKLOAD || fused {
                gpu_checked += 1;
                if let Err(e) = tessel::interp::gpu::check_lowered(&program, &verified.lowered, 3) {
                    panic!("{spec}: GPU-semantics check failed: {e}\n{text}");
                }
            }
            if compiled < NVRTC_PER_WORKLOAD && nvrtc_required() {
                compiled += 1;
                if let Err(f) = tessel::measure::cuda::compile(&verified.source.code, "sm_90a") {
                    panic!(
                        "{spec}: NVRTC refused a verified candidate: {f}\n{}",
                        verified.source.code
                    );
                }
            }
        }
        passed += 1;
    }
    println!(
        "{spec}: {passed}/{sampled} passed, {} with imperfect tiles, {} padded, {} implicit GEMM; {failures:?}",
        tally.imperfect, tally.padded, tally.implicit_gemm
    );
    assert_eq!(passed, PASSING, "{spec}: {failures:?}");
    tally
}

#[test]
fn cuda_half_precision_accumulated_in_f32_verifies_computes_the_reference_and_compiles() {
    // f16/bf16 operands summed in f32 (`acc=f32`): the reduction reads the operands
    // through casts, which `pad_einsum` looks through; the f32 accumulator's rounding to
    // the dtype is an epilogue of the write-back. Checked against the unscheduled program
    // within the dtype's tolerance.
    let space = SearchSpace::cuda_default();
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    for (i, spec) in [
        "matmul:m=37,n=29,k=19,layout=nt,dtype=bf16,acc=f32",
        "matmul:m=23,n=41,k=13,dtype=f16,acc=f32",
        "conv2d_nhwc:n=2,c=5,h=6,w=5,k=7,r=3,s=3,stride=1,pad=1,dtype=bf16,acc=f32",
    ]
    .iter()
    .enumerate()
    {
        let t = explore(spec, &space, &target, 400 + i as u64);
        if spec.starts_with("matmul") {
            assert!(t.padded > 0, "{spec}: no sample padded through the casts");
        }
    }
}

#[test]
fn cuda_odd_shapes_verify_compute_the_reference_and_compile() {
    let space = SearchSpace::cuda_default();
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let mut padding_convs = space.clone();
    padding_convs.pad_convolutions = true;
    for (i, spec) in WORKLOADS.iter().enumerate() {
        let pads_channels = spec.contains("c=29");
        let space = if pads_channels {
            &padding_convs
        } else {
            &space
        };
        let t = explore(spec, space, &target, 300 + i as u64);
        // Every matmul here has a prime extent above 16, which the space pads (by
        // `pad_einsum`, the update then unguarded; an axis no multiple pads within the
        // waste bound by imperfect tiles); the first two convs' extents are all 16 or
        // less, which keep to exact tiles; the last conv's channels are padded.
        if !spec.starts_with("conv") {
            assert!(
                t.padded + t.imperfect > 0,
                "{spec}: no sample is padded or has an imperfect tile"
            );
        }
        if pads_channels {
            assert!(t.padded > 0, "{spec}: no sample padded its channels");
        }
        // The implicit-GEMM view fuses a conv's n, p, q (with the probability of cuda.toml);
        // a GEMM has one axis per input and is left as it is.
        if spec.starts_with("conv") {
            assert!(
                t.implicit_gemm > 0,
                "{spec}: no sample in the implicit-GEMM view"
            );
        } else {
            assert_eq!(t.implicit_gemm, 0, "{spec}: fused axes before tiling");
        }
    }
}
