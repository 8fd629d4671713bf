//! Unit tests of the workload language: parsing, errors, text forms, presets, lowering.

use super::*;
use crate::ir::{BinOp, BufferKind, DType, Expr, IterKind, Node, Program};

const MATMUL: &str = "# matmul
input A: f32[1024, 1024]
input B: f32[1024, 1024]
C[i, j] = sum(A[i, k] * B[k, j], k)
";

/// Every preset at least once, and the odd corners of the language.
const SPECS: &[&str] = &[
    "matmul:1024x1024x1024",
    "matmul:m=64,n=32,k=16,layout=nt",
    "matmul:m=64,n=32,k=16,layout=tn,dtype=f16",
    "batch_matmul:b=16,m=512,n=512,k=64",
    "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
    "conv2d_nchw:n=1,c=64,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1,dilation=2",
    "conv2d_nhwc:n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1",
    "depthwise_conv2d_nchw:n=1,c=32,h=28,w=28,r=3,s=3,stride=2,pad=1",
    "dense_bias_relu:m=128,n=256,k=512",
    "conv2d_relu_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
    "concat_conv2d_relu_nchw:n=1,c1=32,c2=16,h=28,w=28,k=64,r=3,s=3,pad=1",
];

const TEXTS: &[&str] = &[
    MATMUL,
    "input X: f16[8, 16]\nY[i, j: 4]: f32 = max_reduce(cast(f32, X[i, k]) * 2 - -1.5e-3, k)\n",
    "input X: f32[10]\nY[i: 5] = if_then_else(i < 3 || !(i == 4), X[i * 2], exp(X[0]) / 3)\n",
    "input X: f32[4, 8]\nY[i, j: 2] = tanh(abs(min(X[i, j * 4 + 3], sqrt(X[i, (j * 4 + 1) % 8]))))\nZ[a, b: 2] = Y[a, b // 1] + 1\n",
    "input a: f32[2, 3]\ninput b: f32[2, 5]\nc = concat(a, b, axis=1)\nd[i, j] = relu(c[i, j]) * 0.5\n",
];

fn check_err(src: &str, expected: &str) {
    match parse(src) {
        Ok(_) => panic!("expected error {expected:?} for {src:?}, parsed fine"),
        Err(e) => assert_eq!(e.to_string(), expected, "for {src:?}"),
    }
}

fn preset_err(spec: &str, expected: &str) {
    match preset(spec) {
        Ok(_) => panic!("expected error {expected:?} for {spec:?}"),
        Err(e) => assert_eq!(e.to_string(), expected, "for {spec:?}"),
    }
}

#[test]
fn parses_matmul() {
    let w = parse(MATMUL).unwrap();
    assert_eq!(w.name(), "main");
    assert_eq!(w.tensors().len(), 3);
    let c = w.tensor("C").unwrap();
    assert_eq!(c.shape, vec![1024, 1024]);
    let TensorDef::Compute(comp) = &c.def else {
        panic!("C is a compute stage")
    };
    let names: Vec<_> = comp
        .all_axes()
        .map(|a| (a.name.as_str(), a.extent))
        .collect();
    assert_eq!(names, vec![("i", 1024), ("j", 1024), ("k", 1024)]);
    assert_eq!(w.flops(), 2.0 * 1024f64.powi(3));
}

#[test]
fn flops_count_epilogues() {
    let w = preset("dense_bias_relu:m=2,n=3,k=4").unwrap();
    // 2*m*n*k for the dense, one add and one max per output point.
    assert_eq!(w.flops(), (2 * 2 * 3 * 4 + 2 * 3 + 2 * 3) as f64);
}

#[test]
fn text_round_trips() {
    let mut all: Vec<Workload> = TEXTS.iter().map(|t| parse(t).unwrap()).collect();
    all.extend(SPECS.iter().map(|s| preset(s).unwrap()));
    for w in all {
        let text = w.to_text();
        let back = parse(&text).unwrap_or_else(|e| panic!("{e} in\n{text}"));
        assert_eq!(back, w, "{text}");
        let canon = w.canonical_text();
        assert!(canon.starts_with("tessel-workload v1\n"));
        let again = parse(&canon).unwrap_or_else(|e| panic!("{e} in\n{canon}"));
        assert_eq!(again.canonical_text(), canon);
        assert_eq!(again.key(), w.key());
    }
}

