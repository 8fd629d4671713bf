//! Checking a candidate program against a reference on random inputs.
//!
//! Inputs are uniform in `[-1, 1]` without exact zeros, from a ChaCha8 stream per
//! parameter (seeded by the caller and the parameter's position, so the values are the
//! same on every platform and do not depend on the other parameters). Outputs start as
//! NaN, so an element that a candidate never writes shows up as NaN.

use super::{InterpError, Interpreter};
use crate::ir::{BufferKind, DType, Program};
use half::f16;
use ndarray::{ArrayD, Dimension, IxDyn};
use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

/// The relative error below which an `f32` output passes.
pub const TOLERANCE: f64 = 1e-4;

/// The relative error below which an `f16` output passes (an `f16` has 11 significant
/// bits; schedules reorder its roundings).
pub const TOLERANCE_F16: f64 = 1e-2;

/// The relative error below which an output of a workload that multiplies at
/// TensorFloat-32's precision (`tf32(x)`) passes: its factors have the 11 significant
/// bits of an `f16`, and tensor cores may round them where the reference truncates.
pub const TOLERANCE_TF32: f64 = TOLERANCE_F16;

/// The relative error below which a `bf16` output passes: the `f16` tolerance scaled by
/// the coarser rounding (8 significant bits against 11).
pub const TOLERANCE_BF16: f64 = 8e-2;

/// The tolerance for an output of type `dtype`: integer and boolean outputs must match
/// exactly.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => TOLERANCE,
        DType::F16 => TOLERANCE_F16,
        DType::BF16 => TOLERANCE_BF16,
        DType::I32 | DType::Bool => f64::MIN_POSITIVE,
    }
}

/// Why a candidate does not compute what the reference computes.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum CheckError {
    /// The two programs take different numbers of parameters.
    #[error("reference takes {reference} parameters, candidate {candidate}")]
    ParamCount { reference: usize, candidate: usize },
    /// A parameter differs in shape, dtype or kind.
    #[error("parameter {position} differs: reference {reference}, candidate {candidate}")]
    ParamMismatch {
        position: usize,
        reference: String,
        candidate: String,
    },
    /// The reference itself could not be compiled or run.
    #[error("reference failed: {0}")]
    Reference(InterpError),
    /// The candidate could not be compiled or run.
    #[error("candidate failed: {0}")]
    Candidate(InterpError),
    /// The reference's output holds a NaN: it reads something never written, or the
    /// computation is not defined on these inputs.
    #[error("reference output {output} is NaN at {index:?}")]
    ReferenceNan { output: String, index: Vec<usize> },
    /// The candidate's output holds a NaN where the reference has a number: the element
    /// was never written, or was computed from an element never written.
    #[error(
        "output {output} is NaN at {index:?}: never written (or computed from a value never written)"
    )]
    Unwritten { output: String, index: Vec<usize> },
    /// The candidate changed an input parameter.
    #[error("input {input} was modified at {index:?}")]
    InputModified { input: String, index: Vec<usize> },
    /// The candidate's output is too far from the reference's.
    #[error(
        "output {output}: relative error {rel_error:e} >= {tolerance:e}; worst at {index:?}: {got} vs {expected}"
    )]
    Mismatch {
        output: String,
        rel_error: f64,
        tolerance: f64,
        index: Vec<usize>,
        got: f32,
        expected: f32,
    },
}

/// The result type of checks.
pub type CheckResult<T> = std::result::Result<T, CheckError>;

