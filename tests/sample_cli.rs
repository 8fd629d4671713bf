//! `tessel sample`: what the space offers for a shape, as JSON, without compiling or
//! measuring. A GEMM with prime dimensions gets real thread blocks from imperfect tiles
//! (exact divisors alone leave it 1-wide tiles).

use std::process::Command;

fn sample_json(args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .arg("sample")
        .args(args)
        .arg("--json")
        .output()
        .expect("run tessel");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    match serde_json::from_slice(&out.stdout).expect("one JSON document") {
        serde_json::Value::Array(items) => items,
        other => panic!("not an array: {other}"),
    }
}

fn median(mut xs: Vec<i64>) -> i64 {
    xs.sort_unstable();
    xs[xs.len() / 2]
}

#[test]
fn prime_gemm_samples_have_large_blocks() {
    let items = sample_json(&["matmul:1009x523x311", "--target", "cuda", "-n", "64"]);
    assert_eq!(items.len(), 64);
    let mut outputs = Vec::new();
    for it in &items {
        let obj = it.as_object().expect("an object per candidate");
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "outputs_per_block",
                "pipeline_stages",
                "shared_bytes",
                "threads_per_block",
                "trace"
            ]
        );
        let threads = obj["threads_per_block"].as_i64().unwrap();
        assert!((32..=1024).contains(&threads), "{it}");
        assert!(obj["shared_bytes"].as_i64().unwrap() <= 227 * 1024, "{it}");
        // Prime extents are padded: by pad_einsum (a GEMM) or imperfect tiles.
        let trace = obj["trace"].as_str().unwrap();
        assert!(
            trace.contains("pad_einsum(") || trace.contains("sample_tile("),
            "{trace}"
        );
        outputs.push(obj["outputs_per_block"].as_i64().unwrap());
    }
    let m = median(outputs);
    assert!(m >= 1024, "median outputs per block {m}");
}

#[test]
fn cpu_samples_and_seeds_are_reproducible() {
    let a = sample_json(&[
        "matmul:64x48x32",
        "--target",
        "cpu",
        "-n",
        "4",
        "--seed",
        "3",
    ]);
    let b = sample_json(&[
        "matmul:64x48x32",
        "--target",
        "cpu",
        "-n",
        "4",
        "--seed",
        "3",
    ]);
    assert_eq!(a.len(), 4);
    assert_eq!(a, b);
    for it in &a {
        assert_eq!(it["threads_per_block"], 1, "{it}");
        assert_eq!(it["shared_bytes"], 0, "{it}");
    }
}

#[test]
fn a_space_file_replaces_the_default_space() {
    // The shipped space with pipelining switched off: no sample has a second stage.
    let shipped = include_str!("../search_spaces/cuda.toml");
    let single = shipped.replace("stages = [1, 2, 3, 4]", "stages = [1]");
    assert_ne!(single, shipped, "the shipped space lists its stage counts");
    let path = std::env::temp_dir().join(format!("tessel-sample-{}.toml", std::process::id()));
    std::fs::write(&path, single).unwrap();
    let args = ["matmul:256x256x256", "--target", "cuda", "-n", "16"];
    let with_file = sample_json(&[&args[..], &["--space", path.to_str().unwrap()]].concat());
    let shipped_stages: Vec<i64> = sample_json(&args)
        .iter()
        .map(|it| it["pipeline_stages"].as_i64().unwrap())
        .collect();
    std::fs::remove_file(&path).ok();
    assert_eq!(with_file.len(), 16);
    assert!(with_file.iter().all(|it| it["pipeline_stages"] == 1));
    assert!(shipped_stages.iter().any(|&s| s > 1), "{shipped_stages:?}");
}

/// Writes each sampled trace of `items` to a file and checks it against the reference
/// with the interpreter (`tessel check`).
fn check_samples(spec: &str, items: &[serde_json::Value]) {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, it) in items.iter().enumerate() {
        let path = dir.path().join(format!("{i}.sched"));
        std::fs::write(&path, it["trace"].as_str().unwrap()).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
            .args(["check", spec, "--schedule"])
            .arg(&path)
            .output()
            .expect("run tessel");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{spec}: {stdout}{stderr}");
        assert!(stdout.starts_with("ok"), "{spec}: {stdout}");
    }
}