#[test]
fn canonical_text_of_matmul() {
    let w = preset("matmul:4x5x6").unwrap();
    assert_eq!(
        w.canonical_text(),
        "tessel-workload v1\ninput t0: f32[4, 6]\ninput t1: f32[6, 5]\n\
         t2[i0: 4, i1: 5]: f32 = sum(t0[i0, r0] * t1[r0, i1], r0: 6)\n"
    );
    assert_eq!(w.key().len(), 64);
    assert!(w
        .key()
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    let names = w.canonical_names();
    assert_eq!(names[2], ("C".to_string(), "t2".to_string()));
}

#[test]
fn canonical_text_ignores_names() {
    let renamed = "workload gemm\ninput lhs: f32[1024, 1024]\ninput rhs: f32[1024, 1024]\n\
                   out[row, col] = sum(lhs[row, red] * rhs[red, col], red)\n";
    let a = parse(MATMUL).unwrap();
    let b = parse(renamed).unwrap();
    assert_ne!(a, b);
    assert_eq!(a.canonical_text(), b.canonical_text());
    assert_eq!(a.key(), b.key());
    assert_eq!(
        a.key(),
        preset("matmul:m=1024,n=1024,k=1024").unwrap().key()
    );
    assert_eq!(a.key(), preset("matmul:1024x1024x1024").unwrap().key());
    // `0` and `0.0` in a value position are the same constant.
    let x = parse("input X: f32[4]\nY[i] = max(X[i], 0)\n").unwrap();
    let y = parse("input X: f32[4]\nY[i] = relu(X[i])\n").unwrap();
    assert_eq!(x.key(), y.key());
}

#[test]
fn keys_differ_when_anything_changes() {
    let keys: Vec<String> = [
        "matmul:1024x1024x1024",
        "matmul:1024x1024x512",
        "matmul:1024x512x1024",
        "matmul:m=1024,n=1024,k=1024,layout=nt",
        "matmul:m=1024,n=1024,k=1024,dtype=f16",
        "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1",
        "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1,stride=2",
        "conv2d_relu_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1",
    ]
    .iter()
    .map(|s| preset(s).unwrap().key())
    .collect();
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert_ne!(a, b);
        }
    }
}

#[test]
fn syntax_errors_point_at_line_and_column() {
    let cases: &[(&str, &str)] = &[
        ("input A: f32[4]\nB[i] = A[i j]\n", "2:12: expected ']' or ',' after index, found 'j'"),
        ("input A: f32[4]\nB[i] = A[i] +\n", "2:14: expected an expression, found end of line"),
        ("input A: f32[4]\nB[i] = (A[i]\n", "2:13: expected ')' to close '(', found end of line"),
        ("input A: f33[4]\n", "1:10: expected a dtype (f32, f16, bf16 or i32), found 'f33'"),
        ("input A f32[4]\n", "1:9: expected ':' after input name 'A', found 'f32'"),
        ("input A: f32[4, ]\n", "1:17: expected an integer extent, found ']'"),
        ("input A: f32[4]\nB[i] A[i]\n", "2:6: expected '=' after the stage's axes, found 'A'"),
        ("input A: f32[4]\nB = A[0]\n", "2:1: stage 'B' needs its axes, e.g. 'B[i, j] = ...' (only concat omits them)"),
        ("input A: f32[4]\nB[i] = A[i] $ 2\n", "2:13: unexpected character '$'"),
        ("input A: f32[4]\nB[i] = A[i] * 2x\n", "2:15: malformed number '2x'"),
        ("input A: f32[4]\nB[i] = A[i] * 99999999999999999999\n", "2:15: integer literal '99999999999999999999' is too large"),
        ("input A: f32[4]\nB[i] = A[i] * 1e999\n", "2:15: float literal '1e999' is out of range"),
        ("input A: f32[4]\nB[i] = foo(A[i])\n", "2:8: unknown function 'foo' (known: max, min, relu, exp, sqrt, tanh, abs, tf32, if_then_else, cast)"),
        ("input A: f32[4]\nB[i] = max(A[i])\n", "2:8: 'max' takes 2 arguments, found 1"),
        ("input A: f32[4]\nB[i] = 1 + sum(A[k], k)\n", "2:12: 'sum' may only be the whole right-hand side of a stage"),
        ("input A: f32[4]\nB[i: 1] = sum(A[k], k) * 2\n", "2:24: a reduction must be the whole right-hand side of a stage, found '*' after it"),
        ("input A: f32[4]\nB[i: 1] = sum(A[k])\n", "2:19: expected ',' and a reduction axis after the reduced expression, found ')'"),
        ("input A: f32[4]\nB = concat(A, A)\n", "2:16: expected ',' and 'axis=N' in concat, found ')'"),
        ("input A: f32[4]\nB[i] = concat(A, A, axis=0)\n", "2:1: concat takes no axes: write 'B = concat(...)'"),
        ("input A: f32[4]\nB[i] = A[i]\nC[i] = A[i] extra\n", "3:13: expected end of line after the stage's expression, found 'extra'"),
        ("tessel-workload v2\n", "1:1: unsupported format header 'tessel-workload v2', expected 'tessel-workload v1'"),
        ("input A: f32[4]\n", "1:1: a workload needs at least one stage"),
        ("", "1:1: a workload needs at least one stage"),
    ];
    for (src, expected) in cases {
        check_err(src, expected);
    }
}

