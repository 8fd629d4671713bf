//! Tests that need a CUDA GPU. They run only with `TESSEL_GPU=1` (on the H100, see
//! `GPU.md`); without it every test prints that it was skipped and passes, so CI compiles
//! this file without running it.
//!
//! Tests that leave the CUDA context broken (a fault, a hung kernel) run their body in a
//! child process (this same test binary, one test, a marker in the environment), the way
//! the measuring worker isolates candidates, so later tests get a healthy context.

use ndarray::{ArrayD, IxDyn};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::process::Command;
use std::time::Duration;
use tessel::codegen::{Launch, Source};
use tessel::interp::rel_error as rel_error_nd;
use tessel::ir::DType;
use tessel::measure::cuda::{compile, CudaRunner, ProgramHandle};
use tessel::measure::{stats, FailureKind, GemmPeer, ParamSpec, Peer, TimingConfig};
use tessel::target::cuda::CudaLimits;

// ---------------------------------------------------------------------------------------
// Helpers (shared with the seed-schedule tests).

/// Whether GPU tests run here: `TESSEL_GPU=1`. Otherwise says that the test was skipped.
pub fn gpu_enabled() -> bool {
    if std::env::var("TESSEL_GPU").as_deref() == Ok("1") {
        true
    } else {
        eprintln!(
            "skipped: TESSEL_GPU is not set (GPU tests run on the GPU machine with TESSEL_GPU=1)"
        );
        false
    }
}

/// An f32 parameter.
pub fn param(name: &str, shape: &[i64], is_output: bool) -> ParamSpec {
    ParamSpec {
        name: name.to_string(),
        shape: shape.to_vec(),
        dtype: DType::F32,
        is_output,
    }
}

/// Values uniform in [-1, 1], never zero, deterministic in `seed`.
pub fn random_values(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| loop {
            let v: f32 = rng.gen_range(-1.0..=1.0);
            if v != 0.0 {
                break v;
            }
        })
        .collect()
}

/// One random vector per input parameter, in parameter order (what `prepare` takes).
pub fn random_inputs(params: &[ParamSpec], seed: u64) -> Vec<Vec<f32>> {
    params
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.is_output)
        .map(|(i, p)| random_values(p.numel(), seed + i as u64))
        .collect()
}

/// `||got - want|| / ||want||` (NaN if either holds a NaN), as the measuring worker checks.
pub fn rel_error(got: &[f32], want: &[f32]) -> f64 {
    let a = |v: &[f32]| ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).expect("1-d");
    rel_error_nd(&a(got), &a(want))
}

/// A one-kernel `Source`.
pub fn one_kernel(
    code: &str,
    name: &str,
    grid: [u32; 3],
    block: [u32; 3],
    dynamic_shared_bytes: u32,
    params: &[&str],
) -> Source {
    Source {
        code: code.to_string(),
        kernels: vec![Launch {
            name: name.to_string(),
            grid,
            block,
            dynamic_shared_bytes,
            static_shared_bytes: 0,
            params: params.iter().map(|p| p.to_string()).collect(),
            waits_for_previous: false,
        }],
        workspaces: vec![],
    }
}

/// A runner with `params` prepared from `inputs` and `src` compiled for this device and loaded.
pub fn runner_with(
    src: &Source,
    params: &[ParamSpec],
    inputs: &[Vec<f32>],
) -> (CudaRunner, ProgramHandle) {
    let mut runner = CudaRunner::new().expect("a CUDA device");
    let arch = runner.device().arch();
    let cubin = compile(&src.code, &arch).unwrap_or_else(|f| panic!("compile for {arch}: {f}"));
    runner
        .prepare(params, inputs, &src.workspaces)
        .expect("prepare");
    let handle = runner.load(&[cubin], src).expect("load");
    (runner, handle)
}

/// Runs the single test `name` of this binary in a child process with `marker=1` set, and
/// returns its output; panics if the child failed.
pub fn run_in_child(name: &str, marker: &str) -> String {
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(marker, "1")
        .output()
        .expect("spawn the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child {name} failed:\n{text}");
    text
}

/// Whether this process is the child `run_in_child` started for `marker`.
pub fn is_child(marker: &str) -> bool {
    std::env::var(marker).as_deref() == Ok("1")
}

/// Quick timing settings for tests.
pub fn quick_timing() -> TimingConfig {
    TimingConfig {
        warmup_seconds: 0.02,
        min_runs: 10,
        max_runs: 50,
        max_seconds: 0.2,
        flush_cache: true,
        give_up_above_seconds: None,
        give_up_factor: None,
        settled_spread: None,
        enough_seconds: None,
    }
}

fn vadd_source(n: usize) -> Source {
    let code = format!(
        "extern \"C\" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c) {{\n  \
         long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < {n}) c[i] = a[i] + b[i];\n}}\n"
    );
    let grid = (n as u32).div_ceil(256);
    one_kernel(
        &code,
        "vadd",
        [grid, 1, 1],
        [256, 1, 1],
        0,
        &["a", "b", "c"],
    )
}

fn vadd_params(n: usize) -> Vec<ParamSpec> {
    vec![
        param("a", &[n as i64], false),
        param("b", &[n as i64], false),
        param("c", &[n as i64], true),
    ]
}