/// All parameters of `prog`, in order: inputs uniform in `[-1, 1]` without zeros
/// (`float16` ones rounded to `f16`; `int32` ones integers in `[-4, 4]` without zero;
/// `bool` ones 0 or 1), outputs filled with NaN. Deterministic in `seed`.
pub fn random_inputs(prog: &Program, seed: u64) -> super::Result<Vec<ArrayD<f32>>> {
    let mut out = Vec::with_capacity(prog.params.len());
    for (position, &b) in prog.params.iter().enumerate() {
        let buf = prog
            .buffers
            .get(b.index())
            .ok_or_else(|| InterpError::DanglingId {
                program: prog.name.clone(),
                id: b.to_string(),
            })?;
        let shape = buf
            .shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|_| InterpError::BadShape {
                buffer: buf.name.clone(),
                shape: buf.shape.clone(),
                reason: "negative extent".to_string(),
            })?;
        let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if !matches!(numel, Some(n) if n <= 1 << 30) {
            return Err(InterpError::BadShape {
                buffer: buf.name.clone(),
                shape: buf.shape.clone(),
                reason: "too many elements".to_string(),
            });
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(position as u64);
        let arr = if buf.kind == BufferKind::Input {
            ArrayD::from_shape_simple_fn(IxDyn(&shape), || sample(&mut rng, buf.dtype))
        } else {
            ArrayD::from_elem(IxDyn(&shape), f32::NAN)
        };
        out.push(arr);
    }
    Ok(out)
}

fn sample(rng: &mut ChaCha8Rng, dtype: DType) -> f32 {
    loop {
        let v = match dtype {
            DType::F32 => rng.gen_range(-1.0f32..=1.0),
            DType::F16 => f16::from_f32(rng.gen_range(-1.0f32..=1.0)).to_f32(),
            DType::BF16 => half::bf16::from_f32(rng.gen_range(-1.0f32..=1.0)).to_f32(),
            DType::I32 => rng.gen_range(-4i32..=4) as f32,
            DType::Bool => return rng.gen_range(0..=1) as f32,
        };
        if v != 0.0 {
            return v;
        }
    }
}