#[test]
fn semantic_errors_name_what_is_wrong() {
    let cases: &[(&str, &str)] = &[
        // An axis with two extents: the error is at the second use and names both.
        (
            "input A: f32[4, 8]\ninput B: f32[6, 2]\nC[i, j] = sum(A[i, k] * B[k, j], k)\n",
            "3:27: axis 'k' has extent 6 here (dimension 0 of 'B') but extent 8 before (dimension 1 of 'A')",
        ),
        (
            "input A: f32[4]\nC[i: 5] = A[i]\n",
            "2:13: axis 'i' has extent 4 here (dimension 0 of 'A') but extent 5 before (declared)",
        ),
        // Out of bounds, with the access and the range.
        (
            "input A: f32[4]\nC[i] = A[i] + A[i + 1]\n",
            "2:15: access 'A[i + 1]' is out of bounds: index 0 ranges over [1, 4] but dimension 0 of 'A' has extent 4",
        ),
        ("input A: f32[4]\nC[i: 2] = A[i * 3 + 2]\n", "2:11: access 'A[i * 3 + 2]' is out of bounds: index 0 ranges over [2, 5] but dimension 0 of 'A' has extent 4"),
        ("input A: f32[4]\nC[i: 4] = A[i - 1]\n", "2:11: access 'A[i - 1]' is out of bounds: index 0 ranges over [-1, 2] but dimension 0 of 'A' has extent 4"),
        ("input A: f32[4]\nC[i, j] = A[i]\n", "2:6: cannot infer the extent of axis 'j'; declare it as 'j: N'"),
        ("input A: f32[4]\nC[i: 0] = A[0]\n", "2:6: extent of axis 'i' must be positive, found 0"),
        ("input A: f32[0]\n", "1:14: extent of input 'A' must be positive, found 0"),
        ("input A: f32[4]\ninput A: f32[4]\n", "2:7: tensor 'A' is already declared on line 1"),
        ("input A: f32[4]\nC[i, i] = A[i]\n", "2:6: axis 'i' is declared twice in stage 'C'"),
        ("input A: f32[4]\nC[A] = A[A]\n", "2:3: axis 'A' has the name of a tensor"),
        ("input A: f32[4]\nC[i: 4] = A[x]\n", "2:13: unknown name 'x' (not an axis of stage 'C' nor a tensor)"),
        ("input A: f32[4]\nC[i] = D[i]\n", "2:8: unknown tensor 'D'"),
        ("input A: f32[4]\nC[i: 4] = C[i]\n", "2:11: stage 'C' cannot read itself"),
        ("input A: f32[4]\nC[i] = A[i, 0]\n", "2:8: 'A' has 1 dimensions but is indexed with 2"),
        ("input A: f32[4]\nC[i] = A[i] + A\n", "2:15: tensor 'A' needs indices: 'A[...]'"),
        ("input A: f32[4]\ninput B: f16[4]\nC[i] = A[i] + B[i]\n", "3:13: '+' mixes f32 and f16 without cast"),
        ("input A: f32[4]\nC[i]: f16 = A[i]\n", "2:7: stage 'C' is declared f16 but its value is f32; use cast(f16, ...)"),
        ("input A: f32[4]\nC[i] = A[i] + i\n", "2:13: '+' mixes an index expression with a value; use cast(f32, ...) on the index"),
        ("input A: f32[4]\nC[i: 4] = i + 1\n", "2:13: the value of stage 'C' is an index expression; use cast(f32, ...)"),
        ("input A: f32[4]\nC[i] = A[i] < 1.0\n", "2:13: the value of stage 'C' is a condition; use if_then_else(cond, 1.0, 0.0)"),
        ("input A: f32[4, 4]\nC[i: 2, j: 2] = A[i * j, 0]\n", "2:21: index expressions must be affine: '*' needs a constant operand"),
        ("input A: f32[4]\nC[i: 4] = A[i / 2]\n", "2:15: '/' divides values; use '//' for index division"),
        ("input A: f32[4]\nC[i: 8] = A[i // 0]\n", "2:15: '//' needs a positive integer constant on its right"),
        ("input A: f32[4]\nC[i] = A[A[i]]\n", "2:10: index 0 of 'A' must be an integer expression of axes"),
        ("input A: f32[4]\nC[i] = if_then_else(A[i], 1.0, 0.0)\n", "2:21: the first argument of if_then_else must be a condition"),
        ("input A: f32[4]\nC[i] = A[i] && A[i]\n", "2:13: '&&' joins conditions"),
        ("input A: f32[4]\nC[i: 4] = exp(i)\n", "2:11: 'exp' applies to values; use cast(f32, ...) on indices"),
        ("input A: f32[2, 3]\ninput B: f32[3, 3]\nC = concat(A, B, axis=1)\n", "3:15: concat input 'B' has extent 3 in dimension 0 but 'A' has 2"),
        ("input A: f32[2, 3]\nC = concat(A, A, axis=2)\n", "2:23: concat axis 2 is out of range for tensors of rank 2"),
        ("input A: f32[4]\nB[i] = A[i]\nworkload w\n", "3:10: 'workload NAME' must be the first statement"),
    ];
    for (src, expected) in cases {
        check_err(src, expected);
    }
}

