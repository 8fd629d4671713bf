//! Naming a workload for people: the preset spec that builds it (`matmul:1024x1024x1024`,
//! `conv2d_nchw:n=1,c=64,...`) when there is one, else a summary of its tensors. The
//! database keeps only canonical texts (names normalised away), so a spec is recovered
//! by proposing the specs that fit the input shapes and keeping the one whose canonical
//! text is equal.

use super::model::{TensorDef, Workload};
use super::preset::preset;
use crate::ir::DType;

/// Strides, dilations and paddings tried when recovering a convolution's spec.
const STRIDES: [i64; 4] = [1, 2, 3, 4];
const DILATIONS: [i64; 3] = [1, 2, 3];
const MAX_PAD: i64 = 8;

/// A short name for `w`: its preset spec, else `custom: inputs f32[..], ... -> f32[..]`.
pub fn describe(w: &Workload) -> String {
    preset_spec(w).unwrap_or_else(|| summary(w))
}

/// The preset spec whose workload has the same canonical text as `w`, if any.
pub fn preset_spec(w: &Workload) -> Option<String> {
    let canonical = w.canonical_text();
    candidates(w)
        .into_iter()
        .find(|spec| preset(spec).is_ok_and(|p| p.canonical_text() == canonical))
}

/// `custom: inputs f32[64, 64], f32[64, 64] -> f32[64, 64]`.
fn summary(w: &Workload) -> String {
    let shape = |i: usize| {
        let t = &w.tensors[i];
        let dims: Vec<String> = t.shape.iter().map(i64::to_string).collect();
        format!("{}[{}]", t.dtype.short(), dims.join(", "))
    };
    let inputs: Vec<String> = (0..w.tensors.len())
        .filter(|&i| matches!(w.tensors[i].def, TensorDef::Input))
        .map(shape)
        .collect();
    let out = w
        .tensors
        .len()
        .checked_sub(1)
        .map(shape)
        .unwrap_or_default();
    format!("custom: inputs {} -> {out}", inputs.join(", "))
}

/// The specs that could build a workload with `w`'s inputs.
fn candidates(w: &Workload) -> Vec<String> {
    let inputs: Vec<&[i64]> = w
        .tensors
        .iter()
        .filter(|t| matches!(t.def, TensorDef::Input))
        .map(|t| t.shape.as_slice())
        .collect();
    let Some(first) = w.tensors.first() else {
        return Vec::new();
    };
    // A 16-bit workload with an f32 stage accumulates in f32 (`acc=f32`).
    let acc32 = first.dtype.is_half() && w.tensors.iter().any(|t| t.dtype == DType::F32);
    let dtype = match (first.dtype, acc32) {
        (DType::F32, _) => w.math_suffix().to_string(),
        (d, false) => format!(",dtype={}", d.short()),
        (d, true) => format!(",dtype={},acc=f32", d.short()),
    };
    let mut out = Vec::new();
    match inputs.as_slice() {
        [[a0, a1], [b0, b1]] => {
            out.push(format!("matmul:{a0}x{b1}x{a1}{dtype}"));
            out.push(format!("matmul:{a0}x{b0}x{a1},layout=nt{dtype}"));
            out.push(format!("matmul:{a1}x{b1}x{a0},layout=tn{dtype}"));
            out.push(format!("matmul:{a1}x{b0}x{a0},layout=tt{dtype}"));
        }
        [[b, m, k], [_, _, n]] => out.push(format!("batch_matmul:b={b},m={m},n={n},k={k}{dtype}")),
        [[m, k], [n, _], [_]] => out.push(format!("dense_bias_relu:m={m},n={n},k={k}{dtype}")),
        [[n, c, h, wd], [k, c2, r, s]] => {
            for preset in ["conv2d_nchw", "conv2d_relu_nchw"] {
                conv_specs(
                    &mut out,
                    preset,
                    &format!("n={n},c={c},h={h},w={wd},k={k}"),
                    *r,
                    *s,
                    &dtype,
                );
            }
            if *c2 == 1 {
                conv_specs(
                    &mut out,
                    "depthwise_conv2d_nchw",
                    &format!("n={n},c={c},h={h},w={wd}"),
                    *r,
                    *s,
                    &dtype,
                );
            }
            // NHWC: data [n, h, w, c], weight [r, s, c, k].
            let (h, wd, c, r, s, k) = (c, h, wd, k, c2, s);
            conv_specs(
                &mut out,
                "conv2d_nhwc",
                &format!("n={n},c={c},h={h},w={wd},k={k}"),
                *r,
                *s,
                &dtype,
            );
        }
        [[n, c1, h, wd], [_, c2, _, _], [k, _, r, s]] => conv_specs(
            &mut out,
            "concat_conv2d_relu_nchw",
            &format!("n={n},c1={c1},c2={c2},h={h},w={wd},k={k}"),
            *r,
            *s,
            &dtype,
        ),
        _ => {}
    }
    out
}

/// Specs of a convolution preset with window `r x s`, over strides, paddings and
/// dilations (defaults left out, as a person would write them).
fn conv_specs(out: &mut Vec<String>, preset: &str, base: &str, r: i64, s: i64, dtype: &str) {
    for stride in STRIDES {
        for dilation in DILATIONS {
            for pad in 0..=MAX_PAD {
                let mut spec = format!("{preset}:{base},r={r},s={s}");
                for (key, value, default) in [
                    ("stride", stride, 1),
                    ("pad", pad, 0),
                    ("dilation", dilation, 1),
                ] {
                    if value != default {
                        spec += &format!(",{key}={value}");
                    }
                }
                out.push(spec + dtype);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::parse;

    /// Each spec's canonical text is named back by the same spec.
    #[test]
    fn canonical_texts_are_named_by_their_preset_spec() {
        for spec in [
            "matmul:1024x512x256",
            "matmul:64x32x16,layout=nt",
            "matmul:64x32x16,layout=tn,dtype=f16",
            "matmul:64x32x16,layout=nt,dtype=bf16,acc=f32",
            "conv2d_relu_nchw:n=1,c=3,h=8,w=8,k=4,r=3,s=3,pad=1,dtype=f16,acc=f32",
            "batch_matmul:b=4,m=64,n=32,k=16",
            "matmul:64x32x16,layout=tt,math=tf32",
            "dense_bias_relu:m=8,n=16,k=32,math=tf32",
            "dense_bias_relu:m=8,n=16,k=32",
            "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1",
            "conv2d_relu_nchw:n=1,c=8,h=16,w=16,k=8,r=3,s=3,stride=2,pad=1",
            "conv2d_nhwc:n=1,c=8,h=16,w=16,k=4,r=3,s=3,dilation=2",
            "depthwise_conv2d_nchw:n=1,c=8,h=16,w=16,r=3,s=3,pad=1",
            "concat_conv2d_relu_nchw:n=1,c1=4,c2=4,h=8,w=8,k=8,r=3,s=3,pad=1",
        ] {
            let canonical = parse(&preset(spec).unwrap().canonical_text()).unwrap();
            assert_eq!(describe(&canonical), spec);
        }
    }

    #[test]
    fn a_workload_of_no_preset_is_summarised() {
        let w = parse("input A: f32[4, 8]\nB[i, j] = relu(A[i, j])\n").unwrap();
        assert_eq!(describe(&w), "custom: inputs f32[4, 8] -> f32[4, 8]");
    }
}
