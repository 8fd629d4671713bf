//! Tensor cores (`tensorize`, issue 17) without a GPU, on the example schedule
//! `examples/schedules/tensor_core_gemm.sched` (mma.sync m16n8k16, f16 or bf16 operands
//! accumulated in f32):
//!
//! * it computes the reference in the interpreter, f16 and bf16, and its trace round-trips
//!   through text and JSON;
//! * lowered for CUDA it has every tensor-core instruction (fill, ldmatrix of A and B,
//!   mma.sync, store) and 16-byte `cp.async` fetches, and computes the reference in the
//!   GPU-semantics interpreter;
//! * its CUDA C has the PTX instructions of the dtype, and NVRTC compiles it without
//!   spills or a stack frame (the fragments stay in registers) to PTX with `mma.sync`,
//!   `ldmatrix` and `cp.async` (NVRTC is required unless `TESSEL_NO_NVRTC=1`);
//! * a nest that does not match its intrinsic is refused naming the loop, and leaves the
//!   schedule as it was; the lowering refuses what a warp's instruction cannot run.
//!
//! The example needs M and N multiples of 128 and at least 3 reduction steps of 32 (its
//! 3 pipeline stages): 128 x 128 x 96 is its smallest shape, one thread block.

use tessel::interp::{self, check_lowered};
use tessel::ir::printer::print_program;
use tessel::ir::DType;
use tessel::lower::{lower, Backend, KStmt, Lowered, MmaOp, MmaOperand};
use tessel::schedule::{json, replay, text, InstKind, Operand, Schedule};
use tessel::workload;

mod kernel_util;
use kernel_util::statements;

const F16: &str = "matmul:m=128,n=256,k=96,dtype=f16,acc=f32";
const BF16: &str = "matmul:m=128,n=256,k=96,dtype=bf16,acc=f32";
/// One thread block: the GPU-semantics interpreter runs each lane's view of every warp
/// instruction, so this is the shape it can afford.
const SMALLEST_F16: &str = "matmul:m=128,n=128,k=96,dtype=f16,acc=f32";