#[test]
fn guarded_accesses_are_exempt_from_bounds() {
    let w =
        parse("input A: f32[4]\nB[i: 6] = if_then_else(i >= 1 && i < 5, A[i - 1], 0.0)\n").unwrap();
    assert_eq!(w.tensor("B").unwrap().shape, vec![6]);
    // Bare axes inside a branch still give extents when nothing else does.
    let w = parse("input A: f32[3, 4]\nB[j, i: 6] = if_then_else(i < 4, A[j, i], 0.0)\n").unwrap();
    assert_eq!(w.tensor("B").unwrap().shape, vec![3, 6]);
}

#[test]
fn preset_errors() {
    preset_err(
        "gemm:1x2x3",
        "1:1: unknown preset 'gemm' (known: matmul, batch_matmul, conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nchw, dense_bias_relu, conv2d_relu_nchw, concat_conv2d_relu_nchw)",
    );
    preset_err(
        "matmul:m=4,n=4,k=4,q=2",
        "1:20: unknown key 'q' for preset 'matmul' (known: m, n, k, layout, dtype, acc, math)",
    );
    preset_err("matmul:0x4x4", "1:8: key 'm' must be positive, found 0");
    preset_err(
        "matmul:m=4,n=4,k=-2",
        "1:18: key 'k' must be positive, found -2",
    );
    preset_err(
        "matmul:m=4,n=4",
        "1:15: missing key 'k' for preset 'matmul'",
    );
    preset_err(
        "matmul:4x4",
        "1:8: expected MxNxK or key=value pairs, found '4x4'",
    );
    preset_err(
        "matmul:m=4,n=4,k=4,layout=tx",
        "1:27: value of 'layout' must be one of nn, nt, tn, tt, found 'tx'",
    );
    preset_err(
        "matmul:m=4,n=x,k=4",
        "1:14: value of 'n' must be an integer, found 'x'",
    );
    preset_err("matmul:m=4,m=4", "1:12: key 'm' is given twice");
    preset_err(
        "conv2d_nchw:n=1,c=3,h=4,w=4,k=8,r=7,s=3",
        "1:35: conv window 7 (r=7, dilation=1) exceeds padded input 4 (h=4, pad=0)",
    );
    preset_err(
        "conv2d_nchw:n=1,c=3,h=4,w=4,k=8,r=3,s=3,pad=1,dilation=3",
        "1:35: conv window 7 (r=3, dilation=3) exceeds padded input 6 (h=4, pad=1)",
    );
    preset_err(
        "conv2d_nchw:n=1,c=3,h=4,w=4,k=0,r=3,s=3",
        "1:31: key 'k' must be positive, found 0",
    );
    preset_err(
        "conv2d_nchw:n=1,c=3,h=4,w=4,k=2,r=3,s=3,pad=-1",
        "1:45: key 'pad' must be at least 0, found -1",
    );
    preset_err(
        "matmul:m=4,n=4,k=4,dtype=bf16,acc=f16",
        "1:35: acc=f16 with dtype=bf16: accumulate in f32 or in the dtype itself",
    );
    preset_err(
        "matmul:m=4,n=4,k=4,dtype=f8",
        "1:26: value of 'dtype' must be one of f32, f16, bf16, found 'f8'",
    );
}

