//! The cost model's program features through the public API and the CLI: named values of
//! hand-written schedules equal figures computed by hand; random samples of the CUDA and
//! CPU design spaces featurize to finite vectors of the advertised length;
//! `tessel model features` prints one `name value` line per feature.

use std::collections::BTreeMap;
use std::process::Command;
use tessel::cost_model::features::feature_table;
use tessel::cost_model::{featurize, DeviceSpec, FEATURE_NAMES};
use tessel::database::canonical_program;
use tessel::lower::{lower, Backend, Lowered};
use tessel::schedule::{replay, text};
use tessel::search::{RandomSearch, SearchSpace, SearchStrategy, TargetLimits};
use tessel::target::cuda::CudaLimits;
use tessel::workload::{self, Workload};

fn load(spec: &str) -> Workload {
    workload::from_cli(spec, |_| Err(std::io::Error::other("no files"))).expect("a preset")
}

fn lowered(spec: &str, schedule: &str, backend: Backend) -> Lowered {
    let path = format!(
        "{}/examples/schedules/{schedule}.sched",
        env!("CARGO_MANIFEST_DIR")
    );
    let trace = text::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let sch = replay(&trace, load(spec).to_program(), 0).unwrap();
    lower(sch.program(), backend).unwrap()
}

fn table(l: &Lowered, dev: &DeviceSpec) -> BTreeMap<&'static str, f32> {
    feature_table(l, dev).into_iter().collect()
}

/// The scale of count features.
fn log(x: f64) -> f32 {
    (1.0 + x).log2() as f32
}

fn assert_feature(t: &BTreeMap<&str, f32>, name: &str, want: f32) {
    let got = *t.get(name).unwrap_or_else(|| panic!("no feature {name}"));
    assert!((got - want).abs() < 1e-4, "{name}: {got}, expected {want}");
}

#[test]
fn tiled_cuda_matmul_features_match_hand_counts() {
    // 256^3 matmul, 64x64 tiles of C per block (16 blocks of 64 threads), k steps of 8,
    // A and B tiles of 64x8 and 8x64 floats in shared memory.
    let l = lowered("matmul:256x256x256", "mlc_blocking_shared", Backend::Cuda);
    let t = table(&l, &DeviceSpec::cuda("sm_90a"));
    assert_feature(&t, "log_kernels", log(1.0));
    assert_feature(&t, "log_blocks", log(16.0));
    assert_feature(&t, "log_threads_per_block", log(64.0));
    assert_feature(
        &t,
        "log_shared_bytes_per_block",
        log((64.0 * 8.0 + 8.0 * 64.0) * 4.0),
    );
    // Global bytes a block touches: its 64 rows of A and 64 columns of B (whole K), and
    // its 64x64 tile of C; per k step the 64x8 and 8x64 tiles, plus one row of the
    // thread's C tile in the write-back (whose outermost loop runs over rows).
    let a_or_b = 64.0 * 256.0 * 4.0;
    assert_feature(
        &t,
        "log_sum_global_bytes_per_block",
        log(2.0 * a_or_b + 64.0 * 64.0 * 4.0),
    );
    assert_feature(
        &t,
        "log_sum_global_bytes_per_step",
        log(3.0 * 64.0 * 8.0 * 4.0),
    );
    assert_feature(
        &t,
        "log_global_bytes",
        log(16.0 * (2.0 * a_or_b + 64.0 * 64.0 * 4.0)),
    );
    assert_feature(&t, "log_flops", log(2.0 * 256f64.powi(3)));
    assert_feature(&t, "main_log_float_fma", log(256f64.powi(3)));
    assert_feature(&t, "main_log_float_addsub", 0.0);
    // The accumulation reads A_shared and B_shared (512 floats each per block).
    assert_feature(&t, "main_write_is_local", 1.0);
    assert_feature(&t, "main_read0_is_shared", 1.0);
    assert_feature(&t, "main_read0_log_bytes_per_block", log(512.0 * 4.0));
    // 2 barriers per k step, 32 steps.
    assert_feature(&t, "log_barriers_per_block", log(64.0));
    // 64 locals + 16 registers: 12 resident blocks of 64 threads out of 2048.
    assert_feature(&t, "occupancy", 12.0 * 64.0 / 2048.0);
}

#[test]
fn vectorized_and_parallel_cpu_loops_are_seen() {
    // cpu_matmul on 128^3: 8 parallel tiles, j_2 vectorized by 16, i_2 unrolled by 4.
    let l = lowered("matmul:128x128x128", "cpu_matmul", Backend::Cpu);
    let t = table(&l, &DeviceSpec::cpu(4));
    assert_feature(&t, "main_log_vector_len", log(16.0));
    assert_feature(&t, "main_log_vectorized", log(16.0));
    assert_feature(&t, "main_log_unrolled", log(4.0));
    assert_feature(&t, "log_parallel_extent", log(8.0));
    assert_feature(&t, "main_log_parallel", log(8.0));
    assert_feature(&t, "log_blocks", log(1.0));
    // 8 tiles on 4 cores: 2 full waves.
    assert_feature(&t, "log_waves", log(2.0));
    assert_feature(&t, "wave_efficiency", 1.0);
}