fn example() -> String {
    let path = format!(
        "{}/examples/schedules/tensor_core_gemm.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The example with its line `old` replaced by the lines `new` (none: removed).
fn edited(old: &str, new: &[&str]) -> String {
    let text = example();
    assert!(
        text.lines().any(|l| l == old),
        "the example has no line {old:?}"
    );
    text.lines()
        .flat_map(|l| if l == old { new.to_vec() } else { vec![l] })
        .map(|l| format!("{l}\n"))
        .collect()
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

fn lower_error(sched: &str, spec: &str, backend: Backend) -> String {
    let sch = schedule(sched, spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    match lower(sch.program(), backend) {
        Ok(_) => panic!("{spec}: lowered for {backend:?}"),
        Err(e) => e.to_string(),
    }
}

/// How many tensor-core instructions of each kind the kernels have: fill, load A, load B,
/// sync, store.
fn mma_counts(l: &Lowered) -> [usize; 5] {
    let mut n = [0; 5];
    for s in statements(l) {
        if let KStmt::Mma(m) = s {
            let kind = match m.op {
                MmaOp::Fill { .. } => 0,
                MmaOp::Load {
                    operand: MmaOperand::A,
                    ..
                } => 1,
                MmaOp::Load {
                    operand: MmaOperand::B,
                    ..
                } => 2,
                MmaOp::Sync { .. } => 3,
                MmaOp::Store { .. } => 4,
                // wgmma's (tests/wgmma.rs); the mma.sync example has none.
                _ => panic!("the mma.sync example lowered to {:?}", m.op),
            };
            n[kind] += 1;
        }
    }
    n
}

#[test]
fn the_example_computes_the_reference_in_f16_and_bf16() {
    for (spec, dtype) in [(F16, DType::F16), (BF16, DType::BF16)] {
        let sch = schedule(&example(), spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let printed = print_program(sch.program());
        for intrin in [
            "mma_fill",
            "mma_load_a",
            "mma_load_b",
            "mma_sync",
            "mma_store",
        ] {
            let ann = format!("annotations={{\"tensorize\": \"{intrin}\"}}");
            assert!(
                printed.contains(&ann),
                "{spec}: no loop tensorized with {intrin}"
            );
        }
        let reference = workload::preset(spec).unwrap().to_program();
        let err =
            interp::check(&reference, sch.program(), 3).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert!(
            err < interp::tolerance(dtype),
            "{spec}: relative error {err}"
        );
    }
}

#[test]
fn the_tensorize_instruction_round_trips_through_text_and_json() {
    let sch = schedule(&example(), F16).unwrap();
    let printed = print_program(sch.program());
    let as_text = text::print(sch.trace());
    assert!(
        as_text.contains("tensorize(i3, intrin=\"mma_sync\")"),
        "{as_text}"
    );
    assert_eq!(&text::parse(&as_text).unwrap(), sch.trace());
    let from_json = json::from_json(&json::to_json(sch.trace())).unwrap();
    assert_eq!(&from_json, sch.trace());
    let again = replay(&from_json, workload::preset(F16).unwrap().to_program(), 0).unwrap();
    assert_eq!(print_program(again.program()), printed);
}

#[test]
fn the_example_lowers_to_mma_instructions_and_runs_with_gpu_semantics() {
    let l = lowered(&example(), SMALLEST_F16);
    // One block of 2 x 2 warps (threadIdx.y), each warp's 32 lanes in x.
    assert_eq!(l.kernels.len(), 1);
    assert_eq!(l.kernels[0].block, [32, 4, 1]);
    let counts = mma_counts(&l);
    assert!(
        counts.iter().all(|n| *n > 0),
        "fill, load A, load B, sync, store: {counts:?}"
    );
    // 16-byte fetches of 8 f16 elements into the pipelined shared buffers.
    let all = statements(&l);
    assert!(
        all.iter()
            .any(|s| matches!(s, KStmt::CpAsync { lanes: 8, .. })),
        "no cp.async of 8 lanes"
    );
    let reference = workload::preset(SMALLEST_F16).unwrap().to_program();
    let err = check_lowered(&reference, &l, 5).unwrap_or_else(|e| panic!("{e}"));
    assert!(err < interp::tolerance(DType::F16), "relative error {err}");
    // bf16 lowers to the same instructions (it runs on the device: tests/gpu.rs).
    let l16 = lowered(&example(), BF16);
    assert_eq!(mma_counts(&l16), counts);
}

#[test]
fn the_cuda_source_has_ldmatrix_mma_sync_and_cp_async() {
    for (spec, ty) in [(F16, "f16"), (BF16, "bf16")] {
        let code = tessel::codegen::cuda::generate(&lowered(&example(), spec))
            .unwrap()
            .code;
        for needle in [
            format!("mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32"),
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16".into(),
            "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16".into(),
            "cp.async.cg.shared.global".into(),
            // Both operands fetched 16 bytes at a time, 16-bit elements as raw bytes.
            "tessel_cp_async16((float*)(A_shared".into(),
            "tessel_cp_async16((float*)(B_shared".into(),
        ] {
            assert!(code.contains(&needle), "{spec}: the CUDA C has no {needle}");
        }
    }
}

#[test]
fn nvrtc_compiles_the_example_to_mma_sync_and_ldmatrix_without_local_memory() {
    if std::env::var("TESSEL_NO_NVRTC").as_deref() == Ok("1") {
        println!("NVRTC skipped (TESSEL_NO_NVRTC=1)");
        return;
    }
    if let Err(msg) = tessel::measure::cuda::nvrtc_available() {
        panic!("{msg} (CI installs it through .ci/test; set TESSEL_NO_NVRTC=1 to skip)");
    }
    for (spec, ty) in [(F16, "f16"), (BF16, "bf16")] {
        let code = tessel::codegen::cuda::generate(&lowered(&example(), spec))
            .unwrap()
            .code;
        // The fragments are register arrays indexed by constants once the loops around the
        // instructions are unrolled: no local memory.
        let cubin = tessel::measure::cuda::compile(&code, "sm_90a")
            .unwrap_or_else(|f| panic!("{spec}: {f:?}"));
        assert_eq!(cubin.info.spill_stores, Some(0), "{spec}");
        assert_eq!(cubin.info.stack_bytes, Some(0), "{spec}");
        let ptx = tessel::measure::cuda::compile_ptx(&code, "sm_90a")
            .unwrap_or_else(|f| panic!("{spec}: {f}"));
        for needle in [
            format!("mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32"),
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16".into(),
            "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16".into(),
            "cp.async.cg.shared.global".into(),
        ] {
            assert!(ptx.contains(&needle), "{spec}: the PTX has no {needle}");
        }
    }
}

#[test]
fn a_nest_that_does_not_match_its_intrinsic_is_refused_naming_the_loop() {
    let sync = "tensorize(i3, intrin=\"mma_sync\")";
    let decompose = "init = decompose_reduction(b0, k0)";
    let reorder = "reorder(i0, j0, i1, j1, k0, k1, i2, j2, i3, j3, k2)";
    // (what, schedule, workload, what the error says)
    let cases: Vec<(&str, String, &str, Vec<&str>)> = vec![
        (
            "rows of 32 where mma_sync has 16",
            edited(
                "i0, i1, i2, i3 = split(i, factors=[None, 2, 4, 16])",
                &["i0, i1, i2, i3 = split(i, factors=[None, 2, 2, 32])"],
            ),
            F16,
            vec!["loop i_3", "its extent is 32, the intrinsic's loop has 16"],
        ),
        (
            "an unknown intrinsic",
            edited(sync, &["tensorize(i3, intrin=\"mma_sink\")"]),
            F16,
            vec!["(tensorize)", "unknown intrinsic \"mma_sink\""],
        ),
        (
            "the update before decompose_reduction",
            edited(decompose, &[]).replace(sync, &format!("{sync}\n{decompose}")),
            F16,
            vec![
                "loop i_3",
                "block C_acc has an init (decompose_reduction first)",
            ],
        ),
        (
            "A's tile read into a local buffer",
            edited(
                "a_fr = cache_read(b0, read_index=0, scope=\"fragment\")",
                &["a_fr = cache_read(b0, read_index=0, scope=\"local\")"],
            ),
            F16,
            vec![
                "loop ax0_1",
                "cannot tensorize with mma_load_a",
                "A_shared_local is local float16, the intrinsic needs fragment",
            ],
        ),
        (
            "M = 120: A's fragment tile guarded",
            example(),
            "matmul:m=120,n=128,k=96,dtype=f16,acc=f32",
            vec![
                "loop ax0_1",
                "cannot tensorize with mma_load_a",
                "block A_shared_fragment is guarded",
            ],
        ),
        (
            "the nest ordered k, j, i (extents 16, 8, 16 as i, j, k)",
            edited(
                reorder,
                &["reorder(i0, j0, i1, j1, k0, k1, i2, j2, k2, j3, i3)"],
            )
            .replace(sync, "tensorize(k2, intrin=\"mma_sync\")"),
            F16,
            vec![
                "loop k_2",
                "the accumulator C_acc_fragment is not indexed one to one",
            ],
        ),
        (
            "the nest ordered j, i, k",
            edited(
                reorder,
                &["reorder(i0, j0, i1, j1, k0, k1, i2, j2, j3, i3, k2)"],
            )
            .replace(sync, "tensorize(j3, intrin=\"mma_sync\")"),
            F16,
            vec!["loop j_3", "its extent is 8, the intrinsic's loop has 16"],
        ),
    ];
    for (what, sched, spec, says) in cases {
        let e = match schedule(&sched, spec) {
            Ok(_) => panic!("{what}: applied"),
            Err(e) => e,
        };
        for s in says {
            assert!(e.contains(s), "{what}: {e:?} does not say {s:?}");
        }
    }
}

#[test]
fn a_refused_tensorize_leaves_the_schedule_unchanged() {
    // The example up to (without) the tensorize of the update, then the primitive called.
    let text = example();
    let upto = text.split("tensorize(i3,").next().unwrap();
    let mut sch = schedule(upto, F16).unwrap();
    let b = sch.get_block("C_acc_update").unwrap();
    let loops = sch.get_loops(b).unwrap();
    // bx, ty, k0, k1, i2, j2, i3, j3, k2
    assert_eq!(loops.len(), 9);
    let (i3, j3) = (loops[6], loops[7]);
    let before = (print_program(sch.program()), sch.trace().insts.len());
    for (l, intrin, says) in [
        (j3, "mma_sync", "loop j_3: cannot tensorize with mma_sync"),
        (
            i3,
            "mma_store",
            "loop j_3: cannot tensorize with mma_store: its body is not one block",
        ),
        (i3, "mma_sink", "unknown intrinsic"),
    ] {
        let e = sch.tensorize(l, intrin).expect_err(intrin).to_string();
        assert!(e.contains(says), "{intrin}: {e}");
        let after = (print_program(sch.program()), sch.trace().insts.len());
        assert!(
            after == before,
            "{intrin}: the refused primitive changed the schedule"
        );
    }
    sch.tensorize(i3, "mma_sync").unwrap();
    let last = sch.trace().insts.last().unwrap();
    assert_eq!(last.kind, InstKind::Tensorize);
    assert_eq!(last.attr("intrin"), Some(&Operand::Str("mma_sync".into())));
}

#[test]
fn lowering_refuses_a_fragment_outside_a_tensorized_loop() {
    let sched = edited("tensorize(w01, intrin=\"mma_store\")", &[]);
    let e = lower_error(&sched, F16, Backend::Cuda);
    assert!(
        e.contains("fragment C_acc_fragment is accessed outside a tensorized loop"),
        "{e}"
    );
}

#[test]
fn lowering_refuses_a_kernel_whose_threadidx_x_is_not_one_warp() {
    // The cooperative fetches with 64 lanes in x (and half the iterations): the kernel
    // launches 64 threads in x, two warps per threadIdx.y.
    let sched = example().replace("factors=[None, 4, 32, 8]", "factors=[None, 4, 64, 8]");
    assert_eq!(sched.matches("[None, 4, 64, 8]").count(), 2);
    let e = lower_error(&sched, F16, Backend::Cuda);
    for s in [
        "loop i_3_init",
        "threadIdx.x to be the 32 lanes of a warp",
        "64 threads in x",
    ] {
        assert!(e.contains(s), "{e:?} does not say {s:?}");
    }
}

#[test]
fn the_cpu_backend_refuses_a_tensorized_loop() {
    // A thread-free schedule (the example's blockIdx would be refused first): the
    // accumulator's fill tensorized, nothing else.
    let sched = "b0 = get_block(\"C_acc\")
b1 = cache_write(b0, write_index=0, scope=\"fragment\")
c = get_block(\"C\")
reverse_compute_inline(c)
i, j, k = get_loops(b0)
init = decompose_reduction(b0, i)
ii, ij = get_loops(init)
tensorize(ii, intrin=\"mma_fill\")
";
    let e = lower_error(
        sched,
        "matmul:m=16,n=8,k=16,dtype=f16,acc=f32",
        Backend::Cpu,
    );
    assert!(
        e.contains("C_acc_fragment is a fragment") && e.contains("cpu backend"),
        "{e}"
    );
    // The example itself is refused too.
    lower_error(&example(), F16, Backend::Cpu);
}

#[test]
fn lowering_refuses_fragments_without_any_tensorized_loop() {
    // Every tensorize removed: the fragments have no lane layout to print (no panic in
    // the code generator: the lowering refuses first).
    let sched: String = example()
        .lines()
        .filter(|l| !l.starts_with("tensorize("))
        .map(|l| format!("{l}\n"))
        .collect();
    let e = lower_error(&sched, F16, Backend::Cuda);
    assert!(e.contains("is not used by any tensorized loop"), "{e}");
}

#[test]
fn lowering_refuses_a_tile_that_depends_on_the_lane() {
    // The rows of C spread over the 32 lanes (threadIdx.x), each lane's 16 x 8 tile filled
    // by a warp's instruction: the lanes would each give another tile.
    let sched = "b0 = get_block(\"C_acc\")
b1 = cache_write(b0, write_index=0, scope=\"fragment\")
c = get_block(\"C\")
reverse_compute_inline(c)
i, j, k = get_loops(b0)
i0, i1, i2 = split(i, factors=[None, 32, 16])
bind(i0, thread=\"blockIdx.x\")
bind(i1, thread=\"threadIdx.x\")
reverse_compute_at(b1, i1)
init = decompose_reduction(b0, i2)
_, _, ii, ij = get_loops(init)
tensorize(ii, intrin=\"mma_fill\")
";
    let e = lower_error(
        sched,
        "matmul:m=512,n=8,k=16,dtype=f16,acc=f32",
        Backend::Cuda,
    );
    assert!(
        e.contains("loop i_2_init") && e.contains("depends on threadIdx.x"),
        "{e}"
    );
}

#[test]
fn fragments_moved_out_to_the_shared_stage_compute_the_reference() {
    // `compute_at` of the fragment stages, already at the 16-deep step `k1`, out to the
    // stage loop `k0`: each loads a whole stage's tiles before its mma steps (two tiles
    // of 16 along k), and the example still computes the reference and lowers.
    let text = example()
        .replace(
            "compute_at(b_sh, k0)\n",
            "compute_at(b_sh, k0)\ncompute_at(a_fr, k0)\ncompute_at(b_fr, k0)\n",
        )
        .replace(
            "_, _, _, _, fa0, fa1 = get_loops(a_fr)\nfa00, fa01 = split(fa0, factors=[None, 16])\n",
            "_, _, _, fa0, fa1 = get_loops(a_fr)\nfa00, fa01 = split(fa0, factors=[None, 16])\n\
             fa10, fa11 = split(fa1, factors=[None, 16])\nreorder(fa00, fa10, fa01, fa11)\n",
        )
        .replace(
            "_, _, _, _, fb0, fb1 = get_loops(b_fr)\nfb10, fb11 = split(fb1, factors=[None, 8])\n\
             reorder(fb10, fb0, fb11)\ntensorize(fb0, intrin=\"mma_load_b\")\n",
            "_, _, _, fb0, fb1 = get_loops(b_fr)\nfb00, fb01 = split(fb0, factors=[None, 16])\n\
             fb10, fb11 = split(fb1, factors=[None, 8])\nreorder(fb00, fb10, fb01, fb11)\n\
             tensorize(fb01, intrin=\"mma_load_b\")\n",
        )
        .replace("value=[0, 0, 2])", "value=[0, 0, 2, 2, 2])");
    assert!(text.contains("compute_at(a_fr, k0)") && text.contains("tensorize(fb01"));
    let sch = schedule(&text, SMALLEST_F16).unwrap();
    let reference = workload::preset(SMALLEST_F16).unwrap().to_program();
    interp::check(&reference, sch.program(), 1).unwrap();
    // The fragment of A holds the stage's 64 x 32 tile of each warp: 8 tiles of 16 x 16.
    let l = lower(sch.program(), Backend::Cuda).unwrap();
    let a_frag = l.kernels[0]
        .allocs
        .iter()
        .find(|a| l.program.buffer(a.buffer).name == "A_shared_fragment")
        .unwrap();
    assert_eq!(a_frag.size, 64 * 32);
}
