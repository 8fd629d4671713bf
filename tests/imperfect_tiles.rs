//! Imperfect tiles (`sample_tile`): a GEMM whose every axis is tiled by sizes that do not
//! divide it, staged in shared memory by a cooperative fetch. The guards are what keeps
//! it correct: with them the program verifies, computes the reference in the serial and
//! the GPU-semantics interpreters (intermediates NaN-poisoned) and compiles with NVRTC;
//! with the fetch's guard or the update's guard removed, the verifier and the
//! interpreter catch the out-of-bounds accesses. A decision that pads more than the
//! bound is refused with a message naming the loop.

use tessel::ir::Program;
use tessel::lower::{lower, Backend, KStmt};
use tessel::schedule::{json, replay, text, Schedule};
use tessel::workload;

/// 37x29x19 tiled as 3x4x4 = 48, 2x4x4 = 32 and 3x8 = 24: every axis padded.
const TRACE: &str = r#"b0 = get_block("C")
b1 = cache_write(b0, write_index=0, scope="local")
i, j, k = get_loops(b0)
v0, v1, v2 = sample_tile(i, n=3, max_innermost_factor=16, max_waste=0.25, decision=[3, 4, 4])
v3, v4, v5 = sample_tile(j, n=3, max_innermost_factor=16, max_waste=0.25, decision=[2, 4, 4])
v6, v7 = sample_tile(k, n=2, max_innermost_factor=16, max_waste=0.25, decision=[3, 8])
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
b4 = decompose_reduction(b0, k0)
"#;

const SPEC: &str = "matmul:m=37,n=29,k=19,layout=nt";

fn scheduled(trace: &str) -> (Program, Schedule) {
    let w = workload::preset(SPEC).unwrap();
    let t = text::parse(trace).unwrap_or_else(|e| panic!("{e}"));
    let sch = replay(&t, w.to_program(), 0).unwrap_or_else(|e| panic!("{e}"));
    (w.to_program(), sch)
}

/// The program with the predicate of block `name` removed.
fn unguarded(p: &Program, name: &str) -> Program {
    let mut p = p.clone();
    let b = p
        .blocks_in_order()
        .into_iter()
        .find(|b| p.block(*b).name == name)
        .unwrap_or_else(|| panic!("no block {name}"));
    assert!(p.block(b).predicate.is_some(), "{name} has no guard");
    p.block_mut(b).predicate = None;
    p
}

#[test]
fn guarded_imperfect_tiles_compute_the_reference_and_compile() {
    let (reference, sch) = scheduled(TRACE);
    let p = sch.program();
    tessel::ir::verify::verify(p).unwrap();
    let err = tessel::interp::check(&reference, p, 3).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    let lowered = lower(p, Backend::Cuda).unwrap();
    let err = tessel::interp::check_lowered(&reference, &lowered, 4).unwrap();
    assert!(err < tessel::interp::TOLERANCE, "relative error {err}");
    let cpu = lower(p, Backend::Cpu);
    assert!(cpu.is_err(), "thread bindings have no CPU meaning");
    if std::env::var("TESSEL_NO_NVRTC").as_deref() != Ok("1") {
        let src = tessel::codegen::cuda::generate(&lowered).unwrap();
        tessel::measure::cuda::compile(&src.code, "sm_90a")
            .unwrap_or_else(|f| panic!("NVRTC: {f}\n{}", src.code));
    }
}

#[test]
fn a_missing_fetch_guard_is_caught_by_the_verifier_and_the_interpreter() {
    let (reference, sch) = scheduled(TRACE);
    let broken = unguarded(sch.program(), "A_shared");
    let v = tessel::ir::verify::verify(&broken).unwrap_err().to_string();
    assert!(v.contains("A_shared"), "{v}");
    let e = tessel::interp::check(&reference, &broken, 3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("block A_shared: iter var"), "{e}");
    assert!(e.contains("is outside [0, 19)"), "{e}");
}

/// Replaces every `if` whose body stores into `buffer` by its body.
fn strip_guards(stmts: &mut Vec<KStmt>, p: &Program, buffer: &str) {
    let mut out = Vec::new();
    for mut s in stmts.drain(..) {
        match &mut s {
            KStmt::If { then, .. }
                if then.iter().any(
                    |t| matches!(t, KStmt::Store { buffer: b, .. } if p.buffer(*b).name == buffer),
                ) =>
            {
                out.append(then);
                continue;
            }
            KStmt::If { then: body, .. } | KStmt::For { body, .. } => strip_guards(body, p, buffer),
            _ => {}
        }
        out.push(s);
    }
    *stmts = out;
}

#[test]
fn a_kernel_without_the_fetch_guard_reads_out_of_bounds_and_is_caught() {
    let (reference, sch) = scheduled(TRACE);
    let mut lowered = lower(sch.program(), Backend::Cuda).unwrap();
    let before = format!("{:?}", lowered.kernels);
    let p = lowered.program.clone();
    for k in &mut lowered.kernels {
        strip_guards(&mut k.body, &p, "B_shared");
    }
    assert_ne!(before, format!("{:?}", lowered.kernels), "no guard found");
    let e = tessel::interp::check_lowered(&reference, &lowered, 4)
        .unwrap_err()
        .to_string();
    assert!(e.contains("out of bounds"), "{e}");
}

#[test]
fn a_missing_update_guard_is_caught() {
    let (reference, sch) = scheduled(TRACE);
    let broken = unguarded(sch.program(), "C_update");
    assert!(tessel::ir::verify::verify(&broken).is_err());
    assert!(tessel::interp::check(&reference, &broken, 3).is_err());
}

#[test]
fn a_tile_that_pads_too_much_is_refused_naming_the_loop() {
    let greedy = TRACE.replace("decision=[3, 8]", "decision=[1, 32]");
    let w = workload::preset(SPEC).unwrap();
    let t = text::parse(&greedy).unwrap();
    let Err(e) = replay(&t, w.to_program(), 0) else {
        panic!("a tile padding 13 of 32 iterations was accepted");
    };
    let e = e.to_string();
    assert!(e.contains("sample_tile(k) of loop k"), "{e}");
    assert!(e.contains("more than max_waste 0.25"), "{e}");
}

#[test]
fn sample_tile_round_trips_through_text_and_json() {
    let (_, sch) = scheduled(TRACE);
    let t = sch.trace();
    assert_eq!(&text::parse(&text::print(t)).unwrap(), t);
    assert_eq!(&json::from_json(&json::to_json(t)).unwrap(), t);
    assert!(text::print(t).contains(
        "v6, v7 = sample_tile(k, n=2, max_innermost_factor=16, max_waste=0.25, decision=[3, 8])"
    ));
}
