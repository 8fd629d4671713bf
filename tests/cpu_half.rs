//! 16-bit floats on the CPU: f16 and bf16 buffers stored as their 16 bits and computed on
//! as f32, built by the system C compiler, run by the `tessel __worker` process and
//! checked against the reference with the tolerance of the output's precision. The
//! conversions themselves are checked against the `half` crate on every f16 value, in
//! both of the C prelude's forms (the compiler's `_Float16` and the bit arithmetic).

use std::time::Duration;
use tessel::codegen;
use tessel::lower::{lower, Backend};
use tessel::measure::cpu::CpuToolchain;
use tessel::measure::session;
use tessel::measure::worker::Measurer;
use tessel::measure::{Device, FailureKind};
use tessel::schedule::{replay, text};
use tessel::search::{sample, SearchSpace, TargetLimits};

fn measurer() -> Measurer {
    Measurer::new(env!("CARGO_BIN_EXE_tessel")).with_timeout(Duration::from_secs(20))
}

/// The C of `spec`'s canonical program scheduled by the text trace `trace`.
fn c_source(spec: &str, trace: &str) -> String {
    let workload = tessel::workload::preset(spec).expect("preset");
    let program = tessel::database::canonical_program(&workload).expect("canonical program");
    let sch = replay(&text::parse(trace).expect("trace parses"), program, 0).expect("applies");
    let lowered = lower(sch.program(), Backend::Cpu).expect("lowers");
    codegen::cpu::generate(&lowered).expect("generates").code
}

/// Samples of the CPU space for 16-bit GEMMs and convs (accumulated in f32 and in their
/// own precision, odd extents, a transposed operand) compile, run and match the
/// reference; some of them read their 16-bit operands as vectors, some pack one in f32
/// (`storage_widen`).
#[test]
fn sixteen_bit_gemms_and_convs_sampled_for_the_cpu_run_and_match_the_reference() {
    let specs = [
        "matmul:m=37,n=70,k=45,layout=nt,dtype=f16,acc=f32",
        "matmul:m=64,n=96,k=40,dtype=bf16,acc=f32",
        "matmul:m=19,n=33,k=27,layout=tn,dtype=f16",
        "dense_bias_relu:m=9,n=48,k=64,dtype=bf16,acc=f32",
        "conv2d_nhwc:n=2,c=8,h=9,w=11,k=16,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32",
        "conv2d_nchw:n=1,c=6,h=10,w=10,k=5,r=3,s=3,stride=2,pad=1,dtype=bf16",
    ];
    let mut m = measurer();
    let (mut vector_reads, mut widened) = (0, 0);
    for spec in specs {
        // The canonical workload: its parameters are named as the canonical program's.
        let w = tessel::workload::preset(spec).expect("preset");
        let w = tessel::workload::parse(&w.canonical_text()).expect("canonical text");
        let program = w.to_program();
        let samples = sample::sample(
            &SearchSpace::cpu_default(),
            &TargetLimits::Cpu,
            &program,
            3,
            7,
        )
        .unwrap_or_else(|e| panic!("{spec}: {e}"));
        let sources: Vec<_> = samples
            .iter()
            .map(|s| {
                let code = c_source(spec, &s.trace);
                widened += usize::from(s.trace.contains("storage_widen("));
                vector_reads += usize::from(
                    code.contains("tessel_vload_h(") || code.contains("tessel_vload_bf("),
                );
                let sch = replay(&text::parse(&s.trace).unwrap(), program.clone(), 0).unwrap();
                session::source_for(sch.program(), &Device::Cpu).expect("source")
            })
            .collect();
        let job = session::job(&w, sources, Device::Cpu, false, 3).expect("job");
        assert!(job.tolerance >= 1e-2, "{spec}: tolerance {}", job.tolerance);
        let (outcomes, _) = m.measure(&job).expect("measures");
        for (i, o) in outcomes.iter().enumerate() {
            let r = o
                .as_ref()
                .unwrap_or_else(|f| panic!("{spec}, sample {i}: {f}\n{}", samples[i].trace));
            assert!(
                r.rel_error <= job.tolerance,
                "{spec}, sample {i}: {}",
                r.rel_error
            );
        }
    }
    assert!(
        vector_reads > 0,
        "no sample read 16-bit operands as vectors"
    );
}

