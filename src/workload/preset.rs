//! Presets: `NAME:key=value,...` specs that expand to workload text.
//!
//! Each preset builds the text of its workload and parses it, so presets and files go
//! through one checker. Errors in a spec point at line 1 and the column of the
//! offending part of the spec string.

use super::model::Workload;
use super::{parse, Pos, Result, WorkloadError};

/// The names of all presets, in the order they are documented.
pub const PRESET_NAMES: &[&str] = &[
    "matmul",
    "batch_matmul",
    "conv2d_nchw",
    "conv2d_nhwc",
    "depthwise_conv2d_nchw",
    "dense_bias_relu",
    "conv2d_relu_nchw",
    "concat_conv2d_relu_nchw",
];

/// Largest value accepted for a numeric key; keeps all shape arithmetic far from overflow.
const MAX_VALUE: i64 = i32::MAX as i64;

/// The keys of a preset with their defaults (`None`: required).
fn keys(preset: &str) -> &'static [(&'static str, Option<&'static str>)] {
    const CONV: &[(&str, Option<&str>)] = &[
        ("n", None),
        ("c", None),
        ("h", None),
        ("w", None),
        ("k", None),
        ("r", None),
        ("s", None),
        ("stride", Some("1")),
        ("pad", Some("0")),
        ("dilation", Some("1")),
        ("dtype", Some("f32")),
        ("acc", Some("same")),
    ];
    match preset {
        "matmul" => &[
            ("m", None),
            ("n", None),
            ("k", None),
            ("layout", Some("nn")),
            ("dtype", Some("f32")),
            ("acc", Some("same")),
            ("math", Some("ieee")),
        ],
        "batch_matmul" => &[
            ("b", None),
            ("m", None),
            ("n", None),
            ("k", None),
            ("dtype", Some("f32")),
            ("acc", Some("same")),
            ("math", Some("ieee")),
        ],
        "depthwise_conv2d_nchw" => &[
            ("n", None),
            ("c", None),
            ("h", None),
            ("w", None),
            ("r", None),
            ("s", None),
            ("stride", Some("1")),
            ("pad", Some("0")),
            ("dilation", Some("1")),
            ("dtype", Some("f32")),
            ("acc", Some("same")),
        ],
        "dense_bias_relu" => &[
            ("m", None),
            ("n", None),
            ("k", None),
            ("dtype", Some("f32")),
            ("acc", Some("same")),
            ("math", Some("ieee")),
        ],
        "concat_conv2d_relu_nchw" => &[
            ("n", None),
            ("c1", None),
            ("c2", None),
            ("h", None),
            ("w", None),
            ("k", None),
            ("r", None),
            ("s", None),
            ("stride", Some("1")),
            ("pad", Some("0")),
            ("dilation", Some("1")),
            ("dtype", Some("f32")),
            ("acc", Some("same")),
        ],
        _ => CONV,
    }
}

/// The parsed `key=value` pairs of a spec, with the column of each key and value.
struct Args<'a> {
    preset: &'a str,
    vals: Vec<(&'static str, String, u32)>,
}

fn at(col: u32, msg: String) -> WorkloadError {
    WorkloadError::at(Pos { line: 1, col }, msg)
}

