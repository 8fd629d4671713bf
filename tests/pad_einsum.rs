//! `pad_einsum`: a GEMM with prime extents padded to multiples, so that its tiles divide
//! the padded extents. The zero-filling pads go into the shared-memory fetch, the copy
//! back to the original shape into the write-back: the update in the innermost loops has
//! no guard, and the program still computes the reference (serial and GPU-semantics
//! interpreters, intermediates NaN-poisoned) and compiles with NVRTC. What the primitive
//! cannot pad exactly is refused with the reason.

use tessel::ir::Program;
use tessel::lower::{lower, Backend, KStmt};
use tessel::schedule::{replay, text, IntArg, Schedule};
use tessel::workload;

/// 37x29x19 (NT) padded to 48x32x24 and tiled exactly: 3x4x4, 2x4x4 and 3x8.
const TRACE: &str = r#"b0 = get_block("C")
pad_einsum(b0, padding=[16, 16, 8])
b1 = cache_write(b0, write_index=0, scope="local")
b8 = get_block("C_crop")
reverse_compute_inline(b8)
i, j, k = get_loops(b0)
v0, v1, v2 = sample_perfect_tile(i, n=3, max_innermost_factor=16, decision=[3, 4, 4])
v3, v4, v5 = sample_perfect_tile(j, n=3, max_innermost_factor=16, decision=[2, 4, 4])
v6, v7 = sample_perfect_tile(k, n=2, max_innermost_factor=16, decision=[3, 8])
i0, i1, i2 = split(i, factors=[v0, v1, v2])
j0, j1, j2 = split(j, factors=[v3, v4, v5])
k0, k1 = split(k, factors=[v6, v7])
reorder(i0, j0, i1, j1, k0, k1, i2, j2)
f0 = fuse(i0, j0)
bind(f0, thread="blockIdx.x")
f1 = fuse(i1, j1)
bind(f1, thread="threadIdx.x")
reverse_compute_at(b1, f1)
b2 = cache_read(b0, read_index=0, scope="shared")
compute_at(b2, k0)
_, _, _, a0, a1 = get_loops(b2)
a = fuse(a0, a1)
a_0, a_1 = split(a, factors=[None, v1 * v4])
bind(a_1, thread="threadIdx.x")
b3 = cache_read(b0, read_index=1, scope="shared")
compute_at(b3, k0)
_, _, _, c0, c1 = get_loops(b3)
c = fuse(c0, c1)
c_0, c_1 = split(c, factors=[None, v1 * v4])
bind(c_1, thread="threadIdx.x")
b5 = get_block("A_pad")
compute_inline(b5)
b6 = get_block("B_pad")
compute_inline(b6)
b4 = decompose_reduction(b0, k0)
"#;

const SPEC: &str = "matmul:m=37,n=29,k=19,layout=nt";

fn scheduled(spec: &str, trace: &str) -> (Program, Schedule) {
    let w = workload::preset(spec).unwrap();
    let t = text::parse(trace).unwrap_or_else(|e| panic!("{e}"));
    let sch = replay(&t, w.to_program(), 0).unwrap_or_else(|e| panic!("{e}"));
    (w.to_program(), sch)
}

fn block<'p>(p: &'p Program, name: &str) -> &'p tessel::ir::Block {
    let b = p
        .blocks_in_order()
        .into_iter()
        .find(|b| p.block(*b).name == name)
        .unwrap_or_else(|| panic!("no block {name}"));
    p.block(b)
}

/// Whether a store into `buffer` sits under an `if` in `stmts`.
fn guarded_store(stmts: &[KStmt], p: &Program, buffer: &str, under_if: bool) -> bool {
    stmts.iter().any(|s| match s {
        KStmt::Store { buffer: b, .. } => under_if && p.buffer(*b).name == buffer,
        KStmt::If { then, .. } => guarded_store(then, p, buffer, true),
        KStmt::For { body, .. } => guarded_store(body, p, buffer, under_if),
        _ => false,
    })
}

#[test]
fn a_padded_gemm_computes_the_reference_with_an_unguarded_update() {
    let (reference, sch) = scheduled(SPEC, TRACE);
    let p = sch.program();
    tessel::ir::verify::verify(p).unwrap();
    // The update and the init run unguarded over the padded tiles; the write-back to the
    // original 37x29 output keeps the only guard; the fetches fill zeros.
    assert!(block(p, "C_update").predicate.is_none());
    assert!(block(p, "C_pad_local").predicate.is_some());
    for fetch in ["A_pad_shared", "B_pad_shared"] {
        let value = &block(p, fetch).body.value;
        assert!(
            matches!(value, tessel::ir::Expr::Select(..)),
            "{fetch}: {value:?}"
        );
    }
    let err = tessel::interp::check(&reference, p, 3).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    let lowered = lower(p, Backend::Cuda).unwrap();
    let err = tessel::interp::check_lowered(&reference, &lowered, 4).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    let lp = &lowered.program;
    for k in &lowered.kernels {
        assert!(
            !guarded_store(&k.body, lp, "C_pad_local", false),
            "the accumulator's update is guarded"
        );
        assert!(
            guarded_store(&k.body, lp, "C", false),
            "the write-back lost its guard"
        );
    }
    if std::env::var("TESSEL_NO_NVRTC").as_deref() != Ok("1") {
        let src = tessel::codegen::cuda::generate(&lowered).unwrap();
        tessel::measure::cuda::compile(&src.code, "sm_90a")
            .unwrap_or_else(|f| panic!("NVRTC: {f}\n{}", src.code));
    }
}