#[test]
fn half_precision_presets_accumulate_in_f32_when_asked() {
    // acc=f32: the reduction sums the operands cast to f32 into an f32 stage, and the
    // output of the dtype is its rounding; the default accumulates in the dtype.
    let w = preset("matmul:m=2,n=3,k=4,dtype=bf16,acc=f32").unwrap();
    let names: Vec<&str> = w.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["A", "B", "C_acc", "C"]);
    assert_eq!(w.tensor("A").unwrap().dtype, DType::BF16);
    assert_eq!(w.tensor("C_acc").unwrap().dtype, DType::F32);
    assert_eq!(w.tensor("C").unwrap().dtype, DType::BF16);
    let text = w.to_text();
    assert!(
        text.contains("sum(cast(f32, A[i, k]) * cast(f32, B[k, j]), k: 4)"),
        "{text}"
    );
    assert!(
        text.contains("C[i: 2, j: 3]: bf16 = cast(bf16, C_acc[i, j])"),
        "{text}"
    );
    let same = preset("matmul:m=2,n=3,k=4,dtype=bf16").unwrap();
    assert_eq!(
        same.key(),
        preset("matmul:m=2,n=3,k=4,dtype=bf16,acc=bf16")
            .unwrap()
            .key()
    );
    assert_ne!(same.key(), w.key());
    assert_eq!(same.tensor("C").unwrap().dtype, DType::BF16);
    // For f32 the key changes nothing.
    assert_eq!(
        preset("matmul:m=2,n=3,k=4,acc=f32").unwrap().key(),
        preset("matmul:m=2,n=3,k=4").unwrap().key()
    );
    // Every preset with a reduction takes it.
    for (spec, acc, out) in [
        (
            "conv2d_relu_nchw:n=1,c=3,h=5,w=5,k=2,r=3,s=3,pad=1,dtype=f16,acc=f32",
            "conv2d_nchw_acc",
            "T_relu",
        ),
        (
            "conv2d_nhwc:n=1,c=3,h=5,w=5,k=2,r=3,s=3,dtype=bf16,acc=f32",
            "conv2d_nhwc_acc",
            "conv2d_nhwc",
        ),
        (
            "depthwise_conv2d_nchw:n=1,c=3,h=5,w=5,r=3,s=3,dtype=f16,acc=f32",
            "depthwise_conv2d_nchw_acc",
            "depthwise_conv2d_nchw",
        ),
        (
            "dense_bias_relu:m=2,n=3,k=4,dtype=bf16,acc=f32",
            "T_dense_acc",
            "T_relu",
        ),
        (
            "batch_matmul:b=2,m=2,n=3,k=4,dtype=f16,acc=f32",
            "C_acc",
            "C",
        ),
    ] {
        let w = preset(spec).unwrap();
        assert_eq!(w.tensor(acc).unwrap().dtype, DType::F32, "{spec}");
        assert_ne!(w.tensor(out).unwrap().dtype, DType::F32, "{spec}");
    }
}

