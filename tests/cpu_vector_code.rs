//! The CPU back end's vector code, compiled with the real C compiler: a micro-kernel of
//! the register-tile sketch (4 x 16 accumulators, a packed 16 x 16 panel of B, K blocked)
//! becomes, in the assembly of its innermost loop, FMAs on vector registers (`ymm` with
//! AVX2, `zmm` with AVX-512), built with the flags the fingerprint's ISA gives.

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
    let isa = VectorIsa::host().expect("TESSEL_CPU_ISA names an ISA this CPU runs");
    let register = match isa {
        VectorIsa::Avx512f => "%zmm",
        VectorIsa::Avx2Fma => "%ymm",
        _ => {
            eprintln!(
                "skipped: the host ISA is {}, no x86 FMA to look for",
                isa.name()
            );
            return;
        }
    };
    let tc = CpuToolchain::detect().expect("a C compiler");
    let dir = tempfile::tempdir().expect("tempdir");
    let c_path = dir.path().join("k.c");
    let s_path = dir.path().join("k.s");
    std::fs::write(&c_path, &code).expect("write");
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
    let asm = std::fs::read_to_string(&s_path).expect("assembly");
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
