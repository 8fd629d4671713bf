//! The validation set (`benches/validation.toml`, drawn by `benches/validation_set.py`):
//! it has the promised make-up (24 GEMMs over all four layouts, a quarter prime; 8 odd
//! convs, stride 1 and 2, NCHW and NHWC, batch 1..16), every entry is a workload, and the
//! CUDA space offers candidates for each without compiling.

use std::collections::BTreeSet;
use tessel::search::{SearchSpace, TargetLimits};
use tessel::target::cuda::CudaLimits;

fn entries(kind: &str) -> Vec<toml::Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/validation.toml");
    let text = std::fs::read_to_string(path).expect("benches/validation.toml");
    let doc: toml::Value = toml::from_str(&text).expect("valid TOML");
    doc[kind].as_array().expect("an array of tables").clone()
}

fn workload(e: &toml::Value) -> String {
    e["workload"]
        .as_str()
        .expect("a workload string")
        .to_string()
}

/// The `key=value` integers of a preset spec.
fn arg(spec: &str, key: &str) -> String {
    spec.split([':', ','])
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{spec}: no {key}"))
        .to_string()
}

fn is_prime(n: i64) -> bool {
    n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| n % d != 0)
}

#[test]
fn the_set_has_its_promised_make_up() {
    let gemms = entries("gemm");
    assert!(gemms.len() >= 24);
    let layouts: BTreeSet<String> = gemms.iter().map(|g| arg(&workload(g), "layout")).collect();
    assert_eq!(layouts.len(), 4, "{layouts:?}");
    let mut primes = 0;
    for g in &gemms {
        let spec = workload(g);
        let dims: Vec<i64> = ["m", "n", "k"]
            .iter()
            .map(|k| arg(&spec, k).parse().unwrap())
            .collect();
        assert!(dims.iter().all(|d| (1..=4096 + 64).contains(d)), "{spec}");
        if g["kind"].as_str() == Some("prime") {
            assert!(dims.iter().all(|d| is_prime(*d)), "{spec}");
            primes += 1;
        }
    }
    assert!(primes * 4 >= gemms.len(), "{primes} prime GEMMs");
    let convs = entries("conv");
    assert!(convs.len() >= 8);
    let specs: Vec<String> = convs.iter().map(workload).collect();
    for layout in ["conv2d_nchw:", "conv2d_nhwc:"] {
        assert!(specs.iter().any(|s| s.starts_with(layout)), "no {layout}");
    }
    for stride in ["1", "2"] {
        assert!(specs.iter().any(|s| arg(s, "stride") == stride));
    }
    for s in &specs {
        let n: i64 = arg(s, "n").parse().unwrap();
        assert!((1..=16).contains(&n), "{s}");
        for key in ["c", "h", "k"] {
            assert!(
                arg(s, key).parse::<i64>().unwrap() % 2 == 1,
                "{s}: {key} is even"
            );
        }
    }
}

#[test]
fn the_tensor_core_entries_are_16_bit_gemms_accumulated_in_f32() {
    let entries = entries("tensor_core");
    assert!(entries.len() >= 9);
    for e in &entries {
        let spec = workload(e);
        let dtype = arg(&spec, "dtype");
        assert!(dtype == "f16" || dtype == "bf16", "{spec}");
        assert_eq!(arg(&spec, "acc"), "f32", "{spec}");
    }
}

#[test]
fn every_entry_has_candidates_in_the_cuda_space() {
    let space = SearchSpace::cuda_default();
    let target = TargetLimits::Cuda(CudaLimits::sm90_default());
    let tensor_core = entries("tensor_core");
    for e in entries("gemm")
        .iter()
        .chain(&entries("conv"))
        .chain(&tensor_core)
    {
        let spec = workload(e);
        let w = tessel::workload::from_cli(&spec, |_| Err(std::io::Error::other("no files")))
            .unwrap_or_else(|err| panic!("{spec}: {err}"));
        let p = tessel::database::canonical_program(&w).unwrap();
        let got = tessel::search::sample(&space, &target, &p, 1, 1)
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(got.len(), 1, "{spec}");
    }
}
