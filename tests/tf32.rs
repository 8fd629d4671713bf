//! TensorFloat-32 (issue 17): f32 operands multiplied at TF32's precision on Hopper's
//! tensor cores, without a GPU.
//!
//! * the workload language's `tf32(x)` (f32 values only, refused on others naming the
//!   place) and the GEMM presets' `math=tf32`, whose flops are those of the f32 GEMM and
//!   whose spec is recovered from the canonical text;
//! * the example `examples/schedules/wgmma_tf32_gemm.sched` (NN layout: B transposed into
//!   shared memory) computes the reference in the interpreter, lowers to
//!   `wgmma.mma_async.m64n128k8.f32.tf32.tf32` without transpose immediates, copies A by
//!   16-byte and the transposed B by 4-byte `cp.async`, and NVRTC compiles it for sm_90a
//!   without local memory or serialized wgmmas;
//! * a TF32 operand stored with k as its rows is refused by the lowering, naming it;
//! * the mma.sync example `examples/schedules/tensor_core_tf32_gemm.sched` computes the
//!   reference, lowers to `ldmatrix` of f32 tiles (no `.trans`) and
//!   `mma.sync.m16n8k8.f32.tf32.tf32`, and NVRTC compiles it without local memory; its B
//!   left with k as rows is refused (ldmatrix cannot transpose 32-bit elements), and a
//!   k nest of 16 is refused by `tensorize` naming the loop;
//! * a TF32 GEMM's job checks with the TF32 tolerance and times cublasLt in TF32;
//! * `math=3xtf32` (matmul, every layout) states one TF32 GEMM over the split operands
//!   side by side, keeps about f32's accuracy against the f32 GEMM where `math=tf32` does
//!   not, checks with f32's tolerance against cublasLt in f32, and both tensor-core
//!   sketches run it with the split operands computed by kernels of their own.
//!
//! Its run on the H100 is `benches/probe/tf32_run.sh` (figures in benches/RESULTS.md).

use tessel::interp;
use tessel::measure::{session, Device, Peer};
use tessel::schedule::{replay, text, Schedule};
use tessel::workload;

mod kernel_util;
use kernel_util::nvrtc;

const SPEC: &str = "matmul:m=2048,n=128,k=128,math=tf32";

fn example() -> String {
    read_example("wgmma_tf32_gemm")
}