#[test]
fn presets_build_the_documented_stages() {
    let stage_names = |s: &str| -> Vec<String> {
        preset(s)
            .unwrap()
            .tensors()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(
        stage_names("conv2d_relu_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1"),
        ["data", "weight", "pad_temp", "conv2d_nchw", "T_relu"]
    );
    assert_eq!(
        stage_names("conv2d_nchw:n=1,c=8,h=8,w=8,k=8,r=1,s=1"),
        ["data", "weight", "conv2d_nchw"]
    );
    assert_eq!(
        stage_names("concat_conv2d_relu_nchw:n=1,c1=4,c2=4,h=8,w=8,k=8,r=3,s=3,pad=1"),
        [
            "data0",
            "data1",
            "weight",
            "concat",
            "pad_temp",
            "conv2d_nchw",
            "T_relu"
        ]
    );
    assert_eq!(
        stage_names("dense_bias_relu:m=1,n=2,k=3"),
        ["X", "W", "bias", "T_dense", "T_add", "T_relu"]
    );
    let w = preset("conv2d_nchw:n=1,c=64,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1").unwrap();
    assert_eq!(w.tensor("conv2d_nchw").unwrap().shape, vec![1, 128, 28, 28]);
    assert_eq!(w.tensor("pad_temp").unwrap().shape, vec![1, 64, 58, 58]);
    let w = preset("conv2d_nhwc:n=2,c=3,h=9,w=7,k=4,r=3,s=1").unwrap();
    assert_eq!(w.tensor("conv2d_nhwc").unwrap().shape, vec![2, 7, 7, 4]);
    let w = preset("depthwise_conv2d_nchw:n=1,c=5,h=8,w=8,r=3,s=3,pad=1").unwrap();
    assert_eq!(w.tensor("weight").unwrap().shape, vec![5, 1, 3, 3]);
    assert_eq!(
        w.tensor("depthwise_conv2d_nchw").unwrap().shape,
        vec![1, 5, 8, 8]
    );
    let w = preset("matmul:m=2,n=3,k=4,layout=tn").unwrap();
    assert_eq!(w.tensor("A").unwrap().shape, vec![4, 2]);
    assert_eq!(w.name(), "matmul");
    let w = preset("matmul:m=2,n=3,k=4,layout=tt").unwrap();
    assert_eq!(w.tensor("A").unwrap().shape, vec![4, 2]);
    assert_eq!(w.tensor("B").unwrap().shape, vec![3, 4]);
}

#[test]
fn from_cli_picks_preset_or_file() {
    let no_files = |p: &str| -> std::io::Result<String> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no file {p}"),
        ))
    };
    assert_eq!(
        from_cli("matmul:2x3x4", no_files).unwrap(),
        preset("matmul:2x3x4").unwrap()
    );
    let w = from_cli("work/mm.tw", |p: &str| {
        if p == "work/mm.tw" {
            Ok(MATMUL.to_string())
        } else {
            no_files(p)
        }
    })
    .unwrap();
    assert_eq!(w, parse(MATMUL).unwrap());
    assert_eq!(
        from_cli("c:/x.tw", no_files).unwrap_err().to_string(),
        "cannot read workload file 'c:/x.tw': no file c:/x.tw"
    );
    // A preset's shape with a name that is none (softmaxes are workload files).
    let e = from_cli("softmax:512x1000", no_files)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("'softmax' is no preset (known: matmul, ")
            && e.ends_with("), and no workload file is named so (no file softmax:512x1000)"),
        "{e}"
    );
}

