//! Generated kernels, pinned and exercised without a GPU:
//!
//! * the CUDA C of every seed schedule is pinned by a golden file and compiled with NVRTC
//!   for sm_90a (registers and spills reported); NVRTC must be present (`.ci/test`
//!   installs it) unless `TESSEL_NO_NVRTC=1` says to skip that half;
//! * the C of every CPU schedule (and of the naive programs) is pinned, compiled with the
//!   system C compiler, run in the isolated worker and checked against the reference.

mod golden_util;

use golden_util::check_golden;
use tessel::ir::DType;
use tessel::measure::{session, worker::Measurer, Device, TimingConfig};
use tessel::schedule::{replay, text};
use tessel::workload;

fn scheduled(name: &str, spec: &str) -> tessel::ir::Program {
    let w = workload::preset(spec).unwrap();
    let path = format!(
        "{}/examples/schedules/{name}.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    let trace = text::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    replay(&trace, w.to_program(), 0).unwrap().into_program()
}

const CUDA_SEEDS: [&str; 6] = [
    "mlc_blocking_shared",
    "gemm_1_blocked",
    "gemm_2_thread_tiling",
    "gemm_3_vthread",
    "gemm_4_vectorize",
    "seed_efficient_gemm",
];

fn nvrtc_required() -> bool {
    std::env::var("TESSEL_NO_NVRTC").as_deref() != Ok("1")
}

#[test]
fn seed_cuda_kernels_are_pinned_and_compile_for_sm90a() {
    let device = Device::Cuda {
        arch: "sm_90a".into(),
    };
    for name in CUDA_SEEDS {
        let src = session::source_for(&scheduled(name, "matmul:1024x1024x1024"), &device)
            .unwrap_or_else(|f| panic!("{name}: {f}"));
        check_golden(&format!("{name}.cu"), &src.code);
        if !nvrtc_required() {
            println!("{name}: NVRTC skipped (TESSEL_NO_NVRTC=1)");
            continue;
        }
        if let Err(msg) = tessel::measure::cuda::nvrtc_available() {
            panic!("{msg} (CI installs it through .ci/test; set TESSEL_NO_NVRTC=1 to skip)");
        }
        let cubin = tessel::measure::cuda::compile(&src.code, "sm_90a")
            .unwrap_or_else(|f| panic!("{name}: {f}"));
        let info = &cubin.info;
        println!(
            "{name}: {} registers, {} bytes spill stores, {} bytes shared",
            info.registers.unwrap_or(0),
            info.spill_stores.unwrap_or(0),
            info.shared_bytes.unwrap_or(0)
        );
        assert!(!cubin.bytes.is_empty());
        assert_eq!(info.spill_stores, Some(0), "{name} spills registers");
    }
}

const CPU_SCHEDULES: [(&str, &str); 2] = [
    ("cpu_matmul", "matmul:128x192x128"),
    (
        "cpu_conv2d",
        "conv2d_nchw:n=1,c=16,h=14,w=14,k=32,r=3,s=3,stride=1,pad=1",
    ),
];

const CPU_AWKWARD: [(&str, &str); 2] = [
    ("cpu_matmul", "matmul:100x70x50"),
    (
        "cpu_conv2d",
        "conv2d_nchw:n=1,c=5,h=9,w=11,k=7,r=3,s=3,stride=1,pad=1",
    ),
];

fn measure_cpu(spec: &str, programs: Vec<tessel::ir::Program>) -> Vec<tessel::measure::Outcome> {
    let w = workload::preset(spec).unwrap();
    let sources = programs
        .iter()
        .map(|p| session::source_for(p, &Device::Cpu).unwrap())
        .collect();
    let mut job = session::job(&w, sources, Device::Cpu, false, 11).unwrap();
    job.timing = TimingConfig {
        warmup_seconds: 0.0,
        min_runs: 2,
        max_runs: 3,
        max_seconds: 0.1,
        flush_cache: false,
        give_up_above_seconds: None,
        give_up_factor: None,
        settled_spread: None,
        enough_seconds: None,
    };
    let mut m = Measurer::new(env!("CARGO_BIN_EXE_tessel"));
    m.measure(&job).expect("the worker runs").0
}

#[test]
fn cpu_kernels_are_pinned_and_compute_the_reference() {
    for (name, spec) in CPU_SCHEDULES {
        let p = scheduled(name, spec);
        let src = session::source_for(&p, &Device::Cpu).unwrap();
        check_golden(&format!("{name}.c"), &src.code);
        for o in measure_cpu(spec, vec![p]) {
            let m = o.unwrap_or_else(|f| panic!("{name} on {spec}: {f}"));
            assert!(m.rel_error < 1e-4, "{name}: {}", m.rel_error);
        }
    }
    for (name, spec) in CPU_AWKWARD {
        for o in measure_cpu(spec, vec![scheduled(name, spec)]) {
            let m = o.unwrap_or_else(|f| panic!("{name} on {spec}: {f}"));
            assert!(m.rel_error < 1e-4, "{name} on {spec}: {}", m.rel_error);
        }
    }
}

/// Rows of 12, 24 and 28 lanes, vectorized: on AVX-512 (16 lanes) and AVX2 (8) each
/// leaves at least half a vector after the whole ones, which runs as one half-width
/// vector step (28 on AVX-512: one vector, one half vector, 4 scalar lanes).
#[test]
fn vector_rows_with_half_a_vector_left_compute_the_reference() {
    let trace = "b0 = get_block(\"C\")\ni, j, k = get_loops(b0)\nreorder(i, k, j)\nvectorize(j)\nb1 = decompose_reduction(b0, k)\n";
    for spec in ["matmul:8x12x5", "matmul:8x24x5", "matmul:3x28x7"] {
        let w = workload::preset(spec).unwrap();
        let p = replay(&text::parse(trace).unwrap(), w.to_program(), 0)
            .unwrap()
            .into_program();
        let src = session::source_for(&p, &Device::Cpu).unwrap();
        assert!(src.code.contains("tessel_hstore(&C["), "{}", src.code);
        for o in measure_cpu(spec, vec![p]) {
            let m = o.unwrap_or_else(|f| panic!("{spec}: {f}"));
            assert!(m.rel_error < 1e-4, "{spec}: {}", m.rel_error);
        }
    }
}

#[test]
fn naive_cpu_kernels_of_every_preset_compute_the_reference() {
    for spec in [
        "matmul:m=24,n=16,k=8,layout=nt",
        "matmul:m=24,n=16,k=8,layout=tn",
        "batch_matmul:b=2,m=8,n=12,k=4",
        "conv2d_nhwc:n=1,c=3,h=7,w=7,k=4,r=3,s=3,stride=2,pad=1",
        "depthwise_conv2d_nchw:n=1,c=4,h=6,w=6,r=3,s=3,stride=1,pad=1",
        "dense_bias_relu:m=8,n=12,k=16",
        "conv2d_relu_nchw:n=1,c=3,h=6,w=6,k=4,r=3,s=3,stride=1,pad=1",
        "concat_conv2d_relu_nchw:n=1,c1=2,c2=3,h=5,w=5,k=4,r=3,s=3,stride=1,pad=1",
    ] {
        let w = workload::preset(spec).unwrap();
        for o in measure_cpu(spec, vec![w.to_program()]) {
            o.unwrap_or_else(|f| panic!("{spec}: {f}"));
        }
    }
}

#[test]
fn sixteen_bit_buffers_are_stored_as_16_bits_on_cuda_and_on_the_cpu() {
    // f16 and bf16 values live as their raw 16 bits: widened to f32 at every load
    // (libdevice for f16, a shift for bf16) and rounded to nearest even at every store; the
    // cache stages copy raw bits; the vectorized fetches fall back to element copies (the
    // float2/float4 paths are float32 only), so the seed schedule compiles as it is.
    for (dtype, widen, round, other) in [
        (DType::F16, "tessel_h2f", "tessel_f2h", "tessel_bf2f"),
        (DType::BF16, "tessel_bf2f", "tessel_f2bf", "tessel_h2f"),
    ] {
        let spec = format!("matmul:1024x1024x1024,dtype={}", dtype.short());
        let p = scheduled("gemm_4_vectorize", &spec);
        let device = Device::Cuda {
            arch: "sm_90a".into(),
        };
        let code = session::source_for(&p, &device).unwrap().code;
        assert!(code.contains("unsigned short* __restrict__ A"), "{code}");
        // The compute widens what it reads and rounds what it accumulates; the copies
        // into the cache stages do neither.
        assert!(code.contains(&format!("{widen}(A_shared_local[")), "{code}");
        assert!(code.contains(&format!("= {round}(")), "{code}");
        assert!(!code.contains(&format!("{round}({widen}(A")), "{code}");
        assert!(!code.contains(other), "{other} in a {dtype} kernel");
        assert!(
            !code.contains("float4"),
            "a float4 copy of a {dtype} buffer"
        );
        if dtype == DType::F16 {
            assert!(code.contains("__nv_float2half_rn"), "{code}");
        }
        if nvrtc_required() {
            let cubin = tessel::measure::cuda::compile(&code, "sm_90a").unwrap();
            assert!(!cubin.bytes.is_empty());
        }
        // The C backend stores the same 16 bits and converts with helpers of its own.
        let w = workload::preset(&format!("matmul:16x16x16,dtype={}", dtype.short())).unwrap();
        let c = session::source_for(&w.to_program(), &Device::Cpu)
            .unwrap()
            .code;
        assert!(c.contains("unsigned short* restrict A"), "{c}");
        assert!(c.contains(&format!("{widen}(A[")), "{c}");
        assert!(!c.contains(other), "{other} in a {dtype} kernel");
    }
}

#[test]
fn a_job_checks_at_its_output_precision_against_a_peer_of_that_precision() {
    let device = Device::Cuda {
        arch: "sm_90a".into(),
    };
    for (spec, tolerance) in [
        ("matmul:16x16x16", tessel::interp::TOLERANCE),
        ("matmul:16x16x16,dtype=f16", tessel::interp::TOLERANCE_F16),
        (
            "matmul:16x16x16,dtype=bf16,acc=f32",
            tessel::interp::TOLERANCE_BF16,
        ),
    ] {
        let w = workload::preset(spec).unwrap();
        let job = session::job(&w, Vec::new(), device.clone(), false, 1).unwrap();
        assert_eq!(job.tolerance, tolerance, "{spec}");
    }
    // cublasLt of the same precision is the peer of a 16-bit GEMM accumulated in f32; there
    // is none for one accumulated in its own dtype.
    for (spec, peer) in [
        (
            "matmul:m=16,n=8,k=4,layout=nt,dtype=bf16,acc=f32",
            Some((DType::BF16, true, false)),
        ),
        (
            "dense_bias_relu:m=4,n=8,k=4,dtype=f16,acc=f32",
            Some((DType::F16, true, true)),
        ),
        ("matmul:16x16x16", Some((DType::F32, false, false))),
        ("matmul:16x16x16,dtype=f16", None),
    ] {
        let w = workload::preset(spec).unwrap();
        let job = session::job(&w, Vec::new(), device.clone(), true, 1).unwrap();
        let got = job
            .peer
            .map(|tessel::measure::Peer::Gemm(g)| (g.dtype, g.trans_b, g.bias_relu.is_some()));
        assert_eq!(got, peer, "{spec}");
    }
}