/// A kernel that leaves one element of an f16 output unwritten fails its check: the
/// output is poisoned with an f16 NaN before the run, and the NaN is caught.
#[test]
fn an_unwritten_element_of_a_sixteen_bit_output_fails_the_check() {
    let spec = "matmul:m=8,n=8,k=8,dtype=f16,acc=f32";
    let w = tessel::workload::preset(spec).expect("preset");
    let w = tessel::workload::parse(&w.canonical_text()).expect("canonical text");
    let program = w.to_program();
    let good = session::source_for(&program, &Device::Cpu).expect("source");
    let mut bad = good.clone();
    // Skip the store of the output's element (3, 5) in the naive nest's epilogue.
    let store = bad
        .code
        .lines()
        .find(|l| !l.starts_with("static") && l.contains("] = tessel_f2h("))
        .expect("the f16 output's store")
        .to_string();
    let lhs = store.split(" = ").next().unwrap().trim();
    let index = &lhs[lhs.find('[').unwrap() + 1..lhs.len() - 1];
    bad.code = bad.code.replace(
        &store,
        &format!("if ({index} != 29) {{ {} }}", store.trim()),
    );
    assert_ne!(bad.code, good.code);
    let job = session::job(&w, vec![good, bad], Device::Cpu, false, 3).expect("job");
    let (outcomes, _) = measurer().measure(&job).expect("measures");
    assert!(outcomes[0].is_ok(), "{:?}", outcomes[0]);
    let err = outcomes[1]
        .as_ref()
        .expect_err("the unwritten element is caught");
    assert_eq!(err.kind, FailureKind::WrongAnswer, "{err}");
    assert!(err.message.contains("[3, 5] is NaN"), "{err}");
}