fn loop_names(p: &Program, root: Node) -> Vec<String> {
    let mut out = Vec::new();
    let mut n = root;
    while let Node::Loop(l) = n {
        out.push(p.loop_name(l).to_string());
        n = p.lp(l).body[0];
    }
    out
}

#[test]
fn lowers_matmul() {
    let p = preset("matmul:64x32x16").unwrap().to_program();
    assert_eq!(p.name, "matmul");
    let kinds: Vec<_> = p
        .params
        .iter()
        .map(|b| (p.buffer(*b).name.as_str(), p.buffer(*b).kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("A", BufferKind::Input),
            ("B", BufferKind::Input),
            ("C", BufferKind::Output)
        ]
    );
    assert!(p.allocs.is_empty());
    assert_eq!(p.root.len(), 1);
    assert_eq!(loop_names(&p, p.root[0]), ["i", "j", "k"]);
    let b = p.find_block("C")[0];
    let blk = p.block(b);
    let ivs: Vec<_> = blk
        .iter_vars
        .iter()
        .map(|iv| (p.var_name(iv.var), iv.extent, iv.kind))
        .collect();
    assert_eq!(
        ivs,
        [
            ("vi", 64, IterKind::Spatial),
            ("vj", 32, IterKind::Spatial),
            ("vk", 16, IterKind::Reduce)
        ]
    );
    let loops = p.ancestors(Node::Block(b));
    for (bind, l) in blk.bindings.iter().zip(&loops) {
        assert_eq!(*bind, Expr::Var(p.lp(*l).var));
    }
    let (vi, vj, vk) = (
        blk.iter_vars[0].var,
        blk.iter_vars[1].var,
        blk.iter_vars[2].var,
    );
    let (a, bb, c) = (p.params[0], p.params[1], p.params[2]);
    let out = Expr::Load(c, vec![Expr::Var(vi), Expr::Var(vj)]);
    let init = blk.init.as_ref().unwrap();
    assert_eq!(init.value, Expr::Float(0.0));
    assert_eq!(init.indices, vec![Expr::Var(vi), Expr::Var(vj)]);
    let prod = Expr::mul(
        Expr::Load(a, vec![Expr::Var(vi), Expr::Var(vk)]),
        Expr::Load(bb, vec![Expr::Var(vk), Expr::Var(vj)]),
    );
    assert_eq!(blk.body.value, Expr::add(out, prod));
    assert_eq!(p.block_reads(b).len(), 2);
}

#[test]
fn lowers_conv2d_relu() {
    let p = preset("conv2d_relu_nchw:n=1,c=4,h=8,w=8,k=8,r=3,s=3,pad=1")
        .unwrap()
        .to_program();
    let params: Vec<_> = p
        .params
        .iter()
        .map(|b| (p.buffer(*b).name.as_str(), p.buffer(*b).kind))
        .collect();
    assert_eq!(
        params,
        [
            ("data", BufferKind::Input),
            ("weight", BufferKind::Input),
            ("T_relu", BufferKind::Output)
        ]
    );
    let allocs: Vec<_> = p
        .allocs
        .iter()
        .map(|b| (p.buffer(*b).name.as_str(), p.buffer(*b).kind))
        .collect();
    assert_eq!(
        allocs,
        [
            ("pad_temp", BufferKind::Intermediate),
            ("conv2d_nchw", BufferKind::Intermediate)
        ]
    );
    let blocks: Vec<_> = p
        .blocks_in_order()
        .iter()
        .map(|b| p.block(*b).name.clone())
        .collect();
    assert_eq!(blocks, ["pad_temp", "conv2d_nchw", "T_relu"]);
    assert_eq!(loop_names(&p, p.root[0]), ["i0", "i1", "i2", "i3"]);
    assert_eq!(
        loop_names(&p, p.root[1]),
        ["nn", "ff", "yy", "xx", "rc", "ry", "rx"]
    );
    assert_eq!(loop_names(&p, p.root[2]), ["ax0", "ax1", "ax2", "ax3"]);
    let pad = p.block(p.find_block("pad_temp")[0]);
    assert!(pad.init.is_none());
    assert!(matches!(pad.body.value, Expr::Select(..)));
    let relu = p.block(p.find_block("T_relu")[0]);
    let Expr::Bin(BinOp::Max, _, zero) = &relu.body.value else {
        panic!("relu is a max")
    };
    assert_eq!(**zero, Expr::Float(0.0));
    let conv = p.block(p.find_block("conv2d_nchw")[0]);
    let kinds: Vec<_> = conv.iter_vars.iter().map(|iv| iv.kind).collect();
    assert_eq!(kinds.iter().filter(|k| **k == IterKind::Reduce).count(), 3);
    // Block bodies only mention the block's own iteration variables.
    for b in p.blocks_in_order() {
        let blk = p.block(b);
        let own: Vec<_> = blk.iter_vars.iter().map(|iv| iv.var).collect();
        assert!(
            blk.body.value.vars().iter().all(|v| own.contains(v)),
            "{}",
            blk.name
        );
    }
}