// ---------------------------------------------------------------------------------------
// Tests.

#[test]
fn device_query_reports_a_sane_device() {
    if !gpu_enabled() {
        return;
    }
    let runner = CudaRunner::new().expect("a CUDA device");
    let info = runner.device();
    eprintln!("{info:#?}\n{:#?}", info.fingerprint());
    assert!(info.arch().starts_with("sm_"));
    assert!(info.sm_count > 0 && info.l2_bytes > 0 && info.warp_size == 32);
    assert!(info.max_shared_per_block_optin >= info.max_shared_per_block);
    let limits = CudaLimits::for_device(info);
    assert_eq!(limits.max_shared_bytes_static, 48 * 1024);
    assert!(info.nvrtc_version.is_some());
}

#[test]
fn vector_add_compiles_runs_and_matches() {
    if !gpu_enabled() {
        return;
    }
    let n = (1 << 20) + 3;
    let params = vadd_params(n);
    let inputs = random_inputs(&params, 1);
    let (mut runner, handle) = runner_with(&vadd_source(n), &params, &inputs);
    let out = runner.run_once(handle).expect("run");
    assert_eq!(out.len(), 1);
    let want: Vec<f32> = inputs[0]
        .iter()
        .zip(&inputs[1])
        .map(|(a, b)| a + b)
        .collect();
    assert_eq!(rel_error(&out[0], &want), 0.0);
    // Run again: the output is poisoned first, so a second correct run proves it ran again.
    let again = runner.run_once(handle).expect("second run");
    assert_eq!(again[0], want);
}

const OOB_CHILD: &str = "TESSEL_GPU_CHILD_OOB";

#[test]
fn out_of_bounds_write_is_a_runtime_failure() {
    if !gpu_enabled() || is_child(OOB_CHILD) {
        return;
    }
    let out = run_in_child("child_out_of_bounds_write", OOB_CHILD);
    assert!(out.contains("child: runtime failure reported"), "{out}");
}

#[test]
fn child_out_of_bounds_write() {
    if !is_child(OOB_CHILD) {
        return;
    }
    // Writes 2^36 floats (256 GiB) past the buffer: far outside any allocation.
    let code = "extern \"C\" __global__ void oob(const float* __restrict__ a, float* __restrict__ c) {\n  \
                c[threadIdx.x + (1ll << 36)] = a[threadIdx.x];\n}\n";
    let src = one_kernel(code, "oob", [1, 1, 1], [32, 1, 1], 0, &["a", "c"]);
    let params = vec![param("a", &[32], false), param("c", &[32], true)];
    let (mut runner, handle) = runner_with(&src, &params, &random_inputs(&params, 2));
    let err = runner.run_once(handle).expect_err("an illegal address");
    assert_eq!(err.kind, FailureKind::Runtime, "{err}");
    assert!(runner.poisoned().is_some());
    let again = runner
        .run_once(handle)
        .expect_err("a poisoned runner refuses work");
    assert_eq!(again.kind, FailureKind::Runtime);
    assert!(again.message.contains("fresh process"), "{again}");
    let timed = runner
        .time(handle, &quick_timing())
        .expect_err("a poisoned runner refuses timing");
    assert_eq!(timed.kind, FailureKind::Runtime);
    println!("child: runtime failure reported: {err}");
}

const HANG_CHILD: &str = "TESSEL_GPU_CHILD_HANG";

#[test]
fn a_kernel_that_never_finishes_is_a_timeout() {
    if !gpu_enabled() || is_child(HANG_CHILD) {
        return;
    }
    let out = run_in_child("child_hanging_kernel", HANG_CHILD);
    assert!(out.contains("child: timeout reported"), "{out}");
}

#[test]
fn child_hanging_kernel() {
    if !is_child(HANG_CHILD) {
        return;
    }
    // Spins while the (zero) input stays zero.
    let code = "extern \"C\" __global__ void spin(const float* __restrict__ a, float* __restrict__ c) {\n  \
                volatile const float* f = a;\n  while (f[0] == 0.0f) {}\n  c[0] = f[0];\n}\n";
    let src = one_kernel(code, "spin", [1, 1, 1], [1, 1, 1], 0, &["a", "c"]);
    let params = vec![param("a", &[1], false), param("c", &[1], true)];
    let (mut runner, handle) = runner_with(&src, &params, &[vec![0.0]]);
    runner.set_kernel_timeout(Duration::from_secs(1));
    let err = runner.run_once(handle).expect_err("a timeout");
    assert_eq!(err.kind, FailureKind::Timeout, "{err}");
    assert!(runner.poisoned().is_some());
    println!("child: timeout reported: {err}");
    // The kernel still spins; exiting the process tears the context down.
    std::process::exit(0);
}