fn read_example(name: &str) -> String {
    let path = format!(
        "{}/examples/schedules/{name}.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The mma.sync TF32 example (M, N multiples of 128, K of 32 and at least 96).
const MMA_SPEC: &str = "matmul:m=128,n=128,k=96,math=tf32";

fn mma_example() -> String {
    read_example("tensor_core_tf32_gemm")
}

fn schedule(sched: &str, spec: &str) -> Schedule {
    let w = workload::preset(spec).unwrap();
    let trace = text::parse(sched).unwrap();
    replay(&trace, w.to_program(), 0).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn cuda(sched: &str, spec: &str) -> String {
    let sch = schedule(sched, spec);
    let l = tessel::lower::lower(sch.program(), tessel::lower::Backend::Cuda)
        .unwrap_or_else(|e| panic!("{spec}: {e}"));
    tessel::codegen::cuda::generate(&l).unwrap().code
}

#[test]
fn the_language_reads_tf32_on_f32_values_only() {
    let w = workload::parse(
        "input A: f32[4, 8]\ninput B: f32[8, 4]\nC[i, j] = sum(tf32(A[i, k]) * tf32(B[k, j]), k)\n",
    )
    .unwrap();
    assert!(w.uses_tf32());
    // tf32 states a precision: the GEMM's flops are 2 m n k.
    assert_eq!(w.flops(), 2.0 * 4.0 * 4.0 * 8.0);
    let e = workload::parse(
        "input A: f16[4, 8]\ninput B: f16[8, 4]\nC[i, j]: f32 = sum(tf32(A[i, k]) * cast(f32, B[k, j]), k)\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("3:") && e.contains("'tf32' rounds f32 values"),
        "{e}"
    );
}

#[test]
fn the_presets_take_math_tf32_for_f32_only() {
    let w = workload::preset("matmul:m=64,n=32,k=16,layout=tn,math=tf32").unwrap();
    assert!(w.uses_tf32());
    assert!(!workload::preset("matmul:64x32x16").unwrap().uses_tf32());
    assert_eq!(w.flops(), 2.0 * 64.0 * 32.0 * 16.0);
    let text = w.canonical_text();
    assert!(text.contains("tf32("), "{text}");
    for (spec, says) in [
        (
            "matmul:64x64x64,dtype=bf16,math=tf32",
            "1:33: math=tf32 with dtype=bf16",
        ),
        (
            "matmul:64x64x64,math=fast",
            "must be one of ieee, tf32, 3xtf32, found 'fast'",
        ),
        // Convs have no tensor-core sketch nor TF32 peer: the key is the GEMMs'.
        (
            "conv2d_nchw:n=1,c=8,h=8,w=8,k=8,r=3,s=3,math=tf32",
            "unknown key 'math' for preset 'conv2d_nchw'",
        ),
    ] {
        let e = workload::preset(spec).unwrap_err().to_string();
        assert!(e.contains(says), "{spec}: {e}");
    }
    for spec in [
        "batch_matmul:b=2,m=8,n=8,k=8,math=tf32",
        "dense_bias_relu:m=8,n=16,k=32,math=tf32",
    ] {
        assert!(workload::preset(spec).unwrap().uses_tf32(), "{spec}");
    }
}

/// The schedule's relative error against the workload's reference in the interpreter.
fn interpreter_error(sched: &str, spec: &str, seed: u64) -> f64 {
    let sch = schedule(sched, spec);
    let reference = workload::preset(spec).unwrap().to_program();
    interp::check(&reference, sch.program(), seed).unwrap()
}

/// Why the schedule, its `transform_layout` lines left out, does not lower for CUDA.
fn lowering_error_without_transform_layout(sched: &str, spec: &str) -> String {
    let sched: String = sched
        .lines()
        .filter(|l| !l.starts_with("transform_layout("))
        .map(|l| format!("{l}\n"))
        .collect();
    let sch = schedule(&sched, spec);
    match tessel::lower::lower(sch.program(), tessel::lower::Backend::Cuda) {
        Ok(_) => panic!("{spec}: a TF32 operand with k as its rows lowered"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_example_computes_the_reference() {
    let err = interpreter_error(&example(), SPEC, 3);
    assert!(err <= interp::TOLERANCE, "{err}");
}

#[test]
fn the_example_lowers_to_tf32_wgmma_with_a_transposing_copy_of_b() {
    let code = cuda(&example(), SPEC);
    // k steps of 8, and no transpose immediates after the scales (TF32 has none).
    assert!(
        code.contains("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32")
            && code.contains("p, 1, 1;"),
        "{code}"
    );
    assert!(!code.contains("k16.f32"), "{code}");
    // A (M x K, k-major as stored) by 16-byte copies, B (K x N) transposed by 4-byte ones.
    let copies =
        |what: &str, dst: &str| code.lines().any(|l| l.contains(&format!("{what}({dst} +")));
    assert!(copies("tessel_cp_async16", "A_shared"), "{code}");
    assert!(copies("tessel_cp_async4", "B_shared"), "{code}");
    assert!(!copies("tessel_cp_async16", "B_shared"), "{code}");
}

#[test]
fn a_tf32_operand_stored_with_k_as_rows_is_refused_naming_it() {
    let e = lowering_error_without_transform_layout(&example(), SPEC);
    for says in ["k-major only", "operand B", "B_shared", "transform_layout"] {
        assert!(e.contains(says), "{e:?} does not say {says:?}");
    }
}

#[test]
fn nvrtc_compiles_the_example_without_local_memory_or_serialized_wgmma() {
    if !nvrtc() {
        return;
    }
    let code = cuda(&example(), "matmul:4096x4096x4096,math=tf32");
    let cubin = tessel::measure::cuda::compile(&code, "sm_90a").unwrap_or_else(|f| panic!("{f:?}"));
    let info = &cubin.info;
    assert_eq!(info.spill_stores, Some(0), "{}", info.log);
    assert_eq!(info.stack_bytes, Some(0), "{}", info.log);
    assert!(
        info.log.contains("Compiling entry function"),
        "{}",
        info.log
    );
    for code in ["C7514", "C7517"] {
        assert!(!info.log.contains(code), "ptxas {code}: {}", info.log);
    }
}

#[test]
fn a_tf32_gemm_checks_with_the_tf32_tolerance_against_cublaslt_in_tf32() {
    for (spec, tf32) in [
        ("matmul:m=8,n=16,k=32,layout=nt,math=tf32", true),
        ("dense_bias_relu:m=8,n=16,k=32,math=tf32", true),
        ("matmul:m=8,n=16,k=32,layout=nt", false),
    ] {
        let w = workload::preset(spec).unwrap();
        let Some(Peer::Gemm(g)) = session::gemm_peer(&w) else {
            panic!("{spec}: no GEMM peer");
        };
        assert_eq!(g.tf32, tf32, "{spec}");
        let job = session::job(&w, Vec::new(), Device::Cpu, true, 0).unwrap();
        let want = if tf32 {
            interp::TOLERANCE_TF32
        } else {
            interp::TOLERANCE
        };
        assert_eq!(job.tolerance, want, "{spec}");
    }
}

#[test]
fn the_mma_sync_example_computes_the_reference() {
    let err = interpreter_error(&mma_example(), MMA_SPEC, 5);
    assert!(err <= interp::TOLERANCE, "{err}");
}

#[test]
fn the_lowered_mma_sync_example_computes_the_reference_with_gpu_semantics() {
    // Each lane runs its warp's instructions as their scalar loops (`Mma::logical`),
    // which read the TF32 factors as `tf32(x)` does.
    let sch = schedule(&mma_example(), MMA_SPEC);
    let l = tessel::lower::lower(sch.program(), tessel::lower::Backend::Cuda).unwrap();
    let reference = workload::preset(MMA_SPEC).unwrap().to_program();
    let err = interp::check_lowered(&reference, &l, 5).unwrap_or_else(|e| panic!("{e}"));
    assert!(err <= interp::TOLERANCE, "relative error {err}");
}

#[test]
fn the_mma_sync_example_lowers_to_ldmatrix_of_f32_tiles_and_m16n8k8() {
    let code = cuda(&mma_example(), MMA_SPEC);
    assert!(
        code.contains("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
        "{code}"
    );
    assert!(!code.contains("m16n8k16"), "{code}");
    // A as 16 x 8 tiles (x4), B as 8 x 8 ones (x2) from its transposed copy: no .trans,
    // the f32 registers passed to mma as their bits.
    assert!(
        code.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
        "{code}"
    );
    assert!(
        code.contains("ldmatrix.sync.aligned.m8n8.x2.shared.b16"),
        "{code}"
    );
    assert!(!code.contains(".trans"), "{code}");
    assert!(
        code.contains("__float_as_uint(A_shared_fragment["),
        "{code}"
    );
}

#[test]
fn nvrtc_compiles_the_mma_sync_example_without_local_memory() {
    if !nvrtc() {
        return;
    }
    let code = cuda(&mma_example(), "matmul:4096x4096x4096,math=tf32");
    let cubin = tessel::measure::cuda::compile(&code, "sm_90a").unwrap_or_else(|f| panic!("{f:?}"));
    assert_eq!(cubin.info.spill_stores, Some(0), "{}", cubin.info.log);
    assert_eq!(cubin.info.stack_bytes, Some(0), "{}", cubin.info.log);
}

#[test]
fn ldmatrix_of_a_tf32_operand_with_k_as_rows_is_refused_naming_it() {
    let e = lowering_error_without_transform_layout(&mma_example(), MMA_SPEC);
    for says in ["cannot transpose 32-bit", "B_shared", "transform_layout"] {
        assert!(e.contains(says), "{e:?} does not say {says:?}");
    }
}

#[test]
fn a_tf32_mma_sync_over_16_k_is_refused_naming_the_loop() {
    // Steps of 16 k, as a 16-bit GEMM has: mma_load_a's k loop is the first to refuse.
    let sched = mma_example().replace(
        "k0, k1, k2 = split(k, factors=[None, 4, 8])",
        "k0, k1, k2 = split(k, factors=[None, 2, 16])",
    );
    let w = workload::preset(MMA_SPEC).unwrap();
    let trace = text::parse(&sched).unwrap();
    let e = match replay(&trace, w.to_program(), 0) {
        Ok(_) => panic!("a TF32 nest of 16 k was tensorized"),
        Err(e) => e.to_string(),
    };
    for says in ["mma_load_a", "its extent is 16", "8 of tf32"] {
        assert!(e.contains(says), "{e:?} does not say {says:?}");
    }
}

#[test]
fn math_3xtf32_states_a_tf32_gemm_over_the_split_operands_for_every_layout() {
    for layout in ["nn", "nt", "tn", "tt"] {
        let spec = format!("matmul:m=24,n=40,k=16,layout={layout},math=3xtf32");
        let w = workload::preset(&spec).unwrap();
        assert!(w.uses_tf32() && w.splits_tf32(), "{spec}");
        // One GEMM over three times the reduction, after the remainders and the concats.
        let text = w.to_text();
        assert!(text.contains("concat("), "{text}");
        assert!(text.contains("sum(tf32("), "{text}");
        // Recovered from its canonical text, as the database and the peer need.
        let named = match layout {
            "nn" => "matmul:24x40x16,math=3xtf32".to_string(),
            l => format!("matmul:24x40x16,layout={l},math=3xtf32"),
        };
        assert_eq!(workload::preset_spec(&w), Some(named), "{spec}");
        let plain =
            workload::preset(&format!("matmul:m=24,n=40,k=16,layout={layout},math=tf32")).unwrap();
        assert!(!plain.splits_tf32());
        // Its FLOP/s read as the f32 GEMM's: 2 * M * N * K.
        assert_eq!(w.flops(), 2.0 * 24.0 * 40.0 * 16.0, "{spec}");
        assert_eq!(plain.flops(), w.flops(), "{spec}");
    }
    for (spec, says) in [
        (
            "matmul:m=8,n=8,k=8,dtype=f16,math=3xtf32",
            "mode of f32 operands",
        ),
        ("batch_matmul:b=2,m=8,n=8,k=8,math=3xtf32", "mode of matmul"),
        ("dense_bias_relu:m=8,n=8,k=8,math=3xtf32", "mode of matmul"),
    ] {
        let e = workload::preset(spec).err().unwrap().to_string();
        assert!(e.contains(says) && e.contains("1:"), "{spec}: {e}");
    }
}

#[test]
fn math_3xtf32_keeps_about_f32s_accuracy_where_tf32_does_not() {
    // Against the f32 GEMM on the same random inputs (the interpreter): 3xTF32 within
    // f32's tolerance, TF32 alone well outside it.
    let spec = |math: &str| format!("matmul:m=32,n=24,k=512{math}");
    let f32_gemm = workload::preset(&spec("")).unwrap().to_program();
    for seed in 0..3 {
        let err = |math: &str| {
            let w = workload::preset(&spec(math)).unwrap().to_program();
            match interp::check(&f32_gemm, &w, seed) {
                Ok(e) | Err(interp::CheckError::Mismatch { rel_error: e, .. }) => e,
                Err(e) => panic!("{math}: {e}"),
            }
        };
        let (split, tf32) = (err(",math=3xtf32"), err(",math=tf32"));
        assert!(split <= interp::TOLERANCE / 10.0, "3xtf32: {split:e}");
        assert!(tf32 > interp::TOLERANCE, "tf32: {tf32:e}");
        println!("seed {seed}: relative error 3xtf32 {split:.2e}, tf32 {tf32:.2e}");
    }
}

#[test]
fn a_3xtf32_gemm_checks_with_f32s_tolerance_against_cublaslt_in_f32() {
    for layout in ["nn", "tt"] {
        let spec = format!("matmul:m=8,n=16,k=32,layout={layout},math=3xtf32");
        let w = workload::preset(&spec).unwrap();
        let Some(Peer::Gemm(g)) = session::gemm_peer(&w) else {
            panic!("{spec}: no GEMM peer");
        };
        assert!(!g.tf32, "{spec}: the peer must be the f32 GEMM");
        assert_eq!((g.trans_a, g.trans_b), (layout == "tt", layout == "tt"));
        let job = session::job(&w, Vec::new(), Device::Cpu, true, 0).unwrap();
        assert_eq!(job.tolerance, interp::TOLERANCE, "{spec}");
    }
}

#[test]
fn the_tensor_core_sketches_run_a_3xtf32_gemm() {
    use tessel::search::sketch::{apply_sketch, sketches, SketchKind};
    use tessel::search::space::SearchSpace;
    let space = SearchSpace::cuda_default();
    for spec in [
        "matmul:m=40,n=24,k=20,math=3xtf32",
        "matmul:m=33,n=64,k=24,layout=tt,math=3xtf32",
    ] {
        let p = workload::preset(spec).unwrap().to_program();
        let kinds = sketches(&space, &p).unwrap();
        for kind in [SketchKind::TensorCore, SketchKind::Wgmma] {
            assert!(kinds.contains(&kind), "{spec}: {kinds:?}");
            let mut sch = Schedule::new(p.clone(), 1);
            apply_sketch(&space, &mut sch, 1, kind).unwrap_or_else(|e| panic!("{spec}: {e}"));
            let err = interp::check(&p, sch.program(), 1).unwrap();
            assert!(err <= interp::TOLERANCE, "{spec} {kind:?}: {err}");
            // The remainders and the joined operands are computed once, by kernels of
            // their own before the GEMM, whose fetches stay cp.async copies.
            let names: Vec<&str> = sch
                .program()
                .blocks_in_order()
                .into_iter()
                .map(|b| sch.program().block(b).name.as_str())
                .collect();
            assert!(
                !names.contains(&"A_lo") && !names.contains(&"B_lo"),
                "{names:?}"
            );
            assert!(names.contains(&"A3") && names.contains(&"B3"), "{names:?}");
            let l = tessel::lower::lower(sch.program(), tessel::lower::Backend::Cuda)
                .unwrap_or_else(|e| panic!("{spec} {kind:?}: {e}"));
            assert!(l.kernels.len() >= 2, "{spec} {kind:?}");
            // A3 and B3 live in global memory, written by their kernels and read by the
            // GEMM's fetches as they are.
            let p = sch.program();
            for name in ["A3", "B3"] {
                let [b] = p.find_block(name)[..] else {
                    panic!("{spec} {kind:?}: no block {name}");
                };
                let buf = p.buffer(p.block(b).body.buffer);
                assert_eq!(
                    buf.scope,
                    tessel::ir::Scope::Global,
                    "{spec} {kind:?}: {name}"
                );
            }
        }
    }
}
