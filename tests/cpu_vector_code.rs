//! The CPU back end's vector code, compiled with the real C compiler: a micro-kernel of
//! the register-tile sketch (4 x 16 accumulators, a packed 16 x 16 panel of B, K blocked)
//! becomes, in the assembly of its innermost loop, FMAs on vector registers (`ymm` with
//! AVX2, `zmm` with AVX-512), built with the flags the fingerprint's ISA gives; `exp`,
//! `tanh`, `max`, `min`, `abs` and selects on values vectorized, built, run and checked.

mod cli_util;

use cli_util::tessel;
use tessel::codegen;
use tessel::lower::{lower, Backend};
use tessel::measure::cpu::CpuToolchain;
use tessel::schedule::{replay, text};
use tessel::target::cpu::VectorIsa;

/// A register-tile sample of `matmul:64x64x64` as the sketch writes it (decisions fixed).
const MICRO_KERNEL: &str = r#"
b0 = get_block("C")
b1 = cache_write(b0, write_index=0, scope="local")
i0, i1, r0 = get_loops(b0)
i1_0, i1_1 = split(i1, factors=[None, 8])
v0, v1, v2 = sample_perfect_tile(i1_0, n=3, max_innermost_factor=4, decision=[2, 2, 2])
i1_0_0, i1_0_1, i1_0_2 = split(i1_0, factors=[v0, v1, v2])
v3, v4, v5 = sample_perfect_tile(i0, n=3, max_innermost_factor=6, decision=[2, 8, 4])
i0_0, i0_1, i0_2 = split(i0, factors=[v3, v4, v5])
v6, v7 = sample_perfect_tile(r0, n=2, max_innermost_factor=64, decision=[4, 16])
r0_0, r0_1 = split(r0, factors=[v6, v7])
reorder(i0_0, i1_0_0, r0_0, i1_0_1, i0_1, r0_1, i0_2, i1_0_2, i1_1)
f = fuse(i0_0, i1_0_0)
parallel(f)
reverse_compute_at(b1, f)
f_1, ax0, ax1 = get_loops(b1)
vectorize(ax1)
b2 = cache_read(b0, read_index=1, scope="local")
compute_at(b2, i1_0_1)
f_2, r0_0_1, i1_0_1_1, ax0_1, ax1_1 = get_loops(b2)
vectorize(ax1_1)
unroll(i0_2)
nr = fuse(i1_0_2, i1_1)
vectorize(nr)
b3 = decompose_reduction(b0, r0_0)
"#;

/// A register tile of an NCHW conv (`lanes` the vector width in floats): `rows` (2, 3,
/// 4 or 6) output columns x 2 vectors of output channels accumulated across the
/// reduction `c_1, r_1, s_1`, with two spatial loops (`k_1`, `p_1`) between its
/// reduction blocks and the one in registers, the weights packed channels last once per
/// call.
fn conv_tile(lanes: i64, rows: i64) -> (String, String) {
    let spec = format!(
        "conv2d_nchw:n=1,c=32,h=12,w=12,k={},r=3,s=3,stride=1,pad=1",
        4 * lanes
    );
    let trace = format!(
        r#"
b0 = get_block("t3")
b1 = cache_write(b0, write_index=0, scope="local")
n, k, p, q, c, r, s = get_loops(b0)
k_0, k_v = split(k, factors=[None, {lanes}])
k_0_0, k_1, k_2 = split(k_0, factors=[1, 2, 2])
q_0, q_1, q_2 = split(q, factors=[1, {}, {rows}])
c_0, c_1 = split(c, factors=[2, 16])
r_0, r_1 = split(r, factors=[3, 1])
s_0, s_1 = split(s, factors=[1, 3])
p_0, p_1 = split(p, factors=[None, 6])
reorder(n, p_0, q_0, k_0_0, c_0, r_0, s_0, k_1, p_1, q_1, c_1, r_1, s_1, q_2, k_2, k_v)
f = fuse(n, p_0, q_0, k_0_0)
parallel(f)
reverse_compute_at(b1, f)
transform_layout(b0, buffer_index=0, permutation=[0, 2, 3, 1])
b2 = cache_read(b0, read_index=1, scope="global")
transform_layout(b2, buffer_index=0, permutation=[1, 2, 3, 0])
unroll(q_2)
nr = fuse(k_2, k_v)
vectorize(nr)
b3 = decompose_reduction(b0, c_0)
"#,
        12 / rows
    );
    (spec, trace)
}

/// The C source of `spec` scheduled by `trace` (on its canonical program, as the tuner
/// schedules it: blocks `t0`, `t1`, ...).
fn c_source(spec: &str, trace: &str) -> String {
    let workload = tessel::workload::preset(spec).expect("preset");
    let program = tessel::database::canonical_program(&workload).expect("canonical program");
    let trace = text::parse(trace).expect("trace parses");
    let sch = replay(&trace, program, 0).expect("schedule applies");
    let lowered = lower(sch.program(), Backend::Cpu).expect("lowers");
    codegen::cpu::generate(&lowered).expect("generates").code
}