#[test]
fn the_trace_replays_to_the_same_program_and_round_trips() {
    let (_, sch) = scheduled(SPEC, TRACE);
    let printed = text::print(sch.trace());
    assert!(
        printed.contains("pad_einsum(b0, padding=[16, 16, 8])"),
        "{printed}"
    );
    let (_, again) = scheduled(SPEC, &printed);
    assert_eq!(
        tessel::ir::printer::print_program(again.program()),
        tessel::ir::printer::print_program(sch.program())
    );
}

/// The name of the program's (first) reduction block: a conv's main block.
fn reduction_block(sch: &Schedule) -> String {
    let p = sch.program();
    let b = p
        .blocks_in_order()
        .into_iter()
        .find(|b| p.block(*b).is_reduction())
        .unwrap();
    p.block(b).name.clone()
}

fn main_block(sch: &mut Schedule, name: &str) -> tessel::schedule::BlockRv {
    sch.get_block(name).unwrap()
}

#[test]
fn padding_that_changes_nothing_leaves_the_program_as_it_is() {
    let w = workload::preset("matmul:32x16x8").unwrap();
    let mut sch = Schedule::new(w.to_program(), 0);
    let b = main_block(&mut sch, "C");
    let before = tessel::ir::printer::print_program(sch.program());
    sch.pad_einsum(b, &[IntArg::Lit(16), IntArg::Lit(16), IntArg::Lit(8)])
        .unwrap();
    assert_eq!(tessel::ir::printer::print_program(sch.program()), before);
}

