//! The command line: what a user sees for good and bad input. Every error ends with a
//! clear message and a non-zero exit, never a panic.

use std::process::Command;

mod cli_util;
use cli_util::tessel;

fn write_temp(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("tessel-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().to_string()
}

#[test]
fn show_prints_the_seed_schedule() {
    let (ok, out, err) = tessel(&[
        "show",
        "matmul:1024x1024x1024",
        "--schedule",
        "examples/schedules/mlc_blocking_shared.sched",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("for i_1_j_1_fused in T.thread_binding(64, thread=\"threadIdx.x\"):"));
    assert!(out.contains("with T.block(\"C_init\"):"));
}

#[test]
fn the_printed_trace_is_a_valid_schedule_file() {
    let (ok, trace, err) = tessel(&[
        "show",
        "matmul:256x256x256",
        "--schedule",
        "examples/schedules/gemm_2_thread_tiling.sched",
        "--emit",
        "trace",
    ]);
    assert!(ok, "{err}");
    let path = write_temp("printed.sched", &trace);
    let (ok1, ir1, _) = tessel(&["show", "matmul:256x256x256", "--schedule", &path]);
    let (ok2, ir2, _) = tessel(&[
        "show",
        "matmul:256x256x256",
        "--schedule",
        "examples/schedules/gemm_2_thread_tiling.sched",
    ]);
    assert!(ok1 && ok2);
    assert_eq!(ir1, ir2);
}

#[test]
fn show_emits_cuda_and_c() {
    let (ok, cuda, err) = tessel(&[
        "show",
        "matmul:256x256x256",
        "--schedule",
        "examples/schedules/mlc_blocking_shared.sched",
        "--emit",
        "cuda",
    ]);
    assert!(ok, "{err}");
    assert!(cuda.contains("extern \"C\" __global__"));
    assert!(cuda.contains("__syncthreads();"));
    let (ok, c, err) = tessel(&["show", "matmul:64x64x64", "--emit", "c"]);
    assert!(ok, "{err}");
    assert!(c.contains("void tessel_entry_0(void **args)"));
}

#[test]
fn workload_files_are_read() {
    let path = write_temp(
        "mm.workload",
        "input A: f32[16, 8]\ninput B: f32[8, 4]\nC[i, j] = sum(A[i, k] * B[k, j], k)\n",
    );
    let (ok, out, err) = tessel(&["show", &path]);
    assert!(ok, "{err}");
    assert!(out.contains("with T.block(\"C\"):"));
}

#[test]
fn malformed_workload_text_points_at_line_and_column() {
    let path = write_temp(
        "bad.workload",
        "input A: f32[16, 8]\nC[i, j] = sum(A[i, k] * , k)\n",
    );
    let (ok, _, err) = tessel(&["show", &path]);
    assert!(!ok);
    assert!(err.contains("2:"), "no line number in: {err}");
}

#[test]
fn unknown_presets_and_bad_shapes_are_errors() {
    let (ok, _, err) = tessel(&["show", "matmull:64x64x64"]);
    assert!(!ok);
    assert!(err.to_lowercase().contains("matmull"), "{err}");
    let (ok, _, err) = tessel(&["show", "matmul:0x64x64"]);
    assert!(!ok);
    assert!(!err.is_empty());
    let (ok, _, err) = tessel(&[
        "show",
        "conv2d_nchw:n=1,c=3,h=2,w=2,k=4,r=5,s=5,stride=1,pad=0",
    ]);
    assert!(!ok);
    assert!(!err.is_empty());
}

#[test]
fn bad_trace_files_are_errors() {
    let path = write_temp(
        "bad.sched",
        "b0 = get_block(\"C\")\ni, j, k = get_loops(b0)\ni_0, i_1 = splitt(i, factors=[None, 8])\n",
    );
    let (ok, _, err) = tessel(&["show", "matmul:64x64x64", "--schedule", &path]);
    assert!(!ok);
    assert!(err.contains("3:") && err.contains("splitt"), "{err}");
}

#[test]
fn illegal_primitives_are_errors_naming_the_place() {
    let path = write_temp(
        "illegal.sched",
        "b0 = get_block(\"C\")\ni, j, k = get_loops(b0)\nbind(k, thread=\"blockIdx.x\")\n",
    );
    let (ok, _, err) = tessel(&["show", "matmul:64x64x64", "--schedule", &path]);
    assert!(!ok);
    assert!(
        err.contains("cannot bind loop k to blockIdx.x: it carries the reduction of block C"),
        "{err}"
    );
    let path = write_temp("missing.sched", "b0 = get_block(\"D\")\n");
    let (ok, _, err) = tessel(&["show", "matmul:64x64x64", "--schedule", &path]);
    assert!(!ok);
    assert!(err.contains("no block named \"D\""), "{err}");
}

#[test]
fn check_runs_a_schedule_against_the_reference() {
    let (ok, out, err) = tessel(&[
        "check",
        "matmul:128x128x16",
        "--schedule",
        "examples/schedules/mlc_blocking_shared.sched",
    ]);
    assert!(ok, "{err}");
    assert!(out.starts_with("ok: relative error"), "{out}");
}

#[test]
fn run_on_the_cpu_checks_times_and_compares() {
    // Issue 3's acceptance command, as CI runs it on a fresh machine.
    let (ok, out, err) = tessel(&[
        "run",
        "matmul:512x512x512",
        "--schedule",
        "examples/schedules/cpu_matmul.sched",
        "--target",
        "cpu",
        "--compare",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("check     ok: relative error"), "{out}");
    assert!(out.contains("GFLOP/s"), "{out}");
    assert!(
        out.contains("tessel / ndarray dot (matrixmultiply) = "),
        "{out}"
    );
}

#[test]
fn run_warm_times_without_evicting_and_says_so() {
    // `--warm`: the buffers stay in the caches between timed runs, as the Python peers'
    // are; the output says which way a latency was taken.
    let args = [
        "run",
        "matmul:128x128x128",
        "--schedule",
        "examples/schedules/cpu_matmul.sched",
        "--target",
        "cpu",
    ];
    let (ok, out, err) = tessel(&[&args[..], &["--warm"]].concat());
    assert!(ok, "{err}");
    assert!(out.contains("check     ok: relative error"), "{out}");
    let latency = out.lines().find(|l| l.starts_with("latency")).unwrap();
    assert!(latency.ends_with("runs, warm caches)"), "{out}");
    let (ok, out, err) = tessel(&args);
    assert!(ok, "{err}");
    assert!(!out.contains("warm caches"), "{out}");
}

#[test]
fn cuda_without_a_driver_is_a_clear_error() {
    if std::path::Path::new("/dev/nvidia0").exists() {
        return; // a GPU machine: the CUDA path is exercised by tests/gpu.rs there
    }
    let (ok, _, err) = tessel(&["run", "matmul:64x64x64", "--target", "cuda"]);
    assert!(!ok);
    assert!(
        err.contains("no CUDA driver found: use --target cpu"),
        "{err}"
    );
}

/// `build --emit ptx` prints what NVRTC produced (the pipelined seed's `cp.async`) on
/// stdout and the register report on stderr; `--emit cuda` what it was given.
#[test]
fn build_emits_the_ptx_and_the_cuda_nvrtc_sees() {
    let sched = "examples/schedules/seed_pipelined_gemm.sched";
    let (ok, ptx, report) = tessel(&[
        "build",
        "matmul:256x256x256",
        "--schedule",
        sched,
        "--emit",
        "ptx",
    ]);
    assert!(ok, "{report}");
    assert!(ptx.contains(".entry") && ptx.contains("cp.async"), "{ptx}");
    assert!(report.contains("registers"), "{report}");
    let (ok, cuda, _) = tessel(&[
        "build",
        "matmul:256x256x256",
        "--schedule",
        sched,
        "--emit",
        "cuda",
    ]);
    assert!(ok);
    assert!(
        cuda.contains("__global__") && !cuda.contains("registers,"),
        "{cuda}"
    );
}

/// `build --cubin FILE` writes the CUBIN NVRTC built (an ELF file, as large as the
/// report says) for the toolkit's disassemblers, and says where; a path it cannot write
/// is an error naming it.
#[test]
fn build_writes_the_cubin_for_a_disassembler() {
    let dir = std::env::temp_dir().join(format!("tessel-cubin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gemm.cubin");
    let file = path.to_str().unwrap();
    let sched = "examples/schedules/seed_pipelined_gemm.sched";
    let args = [
        "build",
        "matmul:256x256x256",
        "--schedule",
        sched,
        "--cubin",
    ];
    let (ok, report, err) = tessel(&[&args[..], &[file]].concat());
    assert!(ok, "{err}");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
    assert!(
        report.contains(&format!("({} bytes of SASS)", bytes.len()))
            && report.contains(&format!("cubin     {file}")),
        "{report}"
    );
    let missing = dir.join("no/such/dir/gemm.cubin");
    let (ok, _, err) = tessel(&[&args[..], &[missing.to_str().unwrap()]].concat());
    assert!(!ok);
    assert!(
        err.contains("writing the CUBIN to") && err.contains("no/such/dir"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With several kernels, each line of `build`'s report gives that kernel's own launch
/// (ptxas lists them in an order of its own): the staged NCHW conv's two kernels (its
/// two stages in one launch, then the GEMM).
#[test]
fn builds_report_names_each_kernel_with_its_own_launch() {
    let w = "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32";
    let sched = "benches/probe/wgmma_conv2d_nchw_tuned.sched";
    let (ok, cuda, report) = tessel(&["build", w, "--schedule", sched, "--emit", "cuda"]);
    assert!(ok, "{report}");
    // `// launch: grid=(a, b, c) ...` comes right before the kernel's signature.
    let mut grids = std::collections::BTreeMap::new();
    let lines: Vec<&str> = cuda.lines().collect();
    for pair in lines.windows(2) {
        if let (Some(g), Some(sig)) = (
            pair[0].strip_prefix("// launch: grid=("),
            pair[1].split("__global__").nth(1),
        ) {
            let grid = g.split(')').next().unwrap().to_string();
            let name = sig
                .split('(')
                .nth(1)
                .unwrap()
                .split(')')
                .nth(1)
                .unwrap()
                .trim();
            grids.insert(name.to_string(), grid);
        }
    }
    assert_eq!(grids.len(), 2, "{cuda}");
    // The GEMM waits for the staging in the kernel (programmatic dependent launch), and
    // NVRTC takes it (the report below).
    assert_eq!(cuda.matches("griddepcontrol.wait;").count(), 1, "{cuda}");
    let mut seen = 0;
    for line in report.lines().filter(|l| l.starts_with("kernel ")) {
        let name = line["kernel ".len()..].split(':').next().unwrap();
        let grid = line
            .split("grid [")
            .nth(1)
            .unwrap()
            .split(']')
            .next()
            .unwrap();
        assert_eq!(
            grids.get(name),
            Some(&grid.to_string()),
            "{line}\n{grids:?}"
        );
        seen += 1;
    }
    assert_eq!(seen, 2, "{report}");
}

/// `--schedule` takes a record's JSON trace (what `db export` writes) as well as text.
#[test]
fn a_json_trace_is_a_schedule_file() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/schedules/gemm_2_thread_tiling.sched"),
    )
    .unwrap();
    let trace = tessel::schedule::text::parse(&text).unwrap();
    let json = write_temp("trace.json", &tessel::schedule::json::to_json(&trace));
    let (ok, from_json, err) = tessel(&["show", "matmul:256x256x256", "--schedule", &json]);
    assert!(ok, "{err}");
    let (_, from_text, _) = tessel(&[
        "show",
        "matmul:256x256x256",
        "--schedule",
        "examples/schedules/gemm_2_thread_tiling.sched",
    ]);
    assert_eq!(from_json, from_text);
    let bad = write_temp("bad.json", "{\"format\": \"something else\"}");
    let (ok, _, err) = tessel(&["show", "matmul:256x256x256", "--schedule", &bad]);
    assert!(!ok && err.contains("bad.json"), "{err}");
}

#[test]
fn a_reader_that_stops_early_ends_the_output_without_a_panic() {
    use std::io::Read;
    use std::process::Stdio;
    // `tessel sample ... | head -c 1`: the pipe closes after the first byte of some 200 KB,
    // more than a pipe holds.
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args([
            "sample",
            "matmul:1009x523x311",
            "--target",
            "cuda",
            "-n",
            "64",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tessel");
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // stdout is dropped here: the rest of the output meets a closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}