/// The C source of the micro-kernel.
fn source() -> String {
    let program = tessel::workload::preset("matmul:64x64x64")
        .expect("preset")
        .to_program();
    let trace = text::parse(MICRO_KERNEL).expect("trace parses");
    let sch = replay(&trace, program, 0).expect("schedule applies");
    let lowered = lower(sch.program(), Backend::Cpu).expect("lowers");
    codegen::cpu::generate(&lowered).expect("generates").code
}

/// The host's ISA and the register prefix its FMAs use, or `None` (the test is skipped)
/// where it has no x86 FMA.
fn x86_fma_isa() -> Option<(VectorIsa, &'static str)> {
    let isa = VectorIsa::host().expect("TESSEL_CPU_ISA names an ISA this CPU runs");
    match isa {
        VectorIsa::Avx512f => Some((isa, "%zmm")),
        VectorIsa::Avx2Fma => Some((isa, "%ymm")),
        _ => {
            eprintln!(
                "skipped: the host ISA is {}, no x86 FMA to look for",
                isa.name()
            );
            None
        }
    }
}

/// `code` compiled to assembly with the flags of `isa`.
fn assembly(code: &str, isa: VectorIsa) -> String {
    let tc = CpuToolchain::detect().expect("a C compiler");
    let dir = tempfile::tempdir().expect("tempdir");
    let c_path = dir.path().join("k.c");
    let s_path = dir.path().join("k.s");
    std::fs::write(&c_path, code).expect("write");
    let flags: Vec<String> = CpuToolchain::flags_for(isa)
        .into_iter()
        .filter(|f| f != "-shared")
        .collect();
    let status = std::process::Command::new(&tc.cc)
        .args(&flags)
        .arg("-S")
        .arg("-o")
        .arg(&s_path)
        .arg(&c_path)
        .status()
        .expect("cc runs");
    assert!(status.success(), "{} {flags:?} -S failed", tc.cc);
    std::fs::read_to_string(&s_path).expect("assembly")
}

/// The innermost loops of an assembly listing: for each jump back to a label above it,
/// the lines from that label to the jump, kept when no other such loop lies inside.
fn innermost_loops(asm: &str) -> Vec<Vec<&str>> {
    let lines: Vec<&str> = asm.lines().map(str::trim).collect();
    let label_at = |name: &str| lines.iter().position(|l| l.strip_suffix(':') == Some(name));
    let loops: Vec<(usize, usize)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with('j'))
        .filter_map(|(j, l)| {
            let target = l.split_whitespace().nth(1)?;
            label_at(target)
                .filter(|start| *start < j)
                .map(|start| (start, j))
        })
        .collect();
    loops
        .iter()
        .filter(|(s, e)| {
            !loops
                .iter()
                .any(|(s2, e2)| (s2, e2) != (s, e) && s <= s2 && e2 <= e)
        })
        .map(|(s, e)| lines[*s..=*e].to_vec())
        .collect()
}

#[test]
fn the_micro_kernel_is_fmas_on_vector_registers() {
    let code = source();
    // The generator's vector code, not the compiler's auto-vectorizer, makes the FMAs.
    assert!(code.contains("tessel_vload(&B_local["), "{code}");
    let Some((isa, register)) = x86_fma_isa() else {
        return;
    };
    let asm = assembly(&code, isa);
    let fma_on_vectors =
        |l: &&&str| l.starts_with("vfmadd") && l.contains("ps") && l.contains(register);
    let best = innermost_loops(&asm)
        .iter()
        .map(|body| body.iter().filter(fma_on_vectors).count())
        .max()
        .unwrap_or(0);
    // 4 rows x 16 lanes: 8 FMAs per k step with AVX2, 4 with AVX-512, in one loop whose
    // body does nothing else but load, broadcast and count.
    let want = (4 * 16 / isa.f32_lanes()) as usize;
    assert!(
        best >= want,
        "the innermost loops have at most {best} vfmadd..ps on {register} ({want} wanted):\n{asm}"
    );
}