impl Args<'_> {
    fn raw(&self, key: &str) -> (&str, u32) {
        self.vals
            .iter()
            .find(|(k, _, _)| *k == key)
            .map_or(("", 1), |(_, v, c)| (v.as_str(), *c))
    }
    /// An integer value, at least `min`.
    fn int(&self, key: &str, min: i64) -> Result<i64> {
        let (v, col) = self.raw(key);
        let n: i64 = v.parse().map_err(|_| {
            at(
                col,
                format!("value of '{key}' must be an integer, found '{v}'"),
            )
        })?;
        if n < min {
            let need = if min == 1 {
                "positive".to_string()
            } else {
                format!("at least {min}")
            };
            return Err(at(col, format!("key '{key}' must be {need}, found {n}")));
        }
        if n > MAX_VALUE {
            return Err(at(
                col,
                format!("key '{key}' is too large (at most {MAX_VALUE}), found {n}"),
            ));
        }
        Ok(n)
    }
    fn choice(&self, key: &str, allowed: &[&str]) -> Result<String> {
        let (v, col) = self.raw(key);
        if allowed.contains(&v) {
            Ok(v.to_string())
        } else {
            Err(at(
                col,
                format!(
                    "value of '{key}' must be one of {}, found '{v}'",
                    allowed.join(", ")
                ),
            ))
        }
    }
    fn dtype(&self) -> Result<String> {
        self.choice("dtype", &["f32", "f16", "bf16"])
    }
    /// How the reductions compute: `acc=f32` accumulates in f32 where the dtype is
    /// narrower (`acc=same`, the default, or the dtype's own name accumulates in the
    /// dtype); `math=tf32` (GEMM presets) multiplies f32 operands at TensorFloat-32's
    /// precision (`tf32(x)` in the text), as cuBLAS's `CUBLAS_COMPUTE_32F_FAST_TF32` and
    /// PyTorch's `allow_tf32` do; `math=3xtf32` (`matmul` only) splits each f32 operand
    /// into a TF32 part and a TF32 remainder and sums three TF32 products (big x big, big x
    /// small, small x big), CUTLASS's 3xTF32, which keeps about f32's accuracy on tensor
    /// cores; `math=ieee` (the default) multiplies in f32.
    fn precision(&self, dtype: &str) -> Result<Precision> {
        let acc = self.choice("acc", &["same", "f32", "f16", "bf16"])?;
        if acc != "same" && acc != "f32" && acc != dtype {
            return Err(at(
                self.raw("acc").1,
                format!("acc={acc} with dtype={dtype}: accumulate in f32 or in the dtype itself"),
            ));
        }
        // Only the GEMM presets take `math` (the tensor-core sketches and the TF32 peer
        // are GEMMs').
        let has_math = self.vals.iter().any(|(k, _, _)| *k == "math");
        let math = match has_math {
            true => self.choice("math", &["ieee", "tf32", "3xtf32"])?,
            false => "ieee".to_string(),
        };
        if math != "ieee" && dtype != "f32" {
            return Err(at(
                self.raw("math").1,
                format!("math={math} with dtype={dtype}: TensorFloat-32 is a mode of f32 operands"),
            ));
        }
        if math == "3xtf32" && self.preset != "matmul" {
            return Err(at(
                self.raw("math").1,
                format!("math=3xtf32 is a mode of matmul, not of {}", self.preset),
            ));
        }
        Ok(Precision {
            acc32: acc == "f32" && dtype != "f32",
            tf32: math == "tf32",
            split: math == "3xtf32",
        })
    }
}

/// How a preset's reductions compute (see [`Args::precision`]).
#[derive(Copy, Clone)]
struct Precision {
    acc32: bool,
    tf32: bool,
    /// `math=3xtf32`.
    split: bool,
}

/// A reduction stage `out[index] = sum(a * b, axes)` (`index` with its extents where they
/// are not inferred, `plain` without).
struct Reduction<'a> {
    out: &'a str,
    index: String,
    plain: &'a str,
    a: String,
    b: String,
    axes: &'a str,
}

impl Reduction<'_> {
    /// Its text. With `acc32`, `out_acc` sums the operands cast to f32 and `out` rounds it
    /// to `dt`: the accumulator of a half-precision workload is f32, as in cuBLAS's
    /// `CUBLAS_COMPUTE_32F`, and only the result is stored narrow. With `tf32`, the
    /// factors are read at TensorFloat-32's precision.
    fn text(&self, dt: &str, prec: Precision) -> String {
        let Reduction {
            out,
            index,
            plain,
            a,
            b,
            axes,
        } = self;
        if prec.acc32 {
            format!(
                "{out}_acc[{index}]: f32 = sum(cast(f32, {a}) * cast(f32, {b}), {axes})\n\
                 {out}[{plain}]: {dt} = cast({dt}, {out}_acc[{plain}])\n"
            )
        } else if prec.tf32 {
            format!("{out}[{index}] = sum(tf32({a}) * tf32({b}), {axes})\n")
        } else {
            format!("{out}[{index}] = sum({a} * {b}, {axes})\n")
        }
    }
}

/// 1-based column of byte offset `off` in `s`.
fn col_of(s: &str, off: usize) -> u32 {
    u32::try_from(s.get(..off).map_or(off, |p| p.chars().count()) + 1).unwrap_or(u32::MAX)
}

