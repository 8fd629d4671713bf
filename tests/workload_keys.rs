//! Golden workload keys: one line `SPEC KEY` per preset spec.
//!
//! A key is the SHA-256 of the canonical text, so a change here means every stored
//! record of that workload is orphaned: bump `FORMAT_VERSION` rather than let keys drift.
//! `TESSEL_BLESS=1 cargo test --test workload_keys` rewrites the golden file; a reviewer
//! reads the diff.

use tessel::workload::{parse, preset, FORMAT_VERSION};

const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/golden/workload_keys.txt"
);

/// Every preset, then every workload of the benchmark suite (`bench/suite.toml`).
const SPECS: &[&str] = &[
    "matmul:1024x1024x1024",
    "matmul:m=256,n=512,k=128,layout=nt",
    "matmul:m=256,n=512,k=128,layout=tn",
    "matmul:m=256,n=512,k=128,dtype=f16",
    "batch_matmul:b=16,m=512,n=512,k=64",
    "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
    "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=2,dilation=2",
    "conv2d_nhwc:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
    "depthwise_conv2d_nchw:n=1,c=64,h=56,w=56,r=3,s=3,stride=1,pad=1",
    "dense_bias_relu:m=128,n=3072,k=768",
    "conv2d_relu_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
    "concat_conv2d_relu_nchw:n=1,c1=32,c2=32,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
    // bench/suite.toml
    "matmul:2048x2048x2048",
    "matmul:4096x4096x4096",
    "matmul:128x3072x768",
    "matmul:512x768x3072",
    "matmul:1000x1000x1000",
    "matmul:4096x4096x64",
    "conv2d_nchw:n=1,c=256,h=14,w=14,k=256,r=3,s=3,stride=1,pad=1",
    "conv2d_nchw:n=1,c=512,h=7,w=7,k=512,r=3,s=3,stride=1,pad=1",
    "conv2d_nchw:n=16,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
    "conv2d_nchw:n=1,c=64,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1",
    "conv2d_nchw:n=1,c=256,h=56,w=56,k=64,r=1,s=1,stride=1,pad=0",
];

#[test]
fn workload_keys_match_golden() {
    assert_eq!(FORMAT_VERSION, 1);
    let mut lines = String::new();
    for spec in SPECS {
        let w = preset(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        // The key survives the trip through text and through the canonical form.
        assert_eq!(parse(&w.to_text()).map(|b| b.key()), Ok(w.key()), "{spec}");
        assert_eq!(
            parse(&w.canonical_text()).map(|b| b.key()),
            Ok(w.key()),
            "{spec}"
        );
        lines.push_str(&format!("{spec} {}\n", w.key()));
    }
    if std::env::var("TESSEL_BLESS").as_deref() == Ok("1") {
        std::fs::write(GOLDEN, &lines).expect("write the golden file");
        return;
    }
    let golden = std::fs::read_to_string(GOLDEN).unwrap_or_default();
    assert_eq!(
        golden, lines,
        "workload keys changed; if intended, rerun with TESSEL_BLESS=1 and review the diff"
    );
}

#[test]
fn keys_are_unique_across_the_golden_specs() {
    let mut keys: Vec<String> = SPECS
        .iter()
        .filter_map(|s| preset(s).ok())
        .map(|w| w.key())
        .collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n);
    assert_eq!(n, SPECS.len());
}

#[test]
fn shorthand_and_keyed_matmul_share_a_key() {
    let a = preset("matmul:128x3072x768").map(|w| w.key());
    let b = preset("matmul:m=128,n=3072,k=768,layout=nn,dtype=f32").map(|w| w.key());
    assert_eq!(a, b);
}