#[test]
fn dynamic_shared_memory_above_48_kb_works() {
    if !gpu_enabled() {
        return;
    }
    // 64 KB of dynamic shared memory per block: each block reverses its 16384 floats.
    const TILE: usize = 16384;
    let blocks = 8;
    let n = TILE * blocks;
    let code = format!(
        "extern \"C\" __global__ void rev(const float* __restrict__ a, float* __restrict__ c) {{\n  \
         extern __shared__ __align__(16) float s[];\n  const float* src = a + (long)blockIdx.x * {TILE};\n  \
         for (int i = threadIdx.x; i < {TILE}; i += blockDim.x) s[i] = src[i];\n  __syncthreads();\n  \
         for (int i = threadIdx.x; i < {TILE}; i += blockDim.x) c[(long)blockIdx.x * {TILE} + i] = s[{TILE} - 1 - i];\n}}\n"
    );
    let src = one_kernel(
        &code,
        "rev",
        [blocks as u32, 1, 1],
        [1024, 1, 1],
        (TILE * 4) as u32,
        &["a", "c"],
    );
    let params = vec![
        param("a", &[n as i64], false),
        param("c", &[n as i64], true),
    ];
    let inputs = random_inputs(&params, 3);
    let (mut runner, handle) = runner_with(&src, &params, &inputs);
    let out = runner
        .run_once(handle)
        .expect("run with 64 KB dynamic shared memory");
    let want: Vec<f32> = inputs[0]
        .chunks(TILE)
        .flat_map(|c| c.iter().rev().copied())
        .collect();
    assert_eq!(out[0], want);
}

#[test]
fn a_refused_launch_is_a_launch_failure_and_the_runner_stays_usable() {
    if !gpu_enabled() {
        return;
    }
    let n = 1024;
    let params = vadd_params(n);
    let inputs = random_inputs(&params, 4);
    let mut bad = vadd_source(n);
    bad.kernels[0].block = [2048, 1, 1]; // more threads than any block may have
    let (mut runner, bad_handle) = runner_with(&bad, &params, &inputs);
    let err = runner.run_once(bad_handle).expect_err("too many threads");
    assert_eq!(err.kind, FailureKind::Launch, "{err}");
    assert!(runner.poisoned().is_none());
    let good = vadd_source(n);
    let arch = runner.device().arch();
    let handle = runner
        .load(&[compile(&good.code, &arch).expect("compile")], &good)
        .expect("load");
    let out = runner.run_once(handle).expect("the runner still works");
    let want: Vec<f32> = inputs[0]
        .iter()
        .zip(&inputs[1])
        .map(|(a, b)| a + b)
        .collect();
    assert_eq!(out[0], want);
}

#[test]
fn timing_returns_positive_sane_numbers() {
    if !gpu_enabled() {
        return;
    }
    // 16 Mi floats: 192 MiB of traffic, about 70 us at 3 TB/s.
    let n = 1 << 24;
    let params = vadd_params(n);
    let (mut runner, handle) = runner_with(&vadd_source(n), &params, &random_inputs(&params, 5));
    let cfg = quick_timing();
    let runs = runner.time(handle, &cfg).expect("timing");
    assert!(
        runs.len() >= cfg.min_runs && runs.len() <= cfg.max_runs,
        "{} runs",
        runs.len()
    );
    assert!(runs.iter().all(|&t| t > 0.0 && t.is_finite()));
    let (median, min, max) = stats(&runs);
    let gbps = 3.0 * 4.0 * n as f64 / median / 1e9;
    eprintln!(
        "vadd 16Mi: median {:.1} us, min {:.1}, max {:.1}, {gbps:.0} GB/s",
        median * 1e6,
        min * 1e6,
        max * 1e6
    );
    assert!((5e-6..5e-3).contains(&median), "median {median} s");
    assert!(gbps < 5000.0, "faster than any HBM: {gbps} GB/s");
}

/// Row-major `C[b] = A[b] @ B[b]` on the host, accumulated in f64.
fn host_gemm(batch: usize, m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0f32; batch * m * n];
    for p in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f64;
                for l in 0..k {
                    acc += a[p * m * k + i * k + l] as f64 * b[p * k * n + l * n + j] as f64;
                }
                c[p * m * n + i * n + j] = acc as f32;
            }
        }
    }
    c
}

fn check_cublas(batch: usize, m: usize, n: usize, k: usize) {
    let shape = |r: usize, c: usize| {
        if batch == 1 {
            vec![r as i64, c as i64]
        } else {
            vec![batch as i64, r as i64, c as i64]
        }
    };
    let params = vec![
        ParamSpec {
            shape: shape(m, k),
            ..param("A", &[], false)
        },
        ParamSpec {
            shape: shape(k, n),
            ..param("B", &[], false)
        },
        ParamSpec {
            shape: shape(m, n),
            ..param("C", &[], true)
        },
    ];
    let inputs = random_inputs(&params, 6);
    let mut runner = CudaRunner::new().expect("a CUDA device");
    runner.prepare(&params, &inputs, &[]).expect("prepare");
    let peer = Peer::Gemm(GemmPeer::nn(batch as i64, m as i64, n as i64, k as i64));
    let (runs, out, kernel) = runner.time_peer(&peer, &quick_timing()).expect("cublasLt");
    let want = host_gemm(batch, m, n, k, &inputs[0], &inputs[1]);
    let err = rel_error(&out, &want);
    let (median, _, _) = stats(&runs);
    eprintln!(
        "cuBLAS {batch}x{m}x{n}x{k}: rel error {err:.2e}, median {:.1} us, {kernel}",
        median * 1e6
    );
    // The fastest algorithm says what it is: its id at least.
    assert!(kernel.starts_with("algo "), "kernel {kernel:?}");
    // TF32 would give about 1e-3; strict fp32 about 1e-7.
    assert!(err < 1e-5, "rel error {err}");
    assert!(median > 0.0);
}