/// Splits the spec into its preset name and arguments, filling in defaults.
fn parse_spec(spec: &str) -> Result<Args<'_>> {
    let (name, rest, rest_off) = match spec.split_once(':') {
        Some((n, r)) => (n, r, n.len() + 1),
        None => (spec, "", spec.len()),
    };
    let Some(&preset) = PRESET_NAMES.iter().find(|p| **p == name) else {
        return Err(at(
            1,
            format!(
                "unknown preset '{name}' (known: {})",
                PRESET_NAMES.join(", ")
            ),
        ));
    };
    let known = keys(preset);
    let mut given: Vec<(&str, String, u32, u32)> = Vec::new();
    let mut off = rest_off;
    for item in rest.split(',') {
        let item_off = off;
        off += item.len() + 1;
        if rest.is_empty() {
            break;
        }
        if preset == "matmul" && !item.contains('=') {
            let parts: Vec<&str> = item.split('x').collect();
            if parts.len() != 3 {
                return Err(at(
                    col_of(spec, item_off),
                    format!("expected MxNxK or key=value pairs, found '{item}'"),
                ));
            }
            let mut o = item_off;
            for (k, p) in ["m", "n", "k"].into_iter().zip(parts) {
                if given.iter().any(|g| g.0 == k) {
                    return Err(at(col_of(spec, o), format!("key '{k}' is given twice")));
                }
                given.push((k, p.to_string(), col_of(spec, o), col_of(spec, o)));
                o += p.len() + 1;
            }
            continue;
        }
        let Some((k, v)) = item.split_once('=') else {
            return Err(at(
                col_of(spec, item_off),
                format!("expected key=value, found '{item}'"),
            ));
        };
        let key_col = col_of(spec, item_off);
        let val_col = col_of(spec, item_off + k.len() + 1);
        if given.iter().any(|g| g.0 == k) {
            return Err(at(key_col, format!("key '{k}' is given twice")));
        }
        given.push((k, v.to_string(), key_col, val_col));
    }
    let mut vals = Vec::new();
    for (k, _, key_col, _) in &given {
        if !known.iter().any(|(n, _)| n == k) {
            let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
            return Err(at(
                *key_col,
                format!(
                    "unknown key '{k}' for preset '{preset}' (known: {})",
                    names.join(", ")
                ),
            ));
        }
    }
    for (k, default) in known {
        match given.iter().find(|g| g.0 == *k) {
            Some((_, v, _, val_col)) => vals.push((*k, v.clone(), *val_col)),
            None => match default {
                Some(d) => vals.push((*k, (*d).to_string(), 1)),
                None => {
                    return Err(at(
                        col_of(spec, spec.len()),
                        format!("missing key '{k}' for preset '{preset}'"),
                    ))
                }
            },
        }
    }
    Ok(Args { preset, vals })
}

/// Builds the workload named by a preset spec such as `matmul:1024x1024x1024` or
/// `conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1`.
pub fn preset(spec: &str) -> Result<Workload> {
    let a = parse_spec(spec)?;
    let text = match a.preset {
        "matmul" => matmul(&a)?,
        "batch_matmul" => {
            let (b, m, n, k, dt) = (
                a.int("b", 1)?,
                a.int("m", 1)?,
                a.int("n", 1)?,
                a.int("k", 1)?,
                a.dtype()?,
            );
            let prec = a.precision(&dt)?;
            format!(
                "input A: {dt}[{b}, {m}, {k}]\ninput B: {dt}[{b}, {k}, {n}]\n{}",
                Reduction {
                    out: "C",
                    index: "b, i, j".into(),
                    plain: "b, i, j",
                    a: "A[b, i, k]".into(),
                    b: "B[b, k, j]".into(),
                    axes: "k",
                }
                .text(&dt, prec)
            )
        }
        "dense_bias_relu" => {
            let (m, n, k, dt) = (a.int("m", 1)?, a.int("n", 1)?, a.int("k", 1)?, a.dtype()?);
            let dense = Reduction {
                out: "T_dense",
                index: "i, j".into(),
                plain: "i, j",
                a: "X[i, k]".into(),
                b: "W[j, k]".into(),
                axes: "k",
            }
            .text(&dt, a.precision(&dt)?);
            format!(
                "input X: {dt}[{m}, {k}]\ninput W: {dt}[{n}, {k}]\ninput bias: {dt}[{n}]\n\
                 {dense}T_add[i, j] = T_dense[i, j] + bias[j]\n\
                 T_relu[i, j] = relu(T_add[i, j])\n"
            )
        }
        preset => conv(&a, preset)?,
    };
    parse(&format!("workload {}\n{text}", a.preset))
}