/// A workload with fewer outputs than a warp gets blocks of its size (the space's minimum
/// of 32 threads left it no candidate, so a GPU tune of it had nothing to measure), and
/// each such schedule computes the reference.
#[test]
fn workloads_smaller_than_a_warp_get_blocks_of_their_size() {
    for (spec, outputs) in [
        ("matmul:m=4,n=4,k=4", 16),
        ("conv2d_nchw:n=1,c=8,h=4,w=4,k=1,r=3,s=3", 4),
        ("batch_matmul:b=1,m=1,n=1,k=1", 1),
    ] {
        let items = sample_json(&[spec, "--target", "cuda", "-n", "4"]);
        assert!(!items.is_empty(), "{spec}: no candidate");
        for it in &items {
            let threads = it["threads_per_block"].as_i64().unwrap();
            assert!((1..=outputs).contains(&threads), "{spec}: {it}");
        }
        check_samples(spec, &items);
    }
}

/// A nest of extents 1 on the CPU: the plain sketch keeps a loop it cannot vectorize
/// serial instead of failing (every sample of a 1 x 1 conv failed, and its tune found no
/// candidate).
#[test]
fn a_degenerate_cpu_nest_is_sampled_with_serial_loops() {
    let spec = "conv2d_nchw:n=1,c=1,h=1,w=1,k=1,r=1,s=1";
    let items = sample_json(&[spec, "--target", "cpu", "-n", "2"]);
    assert!(!items.is_empty(), "{spec}: no candidate");
    check_samples(spec, &items);
}

/// A small output over a long reduction is offered split-K counts past 16 (up to 256
/// where the partial results stay within `split_k.max_partial_elements`), and such
/// samples compute the reference.
#[test]
fn a_skinny_gemm_is_split_into_many_parts_and_stays_correct() {
    let spec = "matmul:m=2,n=3,k=4096";
    let items = sample_json(&[spec, "--target", "cuda", "-n", "32", "--seed", "1"]);
    let count = |trace: &str| -> Option<i64> {
        // The split-K count: the categorical right before the split that rfactor takes.
        let lines: Vec<&str> = trace.lines().collect();
        let rf = lines.iter().position(|l| l.contains("= rfactor("))?;
        let cat = lines[..rf]
            .iter()
            .rev()
            .find(|l| l.contains("sample_categorical("))?;
        let list = cat.split("candidates=[").nth(1)?.split(']').next()?;
        let candidates: Vec<i64> = list
            .split(", ")
            .map(|c| c.parse().ok())
            .collect::<Option<_>>()?;
        let decision: usize = cat
            .split("decision=")
            .nth(1)?
            .trim_end_matches(')')
            .parse()
            .ok()?;
        candidates.get(decision).copied()
    };
    let many: Vec<serde_json::Value> = items
        .iter()
        .filter(|it| count(it["trace"].as_str().unwrap()).is_some_and(|c| c > 16))
        .cloned()
        .collect();
    assert!(!many.is_empty(), "no sample split more than 16 ways");
    check_samples(spec, &many);
}

#[test]
fn a_sampled_trace_grows_back_into_its_decisions_and_a_bad_one_is_named() {
    let dir = std::env::temp_dir().join(format!("tessel-like-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let items = sample_json(&["matmul:96x80x64", "--target", "cuda", "-n", "2"]);
    let trace = items[1]["trace"].as_str().unwrap();
    let path = dir.join("like.sched");
    std::fs::write(&path, trace).unwrap();
    let like = path.to_str().unwrap();
    let again = sample_json(&["matmul:96x80x64", "--target", "cuda", "--like", like]);
    assert_eq!(again.len(), 1);
    // The same decisions (the grown trace may fetch a loop list fewer times).
    let decisions = |t: &str| -> Vec<String> {
        t.lines()
            .filter_map(|l| Some(l.split_once("decision=")?.1.to_string()))
            .collect()
    };
    let grown = again[0]["trace"].as_str().unwrap();
    assert_eq!(decisions(grown), decisions(trace), "{grown}");
    assert_eq!(again[0]["outputs_per_block"], items[1]["outputs_per_block"]);
    std::fs::write(&path, "b0 = get_block(\"t2\")\nsplit(b0, factors=[2])\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(["sample", "matmul:96x80x64", "--like", like])
        .output()
        .expect("run tessel");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("like.sched:2"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}