/// The f16 and bf16 conversions of the generated C agree with the `half` crate: every
/// f16 bit pattern to f32 and back, and f32 values around every rounding edge (ties,
/// subnormals, the overflow bound, NaN) to f16 and bf16, one at a time and a vector at a
/// time (stored, then loaded back), compiled with the flags of the host's ISA and, for
/// f16, again with the compiler's `_Float16` hidden (the bit form).
#[test]
fn the_c_conversions_round_as_the_half_crate_does() {
    let Ok(tc) = CpuToolchain::detect() else {
        panic!("no C compiler");
    };
    // The f16 program's source (its prelude and HALF), and bf16's BFLOAT16 helpers.
    let bf16 = c_source("matmul:m=4,n=4,k=4,dtype=bf16,acc=f32", "");
    let start = bf16
        .find("static inline float tessel_bf2f")
        .expect("bf16 helpers");
    let end = bf16
        .find("TESSEL_BF16_VECTORS(h, TESSEL_HLANES)")
        .expect("bf16 vectors");
    let prelude = c_source("matmul:m=4,n=4,k=4,dtype=f16,acc=f32", "") + &bf16[start..end];
    let mut floats: Vec<f32> = (0..=u16::MAX)
        .map(|h| half::f16::from_bits(h).to_f32())
        .filter(|x| x.is_finite())
        .flat_map(|x| {
            let b = x.to_bits();
            [
                x,
                f32::from_bits(b.wrapping_add(1)),
                f32::from_bits(b.wrapping_sub(1)),
            ]
        })
        .collect();
    // Ties between f16 neighbours, and bf16's.
    floats.extend((0..2000u32).map(|i| f32::from_bits(0x3880_0000 + i * 0x2000 + 0x1000)));
    floats.extend((1..2000u32).map(|i| f32::from_bits(0x3f80_0000 + i * 0x1_0000 + 0x8000)));
    floats.extend([
        65504.0,
        65519.0,
        65520.0,
        1e6,
        -1e6,
        3e-8,
        -3e-8,
        1e-40,
        f32::NAN,
    ]);
    floats.retain(|x| !x.is_infinite());
    let list: Vec<String> = floats
        .iter()
        .map(|x| format!("0x{:08x}u", x.to_bits()))
        .collect();
    let main = format!(
        "#include <stdio.h>\n{prelude}\nstatic const unsigned int fs[] = {{{}}};\n\
         int main(void) {{\n\
           for (unsigned int h = 0; h <= 0xffffu; h++) {{ float f = tessel_h2f((unsigned short)h); unsigned int u; __builtin_memcpy(&u, &f, 4); printf(\"h %u %08x\\n\", h, u); }}\n\
           for (unsigned long i = 0; i < sizeof fs / sizeof fs[0]; i++) {{ float f; __builtin_memcpy(&f, &fs[i], 4); printf(\"f %08x %04x %04x\\n\", fs[i], tessel_f2h(f), tessel_f2bf(f)); }}\n\
           for (unsigned long i = 0; i + TESSEL_VLANES <= sizeof fs / sizeof fs[0]; i += TESSEL_VLANES) {{\n\
             tessel_vf v; unsigned short h[TESSEL_VLANES], b[TESSEL_VLANES]; __builtin_memcpy(&v, &fs[i], sizeof v);\n\
             tessel_vstore_h(h, v); tessel_vstore_bf(b, v);\n\
             tessel_vf wh = tessel_vload_h(h), wb = tessel_vload_bf(b);\n\
             for (int l = 0; l < TESSEL_VLANES; l++) {{ unsigned int uh, ub; float x = wh[l], y = wb[l]; __builtin_memcpy(&uh, &x, 4); __builtin_memcpy(&ub, &y, 4); printf(\"f %08x %04x %04x %08x %08x\\n\", fs[i + l], h[l], b[l], uh, ub); }}\n\
           }}\n\
           return 0;\n}}\n",
        list.join(", ")
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let c_path = dir.path().join("conv.c");
    std::fs::write(&c_path, &main).expect("write");
    let flags: Vec<String> = CpuToolchain::default_flags()
        .expect("host flags")
        .into_iter()
        .filter(|f| f != "-shared" && f != "-fPIC")
        .collect();
    for hide_float16 in [false, true] {
        let exe = dir.path().join(format!("conv{}", u8::from(hide_float16)));
        let mut cc = std::process::Command::new(&tc.cc);
        cc.args(&flags).arg("-o").arg(&exe).arg(&c_path).arg("-lm");
        if hide_float16 {
            cc.arg("-U__FLT16_MAX__");
        }
        let out = cc.output().expect("cc runs");
        assert!(
            out.status.success(),
            "cc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = std::process::Command::new(&exe).output().expect("runs");
        assert!(run.status.success());
        let text = String::from_utf8(run.stdout).expect("utf-8");
        let (mut checked, mut vector_lanes) = (0, 0);
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            match parts.next() {
                Some("h") => {
                    let h: u16 = parts.next().unwrap().parse().unwrap();
                    let got =
                        f32::from_bits(u32::from_str_radix(parts.next().unwrap(), 16).unwrap());
                    let want = half::f16::from_bits(h).to_f32();
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "h2f({h:#06x}) = {got} not {want} (_Float16 hidden: {hide_float16})"
                    );
                }
                Some("f") => {
                    let hex = |s: &str| u32::from_str_radix(s, 16).unwrap();
                    let f = f32::from_bits(hex(parts.next().unwrap()));
                    let (h, bf) = (hex(parts.next().unwrap()), hex(parts.next().unwrap()));
                    let (want_h, want_bf) = (half::f16::from_f32(f), half::bf16::from_f32(f));
                    // A vector's lanes: also read back through the vector loads.
                    if let (Some(back_h), Some(back_bf)) = (parts.next(), parts.next()) {
                        let (back_h, back_bf) =
                            (f32::from_bits(hex(back_h)), f32::from_bits(hex(back_bf)));
                        let same = |a: f32, b: f32| {
                            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
                        };
                        assert!(
                            same(back_h, half::f16::from_bits(h as u16).to_f32()),
                            "vector f16 load of {h:#x}"
                        );
                        assert!(
                            same(back_bf, half::bf16::from_bits(bf as u16).to_f32()),
                            "vector bf16 load of {bf:#x}"
                        );
                        vector_lanes += 1;
                    }
                    if f.is_nan() {
                        assert!(half::f16::from_bits(h as u16).is_nan(), "f2h(NaN) = {h:#x}");
                        assert!(
                            half::bf16::from_bits(bf as u16).is_nan(),
                            "f2bf(NaN) = {bf:#x}"
                        );
                    } else {
                        assert_eq!(
                            h as u16,
                            want_h.to_bits(),
                            "f2h({f:e}) (_Float16 hidden: {hide_float16})"
                        );
                        assert_eq!(bf as u16, want_bf.to_bits(), "f2bf({f:e})");
                    }
                }
                _ => continue,
            }
            checked += 1;
        }
        assert!(
            vector_lanes >= floats.len() - 16,
            "{vector_lanes} vector lanes checked"
        );
        assert_eq!(
            checked,
            65536 + floats.len() + vector_lanes,
            "lines checked"
        );
    }
}