fn matmul(a: &Args) -> Result<String> {
    let (m, n, k, dt) = (a.int("m", 1)?, a.int("n", 1)?, a.int("k", 1)?, a.dtype()?);
    let layout = a.choice("layout", &["nn", "nt", "tn", "tt"])?;
    // The first letter is A's layout (t: stored K x M), the second B's (t: stored N x K).
    let (ashape, aidx) = if layout.starts_with('t') {
        (format!("{k}, {m}"), "k, i")
    } else {
        (format!("{m}, {k}"), "i, k")
    };
    let (bshape, bidx) = if layout.ends_with('t') {
        (format!("{n}, {k}"), "j, k")
    } else {
        (format!("{k}, {n}"), "k, j")
    };
    let prec = a.precision(&dt)?;
    let inputs = format!("input A: {dt}[{ashape}]\ninput B: {dt}[{bshape}]\n");
    if prec.split {
        return Ok(inputs + &split_tf32(&layout));
    }
    let c = Reduction {
        out: "C",
        index: "i, j".into(),
        plain: "i, j",
        a: format!("A[{aidx}]"),
        b: format!("B[{bidx}]"),
        axes: "k",
    }
    .text(&dt, prec);
    Ok(inputs + &c)
}

/// `math=3xtf32` of a matmul in `layout`: each operand's remainder after TF32 (`X_lo = X -
/// tf32(X)`, exact in f32), then one TF32 GEMM over a reduction three times as long whose
/// operands are the parts side by side, `[A, A, A_lo]` times `[B; B_lo; B]`: the three
/// products big x big, big x small and small x big, summed in f32 (the small x small one
/// is left out, as in CUTLASS's 3xTF32). The tensor-core sketches then run it as they run
/// any TF32 GEMM.
fn split_tf32(layout: &str) -> String {
    // The reduction is A's second axis (or first, stored K x M) and B's first (or second).
    let (a_axis, a_idx, a3) = match layout.starts_with('t') {
        true => (0, "k, i", "A3[q, i]"),
        false => (1, "i, k", "A3[i, q]"),
    };
    let (b_axis, b_idx, b3) = match layout.ends_with('t') {
        true => (1, "j, k", "B3[j, q]"),
        false => (0, "k, j", "B3[q, j]"),
    };
    format!(
        "A_lo[{a_idx}] = A[{a_idx}] - tf32(A[{a_idx}])\n\
         B_lo[{b_idx}] = B[{b_idx}] - tf32(B[{b_idx}])\n\
         A3 = concat(A, A, A_lo, axis={a_axis})\n\
         B3 = concat(B, B_lo, B, axis={b_axis})\n\
         C[i, j] = sum(tf32({a3}) * tf32({b3}), q)\n"
    )
}

/// `out * stride + r * dilation`, without unit factors.
fn window(out: &str, stride: i64, r: &str, dilation: i64) -> String {
    let a = if stride == 1 {
        out.to_string()
    } else {
        format!("{out} * {stride}")
    };
    let b = if dilation == 1 {
        r.to_string()
    } else {
        format!("{r} * {dilation}")
    };
    format!("{a} + {b}")
}

/// The output extent of a convolution along one spatial dimension.
fn out_extent(
    a: &Args,
    (hk, h): (&str, i64),
    (rk, r): (&str, i64),
    pad: i64,
    stride: i64,
    dil: i64,
) -> Result<i64> {
    let padded = h + 2 * pad;
    let window = dil * (r - 1) + 1;
    if window > padded {
        return Err(at(
            a.raw(rk).1,
            format!(
                "conv window {window} ({rk}={r}, dilation={dil}) exceeds padded input {padded} ({hk}={h}, pad={pad})"
            ),
        ));
    }
    Ok((padded - window) / stride + 1)
}