#[test]
fn lowers_max_reduce_and_concat() {
    let w = parse("input a: f32[2, 3]\ninput b: f32[2, 5]\nc = concat(a, b, axis=1)\nm[i] = max_reduce(c[i, j], j)\n").unwrap();
    let p = w.to_program();
    let m = p.block(p.find_block("m")[0]);
    assert_eq!(
        m.init.as_ref().unwrap().value,
        Expr::Float(f64::NEG_INFINITY)
    );
    assert!(matches!(m.body.value, Expr::Bin(BinOp::Max, ..)));
    let c = p.block(p.find_block("c")[0]);
    let Expr::Select(cond, _, other) = &c.body.value else {
        panic!("concat is a select")
    };
    assert_eq!(
        **cond,
        Expr::lt(Expr::Var(c.iter_vars[1].var), Expr::Int(3))
    );
    let (a, b) = (p.params[0], p.params[1]);
    let shifted = Expr::sub(Expr::Var(c.iter_vars[1].var), Expr::Int(3));
    assert_eq!(
        **other,
        Expr::Load(b, vec![Expr::Var(c.iter_vars[0].var), shifted])
    );
    assert_ne!(a, b);
    assert_eq!(p.buffer(p.allocs[0]).shape, vec![2, 8]);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    #[test]
    fn mangled_text_never_panics(
        which in 0usize..16,
        edits in proptest::collection::vec((0usize..400, 0usize..24), 1..6),
    ) {
        const ALPHABET: &[&str] = &[
            "", "[", "]", "(", ")", ",", ":", "=", "*", "//", "%", "-", "0", "99999999999", "1e5", "i",
            "sum(", "if_then_else(", "\n", "#", " ", "concat(", "axis=", "\u{e9}",
        ];
        let mut src = match which {
            w if w < TEXTS.len() => TEXTS[w].to_string(),
            w => preset(SPECS[w % SPECS.len()]).map(|w| w.to_text()).unwrap_or_default(),
        };
        for (at, what) in edits {
            let mut cut = at % (src.len() + 1);
            while !src.is_char_boundary(cut) {
                cut -= 1;
            }
            let end = (cut + 2).min(src.len());
            let end = if src.is_char_boundary(end) { end } else { cut };
            src.replace_range(cut..if what % 2 == 0 { end } else { cut }, ALPHABET[what]);
        }
        if let Ok(w) = parse(&src) {
            let _ = w.to_program();
            proptest::prop_assert_eq!(parse(&w.to_text()).ok(), Some(w));
        }
    }

    #[test]
    fn arbitrary_specs_never_panic(spec in "[a-z_2]{0,12}:[a-z0-9=,x-]{0,40}") {
        let _ = preset(&spec);
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!(
        "input A: f32[4]\nB[i] = {}A[i]{}\n",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    assert!(parse(&deep)
        .unwrap_err()
        .to_string()
        .contains("nested too deeply"));
    let long = format!("input A: f32[4]\nB[i] = A[i]{}\n", " + 1".repeat(5000));
    assert!(parse(&long)
        .unwrap_err()
        .to_string()
        .contains("nested too deeply"));
    let neg = format!("input A: f32[4]\nB[i] = {}A[i]\n", "-".repeat(5000));
    assert!(parse(&neg)
        .unwrap_err()
        .to_string()
        .contains("nested too deeply"));
}