/// `||out - reference||_2 / ||reference||_2`, in `f64` (the absolute error when the
/// reference is all zeros). NaN when either holds a NaN, infinite when the shapes
/// differ, so that `rel_error(..) < tol` fails for both.
pub fn rel_error(out: &ArrayD<f32>, reference: &ArrayD<f32>) -> f64 {
    if out.shape() != reference.shape() {
        return f64::INFINITY;
    }
    let mut diff = 0.0f64;
    let mut norm = 0.0f64;
    for (&o, &r) in out.iter().zip(reference.iter()) {
        if o.is_nan() || r.is_nan() {
            return f64::NAN;
        }
        let d = o as f64 - r as f64;
        diff += d * d;
        norm += r as f64 * r as f64;
    }
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

/// Whether an `f32` output matches its reference: `rel_error < TOLERANCE`.
pub fn is_close(out: &ArrayD<f32>, reference: &ArrayD<f32>) -> bool {
    rel_error(out, reference) < TOLERANCE
}

/// A short description of a parameter for mismatch messages.
fn describe_param(prog: &Program, position: usize) -> Option<(String, DType, BufferKind)> {
    let buf = prog.buffers.get(prog.params.get(position)?.index())?;
    let text = format!("{} {}{:?} {:?}", buf.name, buf.dtype, buf.shape, buf.kind);
    Some((text, buf.dtype, buf.kind))
}

/// Runs `reference` and `candidate` on the same random inputs (parameters matched by
/// position) and returns the largest relative error over the outputs, or why the
/// candidate fails: an interpreter error, an output element left NaN, a modified input,
/// or an output whose relative error reaches [`tolerance`] of its dtype.
pub fn check(reference: &Program, candidate: &Program, seed: u64) -> CheckResult<f64> {
    let params = match_params(reference, candidate)?;
    let ref_interp = Interpreter::new(reference).map_err(CheckError::Reference)?;
    let cand_interp = Interpreter::new(candidate).map_err(CheckError::Candidate)?;
    let inputs = random_inputs(reference, seed).map_err(CheckError::Reference)?;
    let mut expected = inputs.clone();
    ref_interp
        .run(&mut expected)
        .map_err(CheckError::Reference)?;
    let mut got = inputs;
    cand_interp.run(&mut got).map_err(CheckError::Candidate)?;
    compare_outputs(params, &got, &expected)
}

/// A parameter as [`compare_outputs`] needs it: name, dtype, kind.
pub(super) type ParamInfo = (String, DType, BufferKind);

/// Checks that `candidate` takes the parameters of `reference` (by position: shape,
/// dtype, kind) and describes them.
pub(super) fn match_params(
    reference: &Program,
    candidate: &Program,
) -> CheckResult<Vec<ParamInfo>> {
    if reference.params.len() != candidate.params.len() {
        return Err(CheckError::ParamCount {
            reference: reference.params.len(),
            candidate: candidate.params.len(),
        });
    }
    let mut params = Vec::with_capacity(reference.params.len());
    for position in 0..reference.params.len() {
        let r = describe_param(reference, position);
        let c = describe_param(candidate, position);
        let (r, c) = match (r, c) {
            (Some(r), Some(c)) => (r, c),
            (None, _) => {
                return Err(CheckError::Reference(InterpError::DanglingId {
                    program: reference.name.clone(),
                    id: format!("parameter {position}"),
                }))
            }
            (_, None) => {
                return Err(CheckError::Candidate(InterpError::DanglingId {
                    program: candidate.name.clone(),
                    id: format!("parameter {position}"),
                }))
            }
        };
        let rb = reference.buffer(reference.params[position]);
        let cb = candidate.buffer(candidate.params[position]);
        if rb.shape != cb.shape || r.1 != c.1 || r.2 != c.2 {
            return Err(CheckError::ParamMismatch {
                position,
                reference: r.0,
                candidate: c.0,
            });
        }
        params.push((rb.name.clone(), r.1, r.2));
    }
    Ok(params)
}

/// Compares a candidate's parameters after a run with the reference's: inputs
/// unchanged, outputs without NaN and within [`tolerance`]. Returns the largest
/// relative error over the outputs.
pub(super) fn compare_outputs(
    params: Vec<ParamInfo>,
    got: &[ArrayD<f32>],
    expected: &[ArrayD<f32>],
) -> CheckResult<f64> {
    let mut worst = 0.0f64;
    for ((name, dtype, kind), (g, e)) in params.into_iter().zip(got.iter().zip(expected)) {
        if kind == BufferKind::Input {
            let changed = g
                .indexed_iter()
                .zip(e.iter())
                .find(|((_, a), b)| a.to_bits() != b.to_bits());
            if let Some(((index, _), _)) = changed {
                return Err(CheckError::InputModified {
                    input: name,
                    index: index.slice().to_vec(),
                });
            }
            continue;
        }
        if let Some((index, _)) = e.indexed_iter().find(|(_, v)| v.is_nan()) {
            return Err(CheckError::ReferenceNan {
                output: name,
                index: index.slice().to_vec(),
            });
        }
        if let Some((index, _)) = g.indexed_iter().find(|(_, v)| v.is_nan()) {
            return Err(CheckError::Unwritten {
                output: name,
                index: index.slice().to_vec(),
            });
        }
        let err = rel_error(g, e);
        let tol = tolerance(dtype);
        let passes = err < tol;
        if !passes {
            let (index, got, expected) = worst_element(g, e);
            return Err(CheckError::Mismatch {
                output: name,
                rel_error: err,
                tolerance: tol,
                index,
                got,
                expected,
            });
        }
        worst = worst.max(err);
    }
    Ok(worst)
}

/// The element with the largest absolute difference: index, candidate, reference.
fn worst_element(got: &ArrayD<f32>, expected: &ArrayD<f32>) -> (Vec<usize>, f32, f32) {
    let mut best = (Vec::new(), f32::NAN, f32::NAN);
    let mut best_diff = -1.0f64;
    for ((index, &g), &e) in got.indexed_iter().zip(expected.iter()) {
        let d = (g as f64 - e as f64).abs();
        if d > best_diff || d.is_nan() {
            best_diff = if d.is_nan() { f64::INFINITY } else { d };
            best = (index.slice().to_vec(), g, e);
        }
    }
    best
}