#[test]
fn what_cannot_be_padded_exactly_is_refused_with_the_reason() {
    // A convolution reads its input at `p + r`: its window axes cannot be padded.
    let w = workload::preset("conv2d_nchw:n=1,c=3,h=7,w=7,k=5,r=3,s=3,stride=1,pad=0").unwrap();
    let mut sch = Schedule::new(w.to_program(), 0);
    let name = reduction_block(&sch);
    let b = main_block(&mut sch, &name);
    let pad = vec![IntArg::Lit(2); 7];
    let e = sch.pad_einsum(b, &pad).unwrap_err().to_string();
    assert!(e.contains("pad_einsum of block"), "{e}");
    assert!(e.contains("inside an index expression"), "{e}");
    // A factor that does not use the padded reduction variable would add non-zero terms.
    let src = "input A: f32[20, 19]\ninput s: f32[20]\nC[i, j] = sum(A[i, k] * s[j], k)\n";
    let w = workload::parse(src).unwrap();
    let mut sch = Schedule::new(w.to_program(), 0);
    let b = main_block(&mut sch, "C");
    let before = tessel::ir::printer::print_program(sch.program());
    let e = sch
        .pad_einsum(b, &[IntArg::Lit(1), IntArg::Lit(1), IntArg::Lit(16)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("s does not use the padded reduction variable"),
        "{e}"
    );
    assert_eq!(tessel::ir::printer::print_program(sch.program()), before);
    // Its spatial axes pad exactly.
    sch.pad_einsum(b, &[IntArg::Lit(16), IntArg::Lit(16), IntArg::Lit(1)])
        .unwrap();
    let err = tessel::interp::check(&w.to_program(), sch.program(), 5).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    // One padding per iteration variable.
    let e = sch
        .pad_einsum(b, &[IntArg::Lit(16)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("one factor >= 1 per iteration variable"), "{e}");
}

/// A convolution's batch and channel axes (read as whole indices) pad exactly, its window
/// axes are refused by name; `paddable` says which is which; the padded program computes
/// the reference, NCHW and NHWC, stride 1 and 2.
#[test]
fn a_convolution_pads_its_batch_and_channel_axes() {
    for spec in [
        "conv2d_nchw:n=3,c=5,h=9,w=8,k=7,r=3,s=3,stride=1,pad=1",
        "conv2d_nhwc:n=2,c=13,h=9,w=9,k=11,r=3,s=2,stride=2,pad=1",
    ] {
        let w = workload::preset(spec).unwrap();
        let program = w.to_program();
        let mut sch = Schedule::new(program.clone(), 0);
        let name = reduction_block(&sch);
        let b = main_block(&mut sch, &name);
        let (paddable, window) = {
            let p = sch.program();
            let id = sch.block_id(b).unwrap();
            let ivs: Vec<String> = p
                .block(id)
                .iter_vars
                .iter()
                .map(|iv| p.var_name(iv.var).to_string())
                .collect();
            let ok = tessel::schedule::pad_einsum::paddable(p, id).unwrap();
            (ok, ivs)
        };
        // n, k, c (whole indices) yes; p, q, r, s (in `p * stride + r`) no.
        assert_eq!(
            paddable.iter().filter(|x| **x).count(),
            3,
            "{spec}: {window:?}"
        );
        let pad: Vec<IntArg> = paddable
            .iter()
            .map(|ok| IntArg::Lit(if *ok { 4 } else { 1 }))
            .collect();
        sch.pad_einsum(b, &pad).unwrap();
        let err = tessel::interp::check(&program, sch.program(), 5).unwrap();
        assert!(
            err < tessel::interp::TOLERANCE,
            "{spec}: relative error {err}"
        );
        let again = replay(sch.trace(), program.clone(), 0).unwrap();
        assert_eq!(
            tessel::ir::printer::print_program(again.program()),
            tessel::ir::printer::print_program(sch.program())
        );
        // A window axis is refused by name.
        let mut sch = Schedule::new(program, 0);
        let b = main_block(&mut sch, &name);
        let pad: Vec<IntArg> = paddable
            .iter()
            .map(|ok| IntArg::Lit(if *ok { 1 } else { 4 }))
            .collect();
        let e = sch.pad_einsum(b, &pad).unwrap_err().to_string();
        assert!(e.contains("inside an index expression"), "{spec}: {e}");
    }
}

/// A convolution's output pixels, which the data are read at inside expressions
/// (`p * stride + r`), pad exactly too: the data are read through a zero-filled copy
/// grown to the largest index the padded pixels reach (their outputs are cropped). The
/// padded program computes the reference, NCHW and NHWC, stride 1 and 2, and replays.
#[test]
fn a_convolutions_pixels_pad_by_growing_the_data_they_read() {
    for spec in [
        "conv2d_nchw:n=1,c=5,h=9,w=7,k=6,r=3,s=3,stride=1,pad=1",
        "conv2d_nhwc:n=2,c=3,h=11,w=13,k=4,r=3,s=2,stride=2,pad=1",
    ] {
        let w = workload::preset(spec).unwrap();
        let program = w.to_program();
        let mut sch = Schedule::new(program.clone(), 0);
        let name = reduction_block(&sch);
        let b = main_block(&mut sch, &name);
        let (pad, data_before) = {
            let p = sch.program();
            let id = sch.block_id(b).unwrap();
            let paddable = tessel::schedule::pad_einsum::paddable(p, id).unwrap();
            // The spatial variables `paddable` leaves out: the output pixels.
            let pad: Vec<IntArg> = p
                .block(id)
                .iter_vars
                .iter()
                .zip(&paddable)
                .map(|(iv, ok)| {
                    let pixel = !ok && iv.kind == tessel::ir::IterKind::Spatial;
                    IntArg::Lit(if pixel { 4 } else { 1 })
                })
                .collect();
            assert_eq!(
                pad.iter().filter(|x| **x == IntArg::Lit(4)).count(),
                2,
                "{spec}"
            );
            (pad, data_read(p, id))
        };
        sch.pad_einsum(b, &pad).unwrap();
        let err = tessel::interp::check(&program, sch.program(), 5).unwrap();
        assert!(
            err < tessel::interp::TOLERANCE,
            "{spec}: relative error {err}"
        );
        let p = sch.program();
        let id = p.find_block(&name)[0];
        let data_after = data_read(p, id);
        assert!(
            data_after.iter().zip(&data_before).all(|(a, b)| a >= b)
                && data_after
                    .iter()
                    .zip(&data_before)
                    .filter(|(a, b)| a > b)
                    .count()
                    == 2,
            "{spec}: {data_before:?} -> {data_after:?}"
        );
        let again = replay(sch.trace(), program, 0).unwrap();
        assert_eq!(
            tessel::ir::printer::print_program(again.program()),
            tessel::ir::printer::print_program(sch.program())
        );
    }
}

/// The shape of the buffer block `b` reads at index expressions (a conv's data).
fn data_read(p: &Program, b: tessel::ir::BlockId) -> Vec<i64> {
    let (buf, _) = p
        .block_reads(b)
        .into_iter()
        .find(|(_, idx)| idx.iter().any(|e| !matches!(e, tessel::ir::Expr::Var(_))))
        .unwrap();
    p.buffer(buf).shape.clone()
}