#[test]
fn cublas_sgemm_256_matches_the_host() {
    if !gpu_enabled() {
        return;
    }
    check_cublas(1, 256, 256, 256);
}

#[test]
fn cublas_batched_non_square_gemm_matches_the_host() {
    if !gpu_enabled() {
        return;
    }
    // Non-square and batched: catches a swapped operand or leading dimension.
    check_cublas(3, 64, 48, 80);
}

// ---------------------------------------------------------------------------------------
// Seed schedules end to end, through the isolated worker (the `tessel` binary: TESSEL_BIN,
// else the one cargo built, else the one beside the test's folder, as gpu-bundle lays
// them out: .gpu/tessel for .gpu/tests/gpu).

/// The architecture of device 0 (`sm_90a` on an H100 or H200).
/// The peer of every GEMM layout and of a dense layer (bias + relu epilogue) runs through
/// the worker, whose output check compares it with the reference.
#[test]
fn cublaslt_peer_covers_layouts_and_the_dense_epilogue() {
    if !gpu_enabled() {
        return;
    }
    for spec in [
        "matmul:m=192,n=320,k=96,layout=nt",
        "matmul:m=192,n=320,k=96,layout=tn",
        "batch_matmul:b=3,m=64,n=48,k=80",
        "dense_bias_relu:m=100,n=300,k=200",
    ] {
        let out = Command::new(tessel_bin())
            .args(["run", spec, "--target", "cuda", "--compare"])
            .output()
            .expect("runs tessel");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{spec}: {text}");
        assert!(text.contains("cublasLt"), "{spec}: no peer line in {text}");
    }
}

fn device_arch() -> String {
    tessel::target::cuda::CudaDeviceInfo::query(0)
        .expect("a device")
        .arch()
}

fn tessel_bin() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("TESSEL_BIN") {
        return p.into();
    }
    let built = std::path::PathBuf::from(env!("CARGO_BIN_EXE_tessel"));
    if built.exists() {
        return built;
    }
    // Built on another machine: the bundle's binary, one folder above the test's.
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("tessel")))
        .filter(|p| p.exists())
        .unwrap_or(built)
}

