//! Hopper's `wgmma` (`tensorize(.., intrin="wgmma_sync")`) and the 128-byte swizzle of
//! shared buffers (`storage_swizzle`) without a GPU, on the example schedule
//! `examples/schedules/wgmma_gemm.sched` (wgmma.mma_async m64n256k16, f16 or bf16 operands
//! read from swizzled shared memory, accumulated in f32):
//!
//! * it computes the reference in the interpreter, f16 and bf16, and its trace (with
//!   `storage_swizzle`) round-trips through text and JSON;
//! * lowered for CUDA it has the wgmma (n = 256, both operands in the NN layout) with one
//!   `wgmma.fence` before and one `commit_group` after the run of them, and the wait as the
//!   last statement of the pipelined loop's body (after the next stage's copies); the
//!   accumulator's fill and store; both shared operands swizzled with rows of 64 (A) and
//!   256 (B) elements;
//! * its CUDA C has the wgmma of the dtype, the descriptors, the swizzle and the proxy
//!   fences, and NVRTC compiles it for sm_90a without spills, a stack frame or ptxas's
//!   C7514 (wgmmas serialized) and C7517 (a wait injected) (NVRTC is required unless
//!   `TESSEL_NO_NVRTC=1`);
//! * refusals name the loop or buffer: an unswizzled operand, warps that do not make
//!   warpgroups of consecutive 16-row slices, an N extent wgmma has not, a buffer whose
//!   rows are not 128 bytes, `storage_align` of a swizzled buffer;
//! * the swizzle is a storage detail: the mma.sync example
//!   (`examples/schedules/tensor_core_gemm.sched`) with both paddings replaced by
//!   swizzles (and reduction steps of 64, so that A's rows are 128 bytes) lowers and
//!   compiles, and computes the reference in the GPU-semantics interpreter (about 60 s:
//!   ignored by default, `cargo test --release --test wgmma -- --ignored` runs it).
//!
//! The example needs M a multiple of 1024 (blocks of 128 rows in groups of eight), N of
//! 256 and at least 4 reduction steps of 64 (its 4 pipeline stages): 1024 x 256 x 256 is
//! its smallest shape. The GPU-semantics interpreter is not run on it: every lane runs
//! its warp's whole 16 x 256 x 16 wgmma, some 2e9 multiply-adds for that shape, a good
//! part of an hour (it runs on the device instead: tests/gpu.rs).

use tessel::interp::{self, check_lowered};
use tessel::ir::printer::print_program;
use tessel::ir::DType;
use tessel::lower::{lower, Backend, KStmt, Lowered, MmaOp};
use tessel::schedule::{json, replay, text, Schedule};
use tessel::workload;

mod kernel_util;
use kernel_util::{nvrtc, statements};

const F16: &str = "matmul:m=1024,n=256,k=256,dtype=f16,acc=f32";
const BF16: &str = "matmul:m=1024,n=256,k=256,dtype=bf16,acc=f32";