#[test]
fn a_register_tiles_accumulators_stay_in_registers_across_the_reduction() {
    let Some((isa, register)) = x86_fma_isa() else {
        return;
    };
    // 12 accumulators of 32 vector registers (AVX-512), 8 of 16 (AVX2), leaving room for
    // the weights of the three `s` taps that gcc unrolls.
    let rows = if isa.vector_registers() >= 32 { 6 } else { 4 };
    let (spec, trace) = conv_tile(isa.f32_lanes(), rows);
    let code = c_source(&spec, &trace);
    // The tile's accumulators are reached through a pointer declared before the
    // reduction chain, invariant in it.
    assert!(
        code.contains("float *tessel_acc0 = &t3_local[") && code.contains("(&tessel_acc0["),
        "{code}"
    );
    let asm = assembly(&code, isa);
    let fma_on_vectors =
        |l: &&&str| l.starts_with("vfmadd") && l.contains("ps") && l.contains(register);
    // A vector register stored to memory: `vmov..ps %zmm3, 64(%rax)`.
    let vector_store = |l: &&&str| {
        l.starts_with("vmov")
            && l.split_once(char::is_whitespace)
                .and_then(|(_, ops)| ops.split_once(','))
                .is_some_and(|(src, dst)| src.trim().starts_with(register) && dst.contains('('))
    };
    let loops = innermost_loops(&asm);
    let tile = loops
        .iter()
        .max_by_key(|body| body.iter().filter(fma_on_vectors).count())
        .expect("an innermost loop");
    // The tile's FMAs, for each of the 3 `s` taps (unrolled by gcc or not).
    let fmas = tile.iter().filter(fma_on_vectors).count();
    assert!(
        fmas >= 2 * rows as usize,
        "{fmas} FMAs:\n{}",
        tile.join("\n")
    );
    assert!(
        !tile.iter().any(|l| vector_store(&l)),
        "the loop of the tile's FMAs stores vector registers to memory:\n{}",
        tile.join("\n")
    );
}

/// A softmax, a GELU (tanh form), a leaky relu written as a select on values, a relu, a
/// `min` and an `abs`, each elementwise stage vectorized over a row of 1000 (whole
/// vectors, then a half-width step where the width leaves one).
const ELEMENTWISE: &str = "workload softmax_gelu
input X: f32[6, 1000]
M[i] = max_reduce(X[i, k], k: 1000)
E[i, j] = exp(X[i, j] - M[i])
S[i] = sum(E[i, k], k: 1000)
Y[i, j] = E[i, j] / S[i]
G[i, j] = 0.5 * X[i, j] * (1.0 + tanh(0.7978845608 * (X[i, j] + 0.044715 * X[i, j] * X[i, j] * X[i, j])))
L[i, j] = if_then_else(G[i, j] > 0.0, G[i, j], 0.01 * G[i, j]) + relu(Y[i, j]) + abs(min(X[i, j], 0.5))
";

const ELEMENTWISE_SCHEDULE: &str = "b0 = get_block(\"E\")
i0, j0 = get_loops(b0)
vectorize(j0)
b1 = get_block(\"Y\")
i1, j1 = get_loops(b1)
vectorize(j1)
b2 = get_block(\"G\")
i2, j2 = get_loops(b2)
vectorize(j2)
b3 = get_block(\"L\")
i3, j3 = get_loops(b3)
vectorize(j3)
";

#[test]
fn exp_tanh_max_and_selects_run_as_vector_code_and_check() {
    let dir = tempfile::tempdir().unwrap();
    let (w, s) = (dir.path().join("w.tw"), dir.path().join("w.sched"));
    std::fs::write(&w, ELEMENTWISE).unwrap();
    std::fs::write(&s, ELEMENTWISE_SCHEDULE).unwrap();
    let (w, s) = (w.to_str().unwrap(), s.to_str().unwrap());
    let (ok, code, err) = tessel(&["show", w, "--schedule", s, "--emit", "c"]);
    assert!(ok, "{err}");
    for helper in ["vexp(", "vtanh(", "vmax(", "vmin(", "vabs(", "vblend("] {
        assert!(
            code.contains(&format!("tessel_{helper}")),
            "{helper}: {code}"
        );
    }
    // Built by the system compiler, run on NaN-poisoned outputs, checked against the
    // reference interpreter.
    let (ok, out, err) = tessel(&["run", w, "--schedule", s, "--target", "cpu"]);
    assert!(ok, "{err}");
    assert!(out.contains("check     ok: relative error"), "{out}");
}

/// A row of 37 in vector steps of 16 (an imperfect split): the steps whose lanes all pass
/// the guard run as vectors, the edge's lane by lane; built, run and checked.
#[test]
fn an_imperfect_vector_split_runs_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("edge.sched");
    std::fs::write(
        &s,
        "b0 = get_block(\"C\")\ni, j, k = get_loops(b0)\nj0, j1 = split(j, factors=[None, 16])\n\
         reorder(i, j0, k, j1)\nvectorize(j1)\nb1 = decompose_reduction(b0, k)\n",
    )
    .unwrap();
    let s = s.to_str().unwrap();
    let (ok, code, err) = tessel(&["show", "matmul:7x37x5", "--schedule", s, "--emit", "c"]);
    assert!(ok, "{err}");
    assert!(code.contains("if (tessel_all) {"), "{code}");
    let (ok, out, err) = tessel(&["run", "matmul:7x37x5", "--schedule", s, "--target", "cpu"]);
    assert!(ok, "{err}");
    assert!(out.contains("check     ok: relative error"), "{out}");
}