/// The conv2d family: optional concat, padding, the convolution, optional relu.
fn conv(a: &Args, preset: &str) -> Result<String> {
    let dt = a.dtype()?;
    let prec = a.precision(&dt)?;
    let n = a.int("n", 1)?;
    let (c, concat) = if preset == "concat_conv2d_relu_nchw" {
        let (c1, c2) = (a.int("c1", 1)?, a.int("c2", 1)?);
        (c1 + c2, Some((c1, c2)))
    } else {
        (a.int("c", 1)?, None)
    };
    let (h, w) = (a.int("h", 1)?, a.int("w", 1)?);
    let depthwise = preset == "depthwise_conv2d_nchw";
    let k = if depthwise { c } else { a.int("k", 1)? };
    let (r, s) = (a.int("r", 1)?, a.int("s", 1)?);
    let (stride, pad, dil) = (a.int("stride", 1)?, a.int("pad", 0)?, a.int("dilation", 1)?);
    let oh = out_extent(a, ("h", h), ("r", r), pad, stride, dil)?;
    let ow = out_extent(a, ("w", w), ("s", s), pad, stride, dil)?;
    let nhwc = preset == "conv2d_nhwc";
    let mut t = String::new();
    let mut src = "data".to_string();
    match concat {
        Some((c1, c2)) => {
            t += &format!(
                "input data0: {dt}[{n}, {c1}, {h}, {w}]\ninput data1: {dt}[{n}, {c2}, {h}, {w}]\n"
            );
            src = "concat".to_string();
        }
        None if nhwc => t += &format!("input data: {dt}[{n}, {h}, {w}, {c}]\n"),
        None => t += &format!("input data: {dt}[{n}, {c}, {h}, {w}]\n"),
    }
    t += &match (nhwc, depthwise) {
        (true, _) => format!("input weight: {dt}[{r}, {s}, {c}, {k}]\n"),
        (false, true) => format!("input weight: {dt}[{c}, 1, {r}, {s}]\n"),
        (false, false) => format!("input weight: {dt}[{k}, {c}, {r}, {s}]\n"),
    };
    if concat.is_some() {
        t += "concat = concat(data0, data1, axis=1)\n";
    }
    if pad > 0 {
        let (ph, pw, he, we) = (h + 2 * pad, w + 2 * pad, h + pad, w + pad);
        if nhwc {
            t += &format!(
                "pad_temp[i0, i1: {ph}, i2: {pw}, i3] = if_then_else(i1 >= {pad} && i1 < {he} && i2 >= {pad} && i2 < {we}, \
                 {src}[i0, i1 - {pad}, i2 - {pad}, i3], 0.0)\n"
            );
        } else {
            t += &format!(
                "pad_temp[i0, i1, i2: {ph}, i3: {pw}] = if_then_else(i2 >= {pad} && i2 < {he} && i3 >= {pad} && i3 < {we}, \
                 {src}[i0, i1, i2 - {pad}, i3 - {pad}], 0.0)\n"
            );
        }
        src = "pad_temp".to_string();
    }
    let (y, x) = (
        window("yy", stride, "ry", dil),
        window("xx", stride, "rx", dil),
    );
    let out = if nhwc {
        t += &Reduction {
            out: "conv2d_nhwc",
            index: format!("nn, yy: {oh}, xx: {ow}, ff"),
            plain: "nn, yy, xx, ff",
            a: format!("{src}[nn, {y}, {x}, rc]"),
            b: "weight[ry, rx, rc, ff]".into(),
            axes: "ry, rx, rc",
        }
        .text(&dt, prec);
        "conv2d_nhwc"
    } else if depthwise {
        let (y, x) = (
            window("i", stride, "di", dil),
            window("j", stride, "dj", dil),
        );
        t += &Reduction {
            out: "depthwise_conv2d_nchw",
            index: format!("b, c, i: {oh}, j: {ow}"),
            plain: "b, c, i, j",
            a: format!("{src}[b, c, {y}, {x}]"),
            b: "weight[c, 0, di, dj]".into(),
            axes: "di, dj",
        }
        .text(&dt, prec);
        "depthwise_conv2d_nchw"
    } else {
        t += &Reduction {
            out: "conv2d_nchw",
            index: format!("nn, ff, yy: {oh}, xx: {ow}"),
            plain: "nn, ff, yy, xx",
            a: format!("{src}[nn, rc, {y}, {x}]"),
            b: "weight[ff, rc, ry, rx]".into(),
            axes: "rc, ry, rx",
        }
        .text(&dt, prec);
        "conv2d_nchw"
    };
    if preset.contains("relu") {
        t += &format!("T_relu[ax0, ax1, ax2, ax3] = relu({out}[ax0, ax1, ax2, ax3])\n");
    }
    Ok(t)
}