/// Featurizes up to `n` random candidates of a workload's space.
fn sample_features(spec: &str, target: TargetLimits, dev: &DeviceSpec, n: usize) -> Vec<Vec<f32>> {
    let space = match target {
        TargetLimits::Cpu => SearchSpace::cpu_default(),
        TargetLimits::Cuda(_) => SearchSpace::cuda_default(),
    };
    let program = canonical_program(&load(spec)).unwrap();
    let mut search = RandomSearch::new(space, target, program, 7);
    let proposal = search.propose(n, &mut |_| false);
    proposal
        .candidates
        .iter()
        .map(|c| featurize(&c.verified.lowered, dev))
        .collect()
}

#[test]
fn random_samples_featurize_to_finite_vectors_of_every_name() {
    let cuda = || TargetLimits::Cuda(CudaLimits::sm90_default());
    let conv = "conv2d_nchw:n=1,c=8,h=14,w=14,k=16,r=3,s=3,stride=1,pad=1";
    let cases = [
        ("matmul:128x128x64", cuda(), DeviceSpec::cuda("sm_90a")),
        (conv, cuda(), DeviceSpec::cuda("sm_80")),
        ("matmul:128x128x64", TargetLimits::Cpu, DeviceSpec::cpu(2)),
        (conv, TargetLimits::Cpu, DeviceSpec::cpu(8)),
    ];
    for (spec, target, dev) in cases {
        let vectors = sample_features(spec, target, &dev, 12);
        assert!(
            vectors.len() >= 6,
            "{spec}: only {} candidates",
            vectors.len()
        );
        for v in &vectors {
            assert_eq!(v.len(), FEATURE_NAMES.len(), "{spec}");
            for (name, x) in FEATURE_NAMES.iter().zip(v) {
                assert!(x.is_finite(), "{spec}: {name} = {x}");
            }
        }
        // Different schedules look different to the model.
        let distinct: std::collections::BTreeSet<Vec<u32>> = vectors
            .iter()
            .map(|v| v.iter().map(|x| x.to_bits()).collect())
            .collect();
        assert!(
            distinct.len() > vectors.len() / 2,
            "{spec}: {} distinct",
            distinct.len()
        );
    }
}

#[test]
fn feature_names_are_unique() {
    let unique: std::collections::BTreeSet<_> = FEATURE_NAMES.iter().collect();
    assert_eq!(unique.len(), FEATURE_NAMES.len());
}

#[test]
fn cli_prints_one_line_per_feature() {
    for (target, schedule, spec) in [
        ("cuda", "mlc_blocking_shared", "matmul:256x256x256"),
        ("cpu", "cpu_matmul", "matmul:128x128x128"),
    ] {
        let stdout = succeeded(tessel(&[
            "model",
            "features",
            spec,
            "--schedule",
            &format!("examples/schedules/{schedule}.sched"),
            "--target",
            target,
        ]));
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), FEATURE_NAMES.len(), "{target}");
        for (line, name) in lines.iter().zip(FEATURE_NAMES) {
            let (n, v) = line.split_once(' ').expect("name value");
            assert_eq!(n, *name);
            let v: f32 = v.parse().expect("a number");
            assert!(v.is_finite());
        }
    }
}

#[test]
fn tensor_core_instructions_count_as_their_work() {
    // The mma.sync example: its multiply-adds are in `KStmt::Mma` instructions, which the
    // features count as their scalar meaning (as if one thread ran a warp's tile), so the
    // kernel shows at least the GEMM's M * N * K multiply-adds, not none.
    let spec = "matmul:m=128,n=256,k=96,dtype=f16,acc=f32";
    let l = lowered(spec, "tensor_core_gemm", Backend::Cuda);
    let t = table(&l, &DeviceSpec::cuda("sm_90a"));
    let fma = t["log_sum_float_fma"];
    assert!(
        fma >= log(128.0 * 256.0 * 96.0) - 1e-3,
        "log_sum_float_fma {fma}"
    );
    assert!(t.values().all(|v| v.is_finite()));
}

#[test]
fn cli_scores_schedules_with_the_stored_model_best_first() {
    // A database with CPU records of one GEMM and no model (any the tune stored removed):
    // scoring is refused with what to do; once a model is trained, each schedule gets
    // one score, best first.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let naive = dir.path().join("naive.sched");
    std::fs::write(&naive, "").unwrap();
    let spec = "matmul:128x128x128";
    let db_arg = db.to_str().unwrap();
    succeeded(tessel(&[
        "tune", spec, "--target", "cpu", "--trials", "12", "--db", db_arg, "--seed", "1",
    ]));
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("DELETE FROM models", [])
        .unwrap();
    let score = || {
        tessel(&[
            "model",
            "score",
            spec,
            "--target",
            "cpu",
            "--db",
            db_arg,
            "--schedule",
            "examples/schedules/cpu_matmul.sched",
            naive.to_str().unwrap(),
        ])
    };
    let refused = score();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("no cpu model") && stderr.contains("tessel model train"),
        "{stderr}"
    );
    succeeded(tessel(&[
        "model", "train", "--target", "cpu", "--db", db_arg,
    ]));
    let stdout = succeeded(score());
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(lines[0].starts_with("model of "), "{stdout}");
    let scores: Vec<f64> = lines[1..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert!(
        scores[0] >= scores[1] && scores.iter().all(|s| s.is_finite()),
        "{stdout}"
    );
    for name in ["cpu_matmul.sched", "naive.sched"] {
        assert!(stdout.contains(name), "{stdout}");
    }
}

/// `tessel ARGS` run from the repository root.
fn tessel(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run tessel")
}

/// The standard output of a run that must have succeeded.
fn succeeded(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