/// A preset spec, or a workload file (`benches/softmax_4096x1024.tw`) named as the
/// command line names it (tensors `t0`, `t1`, ...).
fn workload_of(spec: &str) -> tessel::workload::Workload {
    if !spec.ends_with(".tw") {
        return tessel::workload::preset(spec).unwrap();
    }
    let path = format!("{}/{spec}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path)
        .or_else(|_| std::fs::read_to_string(spec))
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let w = tessel::workload::parse(&text).unwrap();
    tessel::workload::parse(&w.canonical_text()).unwrap()
}

fn seed_source(name: &str, spec: &str, arch: &str) -> (tessel::workload::Workload, Source) {
    let w = workload_of(spec);
    let path = format!(
        "{}/examples/schedules/{name}.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path)
        .or_else(|_| std::fs::read_to_string(format!("examples/schedules/{name}.sched")))
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let trace = tessel::schedule::text::parse(&text).unwrap();
    let sch = tessel::schedule::replay(&trace, w.to_program(), 0).unwrap();
    let device = tessel::measure::Device::Cuda { arch: arch.into() };
    let src = tessel::measure::session::source_for(sch.program(), &device).unwrap();
    (w, src)
}

const SEEDS: [&str; 7] = [
    "mlc_blocking_shared",
    "gemm_1_blocked",
    "gemm_2_thread_tiling",
    "gemm_3_vthread",
    "gemm_4_vectorize",
    "seed_efficient_gemm",
    "gemm_split_k",
];

/// A job measuring the named seed schedules on `spec`, timed briefly.
fn seed_job(names: &[&str], spec: &str, arch: &str) -> tessel::measure::Job {
    let (w, _) = seed_source(names[0], spec, arch);
    let sources = names.iter().map(|n| seed_source(n, spec, arch).1).collect();
    let device = tessel::measure::Device::Cuda { arch: arch.into() };
    let mut job = tessel::measure::session::job(&w, sources, device, false, 7).unwrap();
    job.timing = quick_timing();
    job
}

#[test]
fn seed_schedules_match_the_reference_on_the_gpu() {
    if !gpu_enabled() {
        return;
    }
    let arch = device_arch();
    for spec in ["matmul:1024x1024x1024", "matmul:1000x1000x1000"] {
        let job = seed_job(&SEEDS, spec, &arch);
        let mut m = tessel::measure::worker::Measurer::new(tessel_bin());
        let (outcomes, _) = m.measure(&job).expect("the worker runs");
        for (name, o) in SEEDS.iter().zip(&outcomes) {
            match o {
                Ok(r) => {
                    println!(
                        "{spec} {name}: rel error {:.2e}, median {:.3} ms",
                        r.rel_error,
                        r.median_seconds * 1e3
                    );
                    assert!(r.rel_error < 1e-4);
                }
                Err(f) => panic!("{spec} {name}: {f}"),
            }
        }
    }
}

#[test]
fn measurers_sharing_the_gpu_compile_apart_and_time_one_at_a_time() {
    if !gpu_enabled() {
        return;
    }
    let arch = device_arch();
    let spec = "matmul:1000x1000x1000";
    let device = std::sync::Mutex::new(());
    let held = device.lock().unwrap();
    let jobs = [
        seed_job(&SEEDS[..4], spec, &arch),
        seed_job(&SEEDS[4..], spec, &arch),
    ];
    std::thread::scope(|s| {
        let measuring: Vec<_> = jobs
            .iter()
            .map(|job| {
                let device = &device;
                s.spawn(move || {
                    tessel::measure::worker::Measurer::new(tessel_bin())
                        .measure_sharing(job, device)
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_secs(2));
        assert!(
            measuring.iter().all(|m| !m.is_finished()),
            "timed without the device"
        );
        drop(held);
        for (job, m) in jobs.iter().zip(measuring) {
            let (outcomes, _) = m.join().unwrap().expect("the worker runs");
            assert_eq!(outcomes.len(), job.candidates.len());
            for o in &outcomes {
                let r = o.as_ref().unwrap_or_else(|f| panic!("{f}"));
                assert!(r.rel_error < 1e-4 && r.median_seconds > 0.0);
            }
        }
    });
}

#[test]
fn a_batch_compiled_ahead_is_measured_on_its_worker_or_afresh_if_it_changed() {
    if !gpu_enabled() {
        return;
    }
    let arch = device_arch();
    let spec = "matmul:1000x1000x1000";
    let job = seed_job(&SEEDS, spec, &arch);
    let mut m = tessel::measure::worker::Measurer::new(tessel_bin());
    // The same candidates, a give-up latency set after the compile started (below every
    // seed's time: each is timed by its probe runs alone).
    let compiling = m.start_compiling(&job).expect("starts");
    let mut later = job.clone();
    later.timing.give_up_above_seconds = Some(1e-9);
    let (outcomes, _) = m.measure_compiled(compiling, &later).expect("measures");
    assert_eq!(m.workers_started(), 1);
    for o in &outcomes {
        let r = o.as_ref().unwrap_or_else(|f| panic!("{f}"));
        assert!(r.rel_error < 1e-4);
        assert_eq!(
            r.runs.len(),
            tessel::measure::PROBE_RUNS,
            "given up after its probes"
        );
    }
    // Other candidates: the compiled worker is dropped and the job measured afresh.
    let compiling = m.start_compiling(&job).expect("starts");
    let mut fewer = job.clone();
    fewer.candidates.truncate(2);
    let (outcomes, _) = m.measure_compiled(compiling, &fewer).expect("measures");
    assert_eq!(outcomes.len(), 2);
    assert!(outcomes.iter().all(|o| o.is_ok()));
    assert_eq!(m.workers_started(), 3);
}

#[test]
fn half_precision_seed_schedules_match_the_reference_on_the_gpu() {
    // f16 and bf16 storage (raw 16 bits, converted at loads and stores) against the naive
    // kernel of the same dtype, within the dtype's tolerance; the vectorized fetches run
    // as element copies.
    if !gpu_enabled() {
        return;
    }
    let arch = device_arch();
    for (dtype, convert) in [(DType::F16, "tessel_f2h"), (DType::BF16, "tessel_f2bf")] {
        let spec = format!("matmul:1024x1024x1024,dtype={}", dtype.short());
        let names = ["gemm_3_vthread", "gemm_4_vectorize", "seed_efficient_gemm"];
        let mut sources = Vec::new();
        let mut w = None;
        for name in names {
            let (wl, src) = seed_source(name, &spec, &arch);
            assert!(src.code.contains(convert), "{name}");
            sources.push(src);
            w = Some(wl);
        }
        let (outcomes, _) = measure_sources(&w.unwrap(), sources, &arch, false);
        let labels = names.iter().map(|n| format!("{spec} {n}"));
        assert_within(labels, &outcomes, tessel::interp::tolerance(dtype));
    }
}

/// Every outcome measured, within `tolerance` of the reference (printed with its label).
fn assert_within(
    labels: impl Iterator<Item = String>,
    outcomes: &[tessel::measure::Outcome],
    tolerance: f64,
) {
    for (label, o) in labels.zip(outcomes) {
        match o {
            Ok(r) => {
                println!(
                    "{label}: rel error {:.2e}, median {:.3} ms",
                    r.rel_error,
                    r.median_seconds * 1e3
                );
                assert!(r.rel_error < tolerance, "{label}");
            }
            Err(f) => panic!("{label}: {f}"),
        }
    }
}

/// Checks and times `sources` of workload `w` in the measuring worker, quickly, with the
/// library peer where `with_peer`.
fn measure_sources(
    w: &tessel::workload::Workload,
    sources: Vec<Source>,
    arch: &str,
    with_peer: bool,
) -> (
    Vec<tessel::measure::Outcome>,
    Option<tessel::measure::PeerMeasured>,
) {
    let device = tessel::measure::Device::Cuda { arch: arch.into() };
    let mut job = tessel::measure::session::job(w, sources, device, with_peer, 7).unwrap();
    job.timing = quick_timing();
    let mut m = tessel::measure::worker::Measurer::new(tessel_bin());
    m.measure(&job).expect("the worker runs")
}

#[test]
fn half_precision_accumulated_in_f32_matches_the_reference_on_the_gpu() {
    // Samples of the CUDA space for f16/bf16 operands summed in f32 (`acc=f32`): the
    // operands stay 16-bit in global and shared memory, the accumulator is f32, the
    // output is rounded once; checked against the naive kernel of the same workload, as
    // is cublasLt of the same precision (the peer).
    if !gpu_enabled() {
        return;
    }
    let arch = device_arch();
    let space = tessel::search::SearchSpace::cuda_default();
    let target = tessel::search::TargetLimits::Cuda(CudaLimits::sm90_default());
    for (spec, dtype) in [
        ("matmul:1024x1024x1024,dtype=bf16,acc=f32", DType::BF16),
        (
            "matmul:m=1000,n=520,k=300,layout=nt,dtype=f16,acc=f32",
            DType::F16,
        ),
    ] {
        let w = tessel::workload::preset(spec).unwrap();
        let mut search =
            tessel::search::RandomSearch::new(space.clone(), target.clone(), w.to_program(), 5);
        let mut sources = Vec::new();
        for _ in 0..64 {
            if sources.len() == 4 {
                break;
            }
            let Ok(sch) = search.sample() else { continue };
            if let Ok(v) = tessel::search::postproc::verify(sch.program(), &space, &target) {
                sources.push(v.source);
            }
        }
        assert_eq!(sources.len(), 4, "{spec}: too few verified samples");
        let (outcomes, peer) = measure_sources(&w, sources, &arch, true);
        let peer = peer.unwrap_or_else(|| panic!("{spec}: no cublasLt peer"));
        println!(
            "{spec} {}: rel error {:.2e}, median {:.3} ms",
            peer.name,
            peer.rel_error,
            peer.median_seconds * 1e3
        );
        assert!(peer.rel_error < tessel::interp::tolerance(dtype));
        let labels = (0..outcomes.len()).map(|i| format!("{spec} sample {i}"));
        assert_within(labels, &outcomes, tessel::interp::tolerance(dtype));
    }
}

/// Builds the example schedule `name` on `spec`, finds `instruction` in its CUDA C,
/// checks it against the naive kernel within `tolerance` and times it in the worker,
/// beside the vendor peer where `peer` (which must then exist).
fn example_matches_the_reference(
    name: &str,
    spec: &str,
    instruction: &str,
    tolerance: f64,
    peer: bool,
) {
    let arch = device_arch();
    let (w, src) = seed_source(name, spec, &arch);
    assert!(src.code.contains(instruction), "{spec}: no {instruction}");
    let (outcomes, measured) = measure_sources(&w, vec![src], &arch, peer);
    if peer {
        let p = measured.unwrap_or_else(|| panic!("{spec}: no peer measured"));
        println!(
            "{spec} {}: rel error {:.2e}, median {:.3} ms",
            p.name,
            p.rel_error,
            p.median_seconds * 1e3
        );
    }
    assert_within(
        std::iter::once(format!("{spec} {name}")),
        &outcomes,
        tolerance,
    );
}

#[test]
fn cross_thread_gemv_matches_the_reference_on_the_gpu() {
    // The cross-thread example (`examples/schedules/cross_thread_gemv.sched`: a row read
    // by lanes side by side, the partial results of a warp's 32 lanes summed by its
    // shuffles) on a GEMV of a weight stored [out, in], beside cublasLt.
    if !gpu_enabled() {
        return;
    }
    example_matches_the_reference(
        "cross_thread_gemv",
        "matmul:m=1,n=4096,k=4096,layout=nt",
        "__shfl_xor_sync(",
        tessel::interp::tolerance(DType::F32),
        true,
    );
}

#[test]
fn fused_softmax_matches_the_reference_on_the_gpu() {
    // The cross-thread sketch's fused form written out (`examples/schedules/
    // fused_softmax.sched`): the row maximum, the row sum and the output in one kernel,
    // two barriers between them.
    if !gpu_enabled() {
        return;
    }
    let spec = "benches/softmax_4096x1024.tw";
    let (_, src) = seed_source("fused_softmax", spec, &device_arch());
    assert_eq!(src.code.matches("__global__").count(), 1, "{}", src.code);
    example_matches_the_reference(
        "fused_softmax",
        spec,
        "__syncthreads()",
        tessel::interp::tolerance(DType::F32),
        false,
    );
}

#[test]
fn tensor_core_gemm_matches_the_reference_on_the_gpu() {
    // The mma.sync example (`examples/schedules/tensor_core_gemm.sched`: ldmatrix,
    // mma.sync m16n8k16, 16-byte cp.async over 3 stages) with f16 and bf16 operands
    // accumulated in f32, beside cublasLt of the same precision.
    if !gpu_enabled() {
        return;
    }
    for dtype in [DType::F16, DType::BF16] {
        let spec = format!("matmul:m=256,n=256,k=256,dtype={},acc=f32", dtype.short());
        let mma = format!(
            "mma.sync.aligned.m16n8k16.row.col.f32.{0}.{0}.f32",
            dtype.short()
        );
        let tolerance = tessel::interp::tolerance(dtype);
        example_matches_the_reference("tensor_core_gemm", &spec, &mma, tolerance, true);
    }
}

#[test]
fn tensor_core_tf32_gemm_matches_the_reference_on_the_gpu() {
    // The TF32 mma.sync example (`examples/schedules/tensor_core_tf32_gemm.sched`:
    // ldmatrix of f32 tiles, mma.sync m16n8k8 on f32 operands read as TF32, B transposed
    // into shared memory) in the NN layout, checked against the naive kernel (which
    // truncates the factors as `tf32(x)` does), beside cublasLt in TF32.
    if !gpu_enabled() {
        return;
    }
    example_matches_the_reference(
        "tensor_core_tf32_gemm",
        "matmul:m=256,n=256,k=256,math=tf32",
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
        tessel::interp::TOLERANCE_TF32,
        true,
    );
}

#[test]
fn wgmma_gemm_matches_the_reference_on_the_gpu() {
    // The wgmma example (`examples/schedules/wgmma_gemm.sched`: wgmma.mma_async m64n256k16
    // on 128-byte swizzled shared operands, 16-byte cp.async over 3 stages) with f16 and
    // bf16 operands accumulated in f32, beside cublasLt of the same precision. Its
    // smallest M is 1024 (blocks of 128 rows in groups of eight), N a multiple of 256, K
    // of 64 and at least 256.
    if !gpu_enabled() {
        return;
    }
    for dtype in [DType::F16, DType::BF16] {
        let spec = format!("matmul:m=1024,n=512,k=256,dtype={},acc=f32", dtype.short());
        let wgmma = format!(
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.{0}.{0}",
            dtype.short()
        );
        let tolerance = tessel::interp::tolerance(dtype);
        example_matches_the_reference("wgmma_gemm", &spec, &wgmma, tolerance, true);
    }
}

#[test]
fn wgmma_tf32_gemm_matches_the_reference_on_the_gpu() {
    // The TF32 example (`examples/schedules/wgmma_tf32_gemm.sched`: wgmma.mma_async
    // m64n128k8 on f32 operands read as TF32, B transposed into shared memory by 4-byte
    // cp.async) in the NN layout, checked against the naive kernel (which truncates the
    // factors as `tf32(x)` does), beside cublasLt in TF32. Its smallest M is 2048 (blocks
    // of 256 rows in groups of eight), N a multiple of 128, K of 32 and at least 128.
    if !gpu_enabled() {
        return;
    }
    example_matches_the_reference(
        "wgmma_tf32_gemm",
        "matmul:m=2048,n=256,k=256,math=tf32",
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32",
        tessel::interp::TOLERANCE_TF32,
        true,
    );
}

#[test]
fn wgmma_conv2d_nhwc_matches_the_reference_on_the_gpu() {
    // The tensor-core conv example (`examples/schedules/wgmma_conv2d_nhwc.sched`: `im2col`,
    // then the wgmma GEMM, the data fetched by 16-byte cp.async zero-filled at the border).
    // Batch 1, as the example stores the result back at the digits of the GEMM row that
    // fold only there.
    if !gpu_enabled() {
        return;
    }
    example_matches_the_reference(
        "wgmma_conv2d_nhwc",
        "conv2d_nhwc:n=1,c=64,h=16,w=16,k=64,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32",
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
        tessel::interp::TOLERANCE_F16,
        false,
    );
}

const OOB_KERNEL: &str = r#"extern "C" __global__ void broken(float* A, float* B, float* C) {
  C[(long long)(threadIdx.x + 1) << 36] = 1.0f;
}"#;

const HANG_KERNEL: &str = r#"extern "C" __global__ void spin(float* A, float* B, float* C) {
  volatile int x = 1;
  while (x) { C[0] = A[0]; }
}"#;

#[test]
fn broken_kernels_fail_by_kind_and_the_run_goes_on() {
    if !gpu_enabled() {
        return;
    }
    let arch = device_arch();
    let (w, good) = seed_source("mlc_blocking_shared", "matmul:256x256x256", &arch);
    let oob = one_kernel(
        OOB_KERNEL,
        "broken",
        [1, 1, 1],
        [32, 1, 1],
        0,
        &["A", "B", "C"],
    );
    let hang = one_kernel(
        HANG_KERNEL,
        "spin",
        [1, 1, 1],
        [1, 1, 1],
        0,
        &["A", "B", "C"],
    );
    let bad_c = one_kernel(
        "this is not CUDA",
        "nope",
        [1, 1, 1],
        [1, 1, 1],
        0,
        &["A", "B", "C"],
    );
    let device = tessel::measure::Device::Cuda { arch };
    let candidates = vec![good.clone(), oob, good.clone(), hang, bad_c, good];
    let mut job = tessel::measure::session::job(&w, candidates, device, false, 3).unwrap();
    job.timing = quick_timing();
    let mut m =
        tessel::measure::worker::Measurer::new(tessel_bin()).with_timeout(Duration::from_secs(20));
    let (outcomes, _) = m.measure(&job).expect("the worker runs");
    let kinds: Vec<Option<FailureKind>> = outcomes
        .iter()
        .map(|o| o.as_ref().err().map(|f| f.kind))
        .collect();
    println!("outcomes: {kinds:?}");
    assert!(outcomes[0].is_ok(), "{:?}", outcomes[0]);
    assert!(
        matches!(kinds[1], Some(FailureKind::Runtime | FailureKind::Crash)),
        "{:?}",
        outcomes[1]
    );
    assert!(outcomes[2].is_ok(), "{:?}", outcomes[2]);
    assert_eq!(kinds[3], Some(FailureKind::Timeout), "{:?}", outcomes[3]);
    assert_eq!(kinds[4], Some(FailureKind::Compile), "{:?}", outcomes[4]);
    assert!(outcomes[5].is_ok(), "{:?}", outcomes[5]);
}

#[test]
fn builds_over_the_job_limits_are_rejected_before_they_run() {
    if !gpu_enabled() {
        return;
    }
    let arch = device_arch();
    let (w, good) = seed_source("mlc_blocking_shared", "matmul:256x256x256", &arch);
    let device = tessel::measure::Device::Cuda { arch };
    let mut job = tessel::measure::session::job(&w, vec![good], device, false, 3).unwrap();
    job.timing = quick_timing();
    // No kernel fits one register per block: the build is answered as rejected, with the
    // limit it broke, and never timed.
    job.build_limits = Some(tessel::measure::BuildLimits {
        max_spill_bytes: 0,
        max_stack_bytes: Some(0),
        max_registers_per_block: 1,
    });
    let mut m = tessel::measure::worker::Measurer::new(tessel_bin());
    let (outcomes, _) = m.measure(&job).expect("the worker runs");
    let f = outcomes[0].as_ref().expect_err("rejected");
    assert_eq!(f.kind, FailureKind::Rejected, "{f}");
    assert!(
        matches!(
            f.rejection,
            Some(tessel::measure::BuildRejection::Registers {
                threads: 64,
                limit: 1,
                ..
            })
        ),
        "{f:?}"
    );
    // With the device's real limits the same build runs.
    job.build_limits = Some(tessel::measure::BuildLimits {
        max_spill_bytes: 0,
        max_stack_bytes: Some(0),
        max_registers_per_block: 65536,
    });
    let (outcomes, _) = m.measure(&job).expect("the worker runs");
    assert!(outcomes[0].is_ok(), "{:?}", outcomes[0]);
}

/// Up to `n` verified CUDA sources of `spec` whose split-K partials are summed by the block
/// that arrives last at each tile (`serial_sum_at`): the default space with split-K and the
/// serial sum drawn always.
fn serial_split_sources(spec: &str, n: usize) -> Vec<Source> {
    let mut space = tessel::search::SearchSpace::cuda_default();
    let rule = space.split_k.as_mut().expect("a split-K rule");
    rule.probability = 1.0;
    rule.serial_sum = 1.0;
    let target = tessel::search::TargetLimits::Cuda(CudaLimits::sm90_default());
    let program = workload_of(spec).to_program();
    let mut search = tessel::search::RandomSearch::new(space.clone(), target.clone(), program, 5);
    let mut sources = Vec::new();
    for _ in 0..400 {
        if sources.len() == n {
            break;
        }
        let Ok(sch) = search.sample() else { continue };
        if !tessel::schedule::text::print(sch.trace()).contains("serial_sum_at(") {
            continue;
        }
        if let Ok(v) = tessel::search::postproc::verify(sch.program(), &space, &target) {
            sources.push(v.source);
        }
    }
    sources
}

#[test]
fn serial_split_k_sums_match_the_reference_on_the_gpu_run_after_run() {
    // The last block to arrive at a tile sums its split-K partials in the main kernel:
    // writers fence and count in an int workspace the runner zeroes once, and the last
    // one resets the count. Measured twice in one worker, which keeps the workspace, so
    // the second check runs on the counters the first job's timed runs left behind.
    if !gpu_enabled() {
        return;
    }
    let arch = device_arch();
    let device = tessel::measure::Device::Cuda { arch: arch.clone() };
    let mut m = tessel::measure::worker::Measurer::new(tessel_bin());
    for (spec, dtype) in [
        ("matmul:m=128,n=768,k=3072", DType::F32),
        ("matmul:m=13,n=1000,k=997,layout=nt", DType::F32),
        ("matmul:m=128,n=768,k=3072,dtype=f16,acc=f32", DType::F16),
        (
            "conv2d_nchw:n=1,c=256,h=14,w=14,k=256,r=3,s=3,stride=1,pad=1,dtype=f16",
            DType::F16,
        ),
    ] {
        let sources = serial_split_sources(spec, 3);
        assert!(!sources.is_empty(), "{spec}: no serial split-K sample");
        for s in &sources {
            assert!(s.code.contains("atomicAdd"), "{spec}: no arrival counter");
        }
        let w = workload_of(spec);
        let mut job =
            tessel::measure::session::job(&w, sources.clone(), device.clone(), false, 7).unwrap();
        job.timing = quick_timing();
        for round in 0..2 {
            let (outcomes, _) = m.measure(&job).expect("the worker runs");
            let labels = (0..outcomes.len()).map(|i| format!("{spec} sample {i} round {round}"));
            assert_within(labels, &outcomes, tessel::interp::tolerance(dtype));
        }
    }
}