fn read_example(name: &str) -> String {
    let path = format!(
        "{}/examples/schedules/{name}.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn example() -> String {
    read_example("wgmma_gemm")
}

/// `text` with its line `old` replaced by the lines `new` (none: removed).
fn edited_text(text: &str, old: &str, new: &[&str]) -> String {
    assert!(text.lines().any(|l| l == old), "no line {old:?}");
    text.lines()
        .flat_map(|l| if l == old { new.to_vec() } else { vec![l] })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The example with its line `old` replaced by the lines `new` (none: removed).
fn edited(old: &str, new: &[&str]) -> String {
    edited_text(&example(), old, new)
}

/// The schedule replayed on the workload, as `tessel check` and `tessel build` do.
fn schedule(sched: &str, spec: &str) -> Result<Schedule, String> {
    let w = workload::preset(spec).unwrap();
    let trace = text::parse(sched).map_err(|e| e.to_string())?;
    replay(&trace, w.to_program(), 0).map_err(|e| e.to_string())
}

fn lowered(sched: &str, spec: &str) -> Lowered {
    let sch = schedule(sched, spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    lower(sch.program(), Backend::Cuda).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn lower_error(sched: &str, spec: &str) -> String {
    let sch = schedule(sched, spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    match lower(sch.program(), Backend::Cuda) {
        Ok(_) => panic!("{spec}: lowered"),
        Err(e) => e.to_string(),
    }
}

fn assert_says(what: &str, e: &str, says: &[&str]) {
    for s in says {
        assert!(e.contains(s), "{what}: {e:?} does not say {s:?}");
    }
}

fn cuda(l: &Lowered) -> String {
    tessel::codegen::cuda::generate(l).unwrap().code
}

fn is_mma(s: &KStmt, f: fn(&MmaOp) -> bool) -> bool {
    matches!(s, KStmt::Mma(m) if f(&m.op))
}

/// The example computes the reference of `spec` in the interpreter (some 10 s each for
/// the smallest shape: f16 and bf16 are two tests, which run side by side).
fn computes_the_reference(spec: &str, dtype: DType) {
    let sch = schedule(&example(), spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let printed = print_program(sch.program());
    for intrin in ["mma_fill", "wgmma_sync", "mma_store"] {
        let ann = format!("annotations={{\"tensorize\": \"{intrin}\"}}");
        assert!(
            printed.contains(&ann),
            "{spec}: no loop tensorized with {intrin}"
        );
    }
    let reference = workload::preset(spec).unwrap().to_program();
    let err = interp::check(&reference, sch.program(), 3).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert!(
        err < interp::tolerance(dtype),
        "{spec}: relative error {err}"
    );
}

#[test]
fn the_example_computes_the_reference_in_f16() {
    computes_the_reference(F16, DType::F16);
}

#[test]
fn the_example_computes_the_reference_in_bf16() {
    computes_the_reference(BF16, DType::BF16);
}

#[test]
fn storage_swizzle_round_trips_through_text_and_json() {
    let sch = schedule(&example(), F16).unwrap();
    let printed = print_program(sch.program());
    let as_text = text::print(sch.trace());
    for needle in [
        "storage_swizzle(a_sh, buffer_index=0)",
        "storage_swizzle(b_sh, buffer_index=0)",
        "tensorize(i3, intrin=\"wgmma_sync\")",
    ] {
        assert!(as_text.contains(needle), "no {needle} in {as_text}");
    }
    assert_eq!(&text::parse(&as_text).unwrap(), sch.trace());
    let from_json = json::from_json(&json::to_json(sch.trace())).unwrap();
    assert_eq!(&from_json, sch.trace());
    let again = replay(&from_json, workload::preset(F16).unwrap().to_program(), 0).unwrap();
    assert_eq!(print_program(again.program()), printed);
}

#[test]
fn the_example_lowers_to_bracketed_wgmmas_on_swizzled_operands() {
    for spec in [F16, BF16] {
        let l = lowered(&example(), spec);
        // 1024 / 128 blocks of eight warps (threadIdx.y), each warp's 32 lanes in x.
        assert_eq!(l.kernels.len(), 1, "{spec}");
        let k = &l.kernels[0];
        assert_eq!(k.block, [32, 8, 1], "{spec}");
        let all = statements(&l);
        let count = |f: fn(&MmaOp) -> bool| all.iter().filter(|s| is_mma(s, f)).count();
        // The update: one wgmma (in the unrolled k_1 loop), NN: neither operand transposed.
        let wgmmas: Vec<&MmaOp> = all
            .iter()
            .filter_map(|s| match s {
                KStmt::Mma(m) if matches!(m.op, MmaOp::Wgmma { .. }) => Some(&m.op),
                _ => None,
            })
            .collect();
        assert_eq!(wgmmas.len(), 1, "{spec}: {wgmmas:?}");
        let MmaOp::Wgmma {
            n,
            a_trans,
            b_trans,
            ..
        } = wgmmas[0]
        else {
            unreachable!()
        };
        assert_eq!((*n, *a_trans, *b_trans), (256, false, false), "{spec}");
        assert_eq!(count(|o| *o == MmaOp::WgmmaFence), 1, "{spec}");
        assert_eq!(count(|o| *o == MmaOp::WgmmaCommit), 1, "{spec}");
        // One group left in flight at the end of each iteration, all of them waited for
        // after the loop.
        assert_eq!(count(|o| *o == MmaOp::WgmmaWait(1)), 1, "{spec}");
        assert_eq!(count(|o| *o == MmaOp::WgmmaWait(0)), 1, "{spec}");
        assert!(count(|o| matches!(o, MmaOp::Fill { .. })) > 0, "{spec}");
        assert!(count(|o| matches!(o, MmaOp::Store { .. })) > 0, "{spec}");
        // No mma.sync machinery: wgmma reads shared memory, not fragments.
        assert_eq!(
            count(|o| matches!(o, MmaOp::Sync { .. } | MmaOp::Load { .. })),
            0,
            "{spec}"
        );
        // The pipelined loop (k_0): fence, the run of wgmmas, commit, then the next stage's
        // copies, and the wait (for all but the group just issued) last, in the iteration
        // that issued the group.
        let body = all
            .iter()
            .find_map(|s| match s {
                KStmt::For { body, .. }
                    if body.iter().any(|s| is_mma(s, |o| *o == MmaOp::WgmmaFence)) =>
                {
                    Some(body)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{spec}: no loop holds the wgmma fence"));
        let at = |f: fn(&MmaOp) -> bool| body.iter().position(|s| is_mma(s, f)).unwrap();
        let fence = at(|o| *o == MmaOp::WgmmaFence);
        let commit = at(|o| *o == MmaOp::WgmmaCommit);
        let wait = at(|o| *o == MmaOp::WgmmaWait(1));
        assert_eq!(commit, fence + 2, "{spec}: fence, wgmmas, commit");
        assert!(
            matches!(&body[fence + 1], KStmt::For { body, .. }
                if body.iter().all(|s| is_mma(s, |o| matches!(o, MmaOp::Wgmma { .. })))),
            "{spec}: the fence and the commit do not bracket a loop of wgmmas"
        );
        assert_eq!(wait, body.len() - 1, "{spec}: the wait is not last");
        let copies = |s: &KStmt| {
            let mut v = Vec::new();
            walk(s, &mut v);
            v.iter()
                .any(|s| matches!(s, KStmt::CpAsync { lanes: 8, .. }))
        };
        let first_copy = body
            .iter()
            .position(copies)
            .unwrap_or_else(|| panic!("{spec}: no copies in the pipelined loop"));
        assert!(
            commit < first_copy && first_copy < wait,
            "{spec}: the next stage's copies are not between the commit and the wait"
        );
        // Both operands swizzled, rows of 64 (A: a stage's 64 k) and 256 (B: 256 n).
        let row = |name: &str| {
            k.allocs
                .iter()
                .find(|a| l.program.buffer(a.buffer).name == name)
                .unwrap_or_else(|| panic!("{spec}: no alloc {name}"))
                .swizzle_row
        };
        assert_eq!(row("A_shared"), Some(64), "{spec}");
        assert_eq!(row("B_shared"), Some(256), "{spec}");
    }
}

/// `s` and every statement nested in it, depth first.
fn walk(s: &KStmt, out: &mut Vec<KStmt>) {
    out.push(s.clone());
    if let KStmt::For { body, .. } | KStmt::If { then: body, .. } = s {
        for s in body {
            walk(s, out);
        }
    }
}

#[test]
fn the_cuda_source_has_wgmma_descriptors_swizzle_and_fences() {
    for (spec, ty) in [(F16, "f16"), (BF16, "bf16")] {
        let code = cuda(&lowered(&example(), spec));
        for needle in [
            format!("wgmma.mma_async.sync.aligned.m64n256k16.f32.{ty}.{ty}"),
            "tessel_wgmma_desc".into(),
            "tessel_swizzle128".into(),
            "fence.proxy.async.shared::cta".into(),
            "wgmma.fence.sync.aligned".into(),
            "wgmma.commit_group.sync.aligned".into(),
            "wgmma.wait_group.sync.aligned 0".into(),
            "cp.async.cg.shared.global".into(),
            "__align__(1024)".into(),
        ] {
            assert!(code.contains(&needle), "{spec}: the CUDA C has no {needle}");
        }
    }
}

#[test]
fn nvrtc_compiles_the_example_without_local_memory_or_serialized_wgmma() {
    if !nvrtc() {
        return;
    }
    for (spec, ty) in [(F16, "f16"), (BF16, "bf16")] {
        let code = cuda(&lowered(&example(), spec));
        let cubin = tessel::measure::cuda::compile(&code, "sm_90a")
            .unwrap_or_else(|f| panic!("{spec}: {f:?}"));
        let info = &cubin.info;
        assert_eq!(info.spill_stores, Some(0), "{spec}: {}", info.log);
        assert_eq!(info.spill_loads, Some(0), "{spec}: {}", info.log);
        assert_eq!(info.stack_bytes, Some(0), "{spec}: {}", info.log);
        // ptxas says C7514 when it serializes the wgmmas (the accumulators read between
        // the wgmmas and their wait: a wait found only across the loop's back edge, say),
        // and C7517 when it injects a wait of its own.
        assert!(
            info.log.contains("Compiling entry function"),
            "{spec}: {}",
            info.log
        );
        for code in ["C7514", "C7517"] {
            assert!(!info.log.contains(code), "{spec}: {}", info.log);
        }
        let ptx = tessel::measure::cuda::compile_ptx(&code, "sm_90a")
            .unwrap_or_else(|f| panic!("{spec}: {f}"));
        let wgmma = format!("wgmma.mma_async.sync.aligned.m64n256k16.f32.{ty}.{ty}");
        assert!(ptx.contains(&wgmma), "{spec}: the PTX has no {wgmma}");
    }
}

#[test]
fn a_wgmma_operand_without_the_swizzle_is_refused_naming_it() {
    let sched = edited("storage_swizzle(a_sh, buffer_index=0)", &[]);
    let e = lower_error(&sched, F16);
    assert_says(
        "A unswizzled",
        &e,
        &["loop i_2", "A_shared", "not swizzled", "storage_swizzle"],
    );
}

/// The example with 4 x 2 warps of 16 rows x 128 columns, bound to threadIdx.y as
/// `fuse(first, second)` of the row and column warp loops (`i1`, `j1`).
fn warps_4_by_2(first: &str, second: &str) -> String {
    let text = edited(
        "i0, i1, i3 = split(i, factors=[None, 8, 16])",
        &["i0, i1, i3 = split(i, factors=[None, 4, 16])"],
    );
    let text = edited_text(
        &text,
        "j0, j3 = split(j, factors=[None, 256])",
        &["j0, j1, j3 = split(j, factors=[None, 2, 128])"],
    );
    let text = edited_text(
        &text,
        "reorder(i0, j0, i1, k0, k1, i3, j3, k2)",
        &[&format!(
            "reorder(i0, j0, {first}, {second}, k0, k1, i3, j3, k2)"
        )],
    );
    let text = edited_text(
        &text,
        "bind(i1, thread=\"threadIdx.y\")",
        &[
            &format!("ty = fuse({first}, {second})"),
            "bind(ty, thread=\"threadIdx.y\")",
        ],
    );
    edited_text(
        &text,
        "reverse_compute_at(b1, i1)",
        &["reverse_compute_at(b1, ty)"],
    )
}

#[test]
fn warps_that_are_not_consecutive_row_slices_of_a_warpgroup_are_refused() {
    // Warp ty = 2 * i1 + j1: warps 0 and 1 share their 16 rows (and read other B
    // columns), so a warpgroup is not four consecutive 16-row slices.
    let e = lower_error(&warps_4_by_2("i1", "j1"), F16);
    assert_says(
        "ty = fuse(i1, j1)",
        &e,
        &[
            "cannot tensorize: loop i_2",
            "the A tile of warp 1 is not 16 rows below",
        ],
    );
    // Warp ty = 4 * j1 + i1: warps 4g .. 4g+3 are consecutive 16-row slices of one
    // 128-column half, a warpgroup each (wgmma n = 128).
    let l = lowered(&warps_4_by_2("j1", "i1"), F16);
    let n: Vec<i64> = statements(&l)
        .iter()
        .filter_map(|s| match s {
            KStmt::Mma(m) => match m.op {
                MmaOp::Wgmma { n, .. } => Some(n),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(n, [128]);
    // Two warps in y: no warpgroup at all.
    let two = edited(
        "i0, i1, i3 = split(i, factors=[None, 8, 16])",
        &["i0, i1, i3 = split(i, factors=[None, 2, 16])"],
    )
    .replace("factors=[None, 8, 32, 8]", "factors=[None, 2, 32, 8]");
    let e = lower_error(&two, "matmul:m=256,n=256,k=256,dtype=f16,acc=f32");
    assert_says(
        "two warps",
        &e,
        &[
            "loop i_2",
            "warpgroups of four warps",
            "multiple of 4 (it is 2)",
        ],
    );
}

#[test]
fn an_n_extent_wgmma_has_not_is_refused_by_the_schedule_naming_the_loop() {
    for (j3, spec) in [
        (512, "matmul:m=1024,n=512,k=256,dtype=f16,acc=f32"),
        (4, F16),
    ] {
        let sched = edited(
            "j0, j3 = split(j, factors=[None, 256])",
            &[&format!("j0, j3 = split(j, factors=[None, {j3}])")],
        );
        let e = match schedule(&sched, spec) {
            Ok(_) => panic!("j3 = {j3}: applied"),
            Err(e) => e,
        };
        assert_says(
            &format!("j3 = {j3}"),
            &e,
            &[
                "loop j_1: cannot tensorize with wgmma_sync",
                &format!("its extent is {j3}"),
                "8 to 256 in steps of 8",
            ],
        );
    }
}

#[test]
fn a_swizzled_buffer_whose_rows_are_not_128_bytes_is_refused_naming_it() {
    // The mma.sync example's A tile is 32 f16 (64 bytes) wide per stage.
    let sched = edited_text(
        &read_example("tensor_core_gemm"),
        "storage_align(a_sh, buffer_index=0, axis=0, factor=32, offset=8)",
        &["storage_swizzle(a_sh, buffer_index=0)"],
    );
    let e = lower_error(&sched, "matmul:m=128,n=128,k=96,dtype=f16,acc=f32");
    assert_says(
        "rows of 64 bytes",
        &e,
        &["cannot swizzle A_shared", "128 bytes"],
    );
}

/// A block whose wgmma accumulators leave no registers for the rest (16 warps of 16 x 256
/// f32 accumulators: 128 registers a thread, the most 512 threads may have) is refused
/// before compiling, naming the kernel; the example's 8 warps pass.
#[test]
fn a_block_whose_fragments_fill_the_register_file_is_refused_before_compiling() {
    use tessel::search::{postproc, SearchSpace, TargetLimits};
    let target = TargetLimits::Cuda(tessel::target::cuda::CudaLimits::sm90_default());
    let space = SearchSpace::cuda_default();
    let spec = "matmul:m=2048,n=256,k=256,dtype=f16,acc=f32";
    let ok = schedule(&example(), spec).unwrap();
    postproc::check(ok.program(), &space, &target).unwrap();
    let mut sched = edited(
        "i0, i1, i3 = split(i, factors=[None, 8, 16])",
        &["i0, i1, i3 = split(i, factors=[None, 16, 16])"],
    );
    for old in [
        "_, aty, atx, av = split(af, factors=[None, 8, 32, 8])",
        "_, bty, btx, bv = split(bf, factors=[None, 8, 32, 8])",
    ] {
        let new = old.replace("None, 8, 32", "None, 16, 32");
        sched = edited_text(&sched, old, &[new.as_str()]);
    }
    // Three stages, so that its shared memory (64 KB a stage) fits.
    let sched = edited_text(
        &sched,
        "annotate(k0, key=\"software_pipeline_stage\", value=[0, 0, 3])",
        &["annotate(k0, key=\"software_pipeline_stage\", value=[0, 0, 2])"],
    );
    let tall = schedule(&sched, spec).unwrap();
    let e = postproc::check(tall.program(), &space, &target).unwrap_err();
    assert_eq!(e.kind(), postproc::RejectKind::Registers, "{e}");
    assert_says(
        "16 warps of 256 columns",
        &e.to_string(),
        &[
            "128 registers of tensor-core fragments",
            "512 threads",
            "128 a thread may have",
        ],
    );
}

#[test]
fn a_swizzled_buffer_cannot_be_padded() {
    let sched = edited(
        "storage_swizzle(a_sh, buffer_index=0)",
        &[
            "storage_swizzle(a_sh, buffer_index=0)",
            "storage_align(a_sh, buffer_index=0, axis=0, factor=64, offset=8)",
        ],
    );
    let e = match schedule(&sched, F16) {
        Ok(_) => panic!("storage_align after storage_swizzle applied"),
        Err(e) => e,
    };
    assert_says("align after swizzle", &e, &["A_shared", "swizzled"]);
    // The other order: a padded buffer cannot be swizzled.
    let sched = edited(
        "storage_swizzle(a_sh, buffer_index=0)",
        &[
            "storage_align(a_sh, buffer_index=0, axis=0, factor=64, offset=8)",
            "storage_swizzle(a_sh, buffer_index=0)",
        ],
    );
    let e = match schedule(&sched, F16) {
        Ok(_) => panic!("storage_swizzle after storage_align applied"),
        Err(e) => e,
    };
    assert_says("swizzle after align", &e, &["A_shared", "padded"]);
}

/// The mma.sync example with reduction steps of 64, so that a stage of A is 64 f16 (128
/// bytes) wide, and both paddings replaced by swizzles.
fn swizzled_mma_sync_example() -> String {
    let text = edited_text(
        &read_example("tensor_core_gemm"),
        "k0, k1, k2 = split(k, factors=[None, 2, 16])",
        &["k0, k1, k2 = split(k, factors=[None, 4, 16])"],
    );
    let text = edited_text(
        &text,
        "storage_align(a_sh, buffer_index=0, axis=0, factor=32, offset=8)",
        &["storage_swizzle(a_sh, buffer_index=0)"],
    );
    edited_text(
        &text,
        "storage_align(b_sh, buffer_index=0, axis=0, factor=64, offset=8)",
        &["storage_swizzle(b_sh, buffer_index=0)"],
    )
}

/// One thread block, three stages of 64.
const SWIZZLED_MMA_SYNC: &str = "matmul:m=128,n=128,k=192,dtype=f16,acc=f32";

#[test]
fn the_mma_sync_example_with_swizzled_operands_lowers_and_compiles() {
    let l = lowered(&swizzled_mma_sync_example(), SWIZZLED_MMA_SYNC);
    let rows: Vec<(String, Option<i64>)> = l.kernels[0]
        .allocs
        .iter()
        .filter(|a| a.scope == tessel::ir::Scope::Shared)
        .map(|a| (l.program.buffer(a.buffer).name.clone(), a.swizzle_row))
        .collect();
    assert_eq!(
        rows,
        [
            ("A_shared".to_string(), Some(64)),
            ("B_shared".to_string(), Some(128))
        ]
    );
    let code = cuda(&l);
    for needle in [
        "tessel_swizzle128",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    ] {
        assert!(code.contains(needle), "the CUDA C has no {needle}");
    }
    if nvrtc() {
        let cubin =
            tessel::measure::cuda::compile(&code, "sm_90a").unwrap_or_else(|f| panic!("{f:?}"));
        assert_eq!(cubin.info.spill_stores, Some(0), "{}", cubin.info.log);
        assert_eq!(cubin.info.stack_bytes, Some(0), "{}", cubin.info.log);
    }
}

#[test]
#[ignore = "about 60 s: every lane runs its warp's whole mma.sync in the GPU-semantics interpreter"]
fn the_mma_sync_example_with_swizzled_operands_computes_the_reference() {
    // The swizzle is a storage detail: the lowered kernel keeps logical flat indices (the
    // CUDA printer maps them), so this checks the staging of the unpadded, pipelined
    // buffers, not the permutation itself (which runs on the device only).
    let l = lowered(&swizzled_mma_sync_example(), SWIZZLED_MMA_SYNC);
    let reference = workload::preset(SWIZZLED_MMA_SYNC).unwrap().to_program();
    let err = check_lowered(&reference, &l, 5).unwrap_or_else(|e| panic!("{e}"));
    assert!(err < interp::tolerance(DType::F16), "relative error {err}");
}
