//! Explicit vector code for the CPU: a vectorized loop whose store and lane-dependent
//! loads are proven contiguous in the lane (by the lowering's own proof,
//! `lower::kernel_contiguous`) is printed with GCC/Clang vector extensions, one
//! `tessel_vf` (`TESSEL_VLANES` floats, from the ISA the kernel is compiled for) per
//! step: unaligned loads and stores through `memcpy`, lane-invariant subexpressions left
//! scalar (the compiler broadcasts them), `a * b + c` contracted to an FMA under
//! `-ffp-contract=fast`. The lanes that do not fill a whole vector run as one step of a
//! half-width vector (`tessel_hf`, `TESSEL_HLANES` floats) where at least half a vector
//! is left, the rest in a scalar loop; the compiler removes the steps that the constant
//! extent leaves empty. (A conv's 56 output columns on a 16-lane AVX-512 machine: three
//! vectors and one half vector, where the rest of 8 ran as scalar FMAs.)
//!
//! `max`, `min`, `abs`, `exp`, `tanh` and selects on a comparison of floats call the
//! vector helpers of `c_vector_math.rs`.
//!
//! A guard on the lane (the edge of an imperfect tile: `16 * j0 + j1 < 1454`) whose every
//! conjunct compares an affine function of the lane with a bound is decided per step by
//! its first or last lane: a step whose lanes all pass runs as a vector, the edge's step
//! lane by lane (`Printer::vector_step`).
//!
//! Loads and stores of 16-bit float buffers (f16, bf16) convert to and from f32 vectors
//! through the helpers of `cpu.rs`'s prelude (`tessel_vload_h`, `tessel_vstore_bf`, ...).
//!
//! A loop this printer does not take (a select on an index, another guard on the lane, a
//! non-contiguous or non-float access, a cast, `sqrt`) stays a scalar loop under
//! `#pragma omp simd`.

use super::c_like::Printer;
use crate::ir::{BinOp, DType, Expr, UnOp, VarId};
use crate::lower::KStmt;

/// The prelude lines that define `tessel_vf` and its helpers (C only).
pub(super) const PRELUDE: &str = "\
#if defined(__AVX512F__)
#define TESSEL_VLANES 16
#elif defined(__AVX__)
#define TESSEL_VLANES 8
#elif defined(__SSE2__) || defined(__ARM_NEON)
#define TESSEL_VLANES 4
#else
#define TESSEL_VLANES 1
#endif
#if TESSEL_VLANES >= 4
#define TESSEL_HLANES (TESSEL_VLANES / 2)
#else
#define TESSEL_HLANES TESSEL_VLANES
#endif
typedef float tessel_vf __attribute__((vector_size(TESSEL_VLANES * 4)));
typedef float tessel_hf __attribute__((vector_size(TESSEL_HLANES * 4)));
static inline tessel_vf tessel_vload(const float *p) { tessel_vf v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline void tessel_vstore(float *p, tessel_vf v) { __builtin_memcpy(p, &v, sizeof v); }
static inline tessel_vf tessel_vsplat(float x) { return ((tessel_vf){0} + 1.0f) * x; }
static inline tessel_hf tessel_hload(const float *p) { tessel_hf v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline void tessel_hstore(float *p, tessel_hf v) { __builtin_memcpy(p, &v, sizeof v); }
static inline tessel_hf tessel_hsplat(float x) { return ((tessel_hf){0} + 1.0f) * x; }
";

/// The width of one vector step: a whole `tessel_vf`, or the half-width `tessel_hf` of
/// the lanes left after the whole vectors.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Width {
    Whole,
    Half,
}

impl Width {
    /// The helpers' prefix: `tessel_v` (`tessel_vload`, ...) or `tessel_h`.
    fn prefix(self) -> &'static str {
        match self {
            Width::Whole => "tessel_v",
            Width::Half => "tessel_h",
        }
    }
}

/// An expression printed for one vector step: its text and whether it is a vector (else
/// a lane-invariant scalar).
struct VExpr {
    text: String,
    vector: bool,
}

/// One vector step of a vectorized loop's body: the statement, under `guard` (a
/// condition the same for every lane) where it has one. `lanes`, where the body's guard
/// depends on the lane (the edge of an imperfect tile), says when every lane of the step
/// passes it: the step then runs as a vector, else lane by lane as the scalar loop does.
pub(super) struct VectorStep {
    pub guard: Option<String>,
    pub lanes: Option<LaneGuard>,
    pub stmt: String,
}

/// A guard on the lane, monotone in it: every lane of a step passes where the conditions
/// `last` hold with the loop variable at the step's last lane and `first` at its first.
pub(super) struct LaneGuard {
    pub last: Vec<String>,
    pub first: Vec<String>,
}

/// The vector statement for the body of vectorized loop `var` (its single store, perhaps
/// under a guard), one step of `width`; `None` when the loop is to stay scalar (a guard on
/// the lane is taken where each of its conjuncts compares an affine function of the lane
/// with a bound, so that the first or the last lane decides it).
pub(super) fn vector_statement(
    pr: &Printer,
    var: VarId,
    body: &[KStmt],
    width: Width,
) -> Option<VectorStep> {
    let real: Vec<&KStmt> = body
        .iter()
        .filter(|s| !matches!(s, KStmt::Comment(_)))
        .collect();
    let stripped;
    let (body, lanes) = match real.as_slice() {
        [KStmt::If { cond, then }] if cond.uses_var(var) => {
            let (on_lane, invariant): (Vec<Expr>, Vec<Expr>) =
                cond.conjuncts().into_iter().partition(|c| c.uses_var(var));
            let lanes = lane_guard(pr, var, &on_lane)?;
            stripped = match invariant.into_iter().reduce(Expr::and) {
                Some(c) => vec![KStmt::If {
                    cond: c,
                    then: then.clone(),
                }],
                None => then.clone(),
            };
            (&stripped[..], Some(lanes))
        }
        _ => (body, None),
    };
    let crate::lower::VectorStore {
        guard,
        buffer,
        indices,
        value,
    } = crate::lower::kernel_vector_body(body, var).ok()?;
    let stored = pr.p.buffer(buffer).dtype;
    if !stored.is_float()
        || crate::lower::kernel_contiguous(&indices[0], var, 1, pr.ranges()).is_err()
    {
        return None;
    }
    // A load of the stored buffer elsewhere than the stored element could read a lane
    // that an earlier lane of the scalar loop wrote: only the accumulation `x = x + ...`
    // of the same element is taken.
    let mut hazard = false;
    value.visit(&mut |e| {
        if let Expr::Load(b, idx) = e {
            hazard |= *b == buffer && idx[0] != indices[0];
        }
    });
    if hazard {
        return None;
    }
    let rhs = splat(width, vexpr(pr, value, var, width)?);
    let stmt = format!(
        "{}store{}(&{}, {rhs});",
        width.prefix(),
        suffix(stored),
        pr.element(buffer, &indices[0])
    );
    Some(VectorStep {
        guard: guard.map(|g| pr.expr(g)),
        lanes,
        stmt,
    })
}

/// The [`LaneGuard`] of `conjuncts` (each depending on `var`): a comparison `a op b`
/// whose `a - b` grows by a constant with the lane is decided by the last lane where it
/// bounds from above (`<`, `<=` growing; `>`, `>=` falling), else by the first.
fn lane_guard(pr: &Printer, var: VarId, conjuncts: &[Expr]) -> Option<LaneGuard> {
    let mut guard = LaneGuard {
        last: Vec::new(),
        first: Vec::new(),
    };
    for c in conjuncts {
        let Expr::Bin(op @ (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge), a, b) = c else {
            return None;
        };
        let diff = Expr::sub((**a).clone(), (**b).clone());
        let next =
            diff.substitute(&|v| (v == var).then(|| Expr::add(Expr::Var(var), Expr::Int(1))));
        let growth = crate::ir::simplify::simplify(&Expr::sub(next, diff), &|_| None).as_int()?;
        let upper = matches!(op, BinOp::Lt | BinOp::Le) == (growth > 0);
        if growth == 0 || pr.is_float(a) || pr.is_float(b) {
            return None;
        }
        if upper {
            guard.last.push(pr.expr(c));
        } else {
            guard.first.push(pr.expr(c));
        }
    }
    Some(guard)
}

fn vexpr(pr: &Printer, e: &Expr, var: VarId, width: Width) -> Option<VExpr> {
    if !e.uses_var(var) {
        return Some(VExpr {
            text: pr.expr(e),
            vector: false,
        });
    }
    match e {
        Expr::Load(b, idx) => {
            let dtype = pr.p.buffer(*b).dtype;
            if !dtype.is_float()
                || crate::lower::kernel_contiguous(&idx[0], var, 1, pr.ranges()).is_err()
            {
                return None;
            }
            Some(VExpr {
                text: format!(
                    "{}load{}(&{})",
                    width.prefix(),
                    suffix(dtype),
                    pr.element(*b, &idx[0])
                ),
                vector: true,
            })
        }
        Expr::Bin(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div), a, b) => {
            let (x, y) = (vexpr(pr, a, var, width)?, vexpr(pr, b, var, width)?);
            // Scalar operands of a vector operation must be floats to be broadcast.
            let float_ok = |v: &VExpr, e: &Expr| v.vector || pr.is_float(e);
            if !float_ok(&x, a) || !float_ok(&y, b) {
                return None;
            }
            let sym = match op {
                BinOp::Add => "+",
                BinOp::Sub => "-",
                BinOp::Mul => "*",
                _ => "/",
            };
            Some(VExpr {
                text: format!("({} {sym} {})", x.text, y.text),
                vector: true,
            })
        }
        Expr::Un(UnOp::Neg, a) => {
            let x = vexpr(pr, a, var, width)?;
            Some(VExpr {
                text: format!("(-{})", x.text),
                vector: x.vector,
            })
        }
        // `c_vector_math.rs`'s helpers, on float operands.
        Expr::Bin(op @ (BinOp::Max | BinOp::Min), a, b) if pr.is_float(a) && pr.is_float(b) => {
            let (x, y) = (vexpr(pr, a, var, width)?, vexpr(pr, b, var, width)?);
            let name = if *op == BinOp::Max { "max" } else { "min" };
            Some(call(width, name, [x, y]))
        }
        Expr::Un(op @ (UnOp::Abs | UnOp::Exp | UnOp::Tanh), a) if pr.is_float(a) => {
            let x = vexpr(pr, a, var, width)?;
            Some(call(width, op.name(), [x]))
        }
        Expr::Select(c, a, b) if pr.is_float(a) && pr.is_float(b) => {
            let (x, y) = (vexpr(pr, a, var, width)?, vexpr(pr, b, var, width)?);
            let w = width.prefix();
            if !c.uses_var(var) {
                // One condition for every lane: C's conditional evaluates only the
                // chosen side, as the scalar loop does (a side may be a guarded load).
                return Some(VExpr {
                    text: format!(
                        "({} ? {} : {})",
                        pr.expr(c),
                        splat(width, x),
                        splat(width, y)
                    ),
                    vector: true,
                });
            }
            // A condition on the lanes' values, never on their indices: both sides are
            // evaluated for every lane, which a guard of an index must not be.
            let Expr::Bin(cmp @ (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge), l, r) = &**c
            else {
                return None;
            };
            if !pr.is_float(l) || !pr.is_float(r) {
                return None;
            }
            let (l, r) = (vexpr(pr, l, var, width)?, vexpr(pr, r, var, width)?);
            let sym = match cmp {
                BinOp::Lt => "<",
                BinOp::Le => "<=",
                BinOp::Gt => ">",
                _ => ">=",
            };
            Some(VExpr {
                text: format!(
                    "{w}blend(({w}i)({} {sym} {}), {}, {})",
                    splat(width, l),
                    splat(width, r),
                    splat(width, x),
                    splat(width, y)
                ),
                vector: true,
            })
        }
        // A 16-bit value read as f32 (`f32(x)` of an f16 or bf16 load): its load
        // converts already.
        Expr::Cast(DType::F32, a) if pr.is_float(a) => vexpr(pr, a, var, width),
        // The lane index itself, selects on indices, other casts, sqrt: scalar loop.
        _ => None,
    }
}

/// The suffix of the load and store helpers of a float `dtype`'s storage: none for f32,
/// `_h` and `_bf` for the 16-bit ones (`cpu.rs`'s `HALF` and `BFLOAT16`).
fn suffix(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "_h",
        DType::BF16 => "_bf",
        _ => "",
    }
}

/// `v` as a vector of `width`: itself, or its broadcast.
fn splat(width: Width, v: VExpr) -> String {
    if v.vector {
        v.text
    } else {
        format!("{}splat({})", width.prefix(), v.text)
    }
}

/// A call of the vector math helper `name` (`tessel_vmax`, ...) on `args`.
fn call<const N: usize>(width: Width, name: &str, args: [VExpr; N]) -> VExpr {
    let args: Vec<String> = args.into_iter().map(|a| splat(width, a)).collect();
    VExpr {
        text: format!("{}{name}({})", width.prefix(), args.join(", ")),
        vector: true,
    }
}

#[cfg(test)]
mod tests {
    use crate::lower::{lower, Backend};
    use crate::schedule::{replay, text};

    /// The C of `spec` scheduled by `trace`.
    fn c_source(spec: &str, trace: &str) -> String {
        scheduled_c(crate::workload::preset(spec).unwrap().to_program(), trace)
    }

    /// The C of the workload text `workload` scheduled by `trace`.
    fn program_source(workload: &str, trace: &str) -> String {
        scheduled_c(
            crate::workload::parse(workload).unwrap().to_program(),
            trace,
        )
    }

    fn scheduled_c(program: crate::ir::Program, trace: &str) -> String {
        let sch = replay(&text::parse(trace).unwrap(), program, 0).unwrap();
        crate::codegen::cpu::generate(&lower(sch.program(), Backend::Cpu).unwrap())
            .unwrap()
            .code
    }

    #[test]
    fn a_contiguous_accumulation_becomes_vector_code_with_a_broadcast() {
        // C[i, j] += A[i, k] * B[k, j] with j innermost: B and C contiguous in j, A[i, k]
        // the same for every lane.
        let code = c_source(
            "matmul:8x32x4",
            "b0 = get_block(\"C\")\ni, j, k = get_loops(b0)\nreorder(i, k, j)\nvectorize(j)\n\
             b1 = decompose_reduction(b0, k)\n",
        );
        // C's row, invariant in the reduction over k, through a pointer declared before it
        // (`c_bases.rs`).
        assert!(
            code.contains("float *tessel_acc0 = &C[(i * 32)];"),
            "{code}"
        );
        assert!(
            code.contains("tessel_vstore(&tessel_acc0[j], (tessel_vload(&tessel_acc0[j]) + (A[((i * 4) + k)] * tessel_vload(&B[((k * 32) + j)]))));"),
            "{code}"
        );
        assert!(code.contains("j += TESSEL_VLANES"), "{code}");
        // The initialisation of C is a splat of zero.
        assert!(code.contains("tessel_vsplat(0.0f)"), "{code}");
    }

    #[test]
    fn strided_loops_and_selects_on_indices_stay_scalar() {
        // j outermost, i vectorized: C[i, j] is strided in i.
        let code = c_source(
            "matmul:8x8x4",
            "b0 = get_block(\"C\")\ni, j, k = get_loops(b0)\nreorder(j, k, i)\nvectorize(i)\n",
        );
        assert!(!code.contains("tessel_vstore(&C"), "{code}");
        assert!(code.contains("#pragma omp simd"), "{code}");
        // A select on the lane's index (a zero-fill the lowering cannot partition away):
        // both sides of a vector select would be read for every lane.
        let code = program_source(
            "workload w\ninput X: f32[4, 32]\nY[i, j] = if_then_else(j % 3 < 1, X[i, j], 0.0)\n",
            "b0 = get_block(\"Y\")\ni, j = get_loops(b0)\nvectorize(j)\n",
        );
        assert!(!code.contains("tessel_vstore(&Y"), "{code}");
        assert!(code.contains("#pragma omp simd\n    for (int j"), "{code}");
    }

    #[test]
    fn max_exp_and_selects_on_values_call_the_vector_helpers() {
        // relu(x + bias): max with a broadcast zero.
        let code = c_source(
            "dense_bias_relu:m=4,n=16,k=4",
            "b0 = get_block(\"T_relu\")\ni, j = get_loops(b0)\nvectorize(j)\n",
        );
        assert!(
            code.contains("tessel_vstore(&T_relu[((i * 16) + j)], tessel_vmax(tessel_vload(&T_add[((i * 16) + j)]), tessel_vsplat(0.0f)));"),
            "{code}"
        );
        // A softmax's exponentials, and a select on values.
        let code = program_source(
            "workload w\ninput X: f32[4, 32]\nM[i] = max_reduce(X[i, k], k: 32)\n\
             E[i, j] = exp(X[i, j] - M[i])\n\
             L[i, j] = if_then_else(E[i, j] > 0.5, tanh(E[i, j]), 0.1 * abs(X[i, j]))\n",
            "b0 = get_block(\"E\")\ni, j = get_loops(b0)\nvectorize(j)\n\
             b1 = get_block(\"L\")\ni1, j1 = get_loops(b1)\nvectorize(j1)\n",
        );
        assert!(
            code.contains("tessel_vstore(&E[((i * 32) + j)], tessel_vexp((tessel_vload(&X[((i * 32) + j)]) - M[i])));"),
            "{code}"
        );
        assert!(
            code.contains("tessel_vstore(&L[((i * 32) + j)], tessel_vblend((tessel_vi)(tessel_vload(&E[((i * 32) + j)]) > tessel_vsplat(0.5f)), tessel_vtanh(tessel_vload(&E[((i * 32) + j)])), (0.1f * tessel_vabs(tessel_vload(&X[((i * 32) + j)])))));"),
            "{code}"
        );
    }

    #[test]
    fn a_guard_on_the_lane_runs_whole_steps_as_vectors_and_the_edge_lane_by_lane() {
        // 37 columns in steps of 16: the third step's guard `j_0 * 16 + j_1 < 37` fails for
        // some lanes; its last lane decides whether a step runs as a vector.
        let code = c_source(
            "matmul:7x37x5",
            "b0 = get_block(\"C\")\ni, j, k = get_loops(b0)\nj0, j1 = split(j, factors=[None, 16])\n\
             reorder(i, j0, k, j1)\nvectorize(j1)\nb1 = decompose_reduction(b0, k)\n",
        );
        assert!(
            code.contains("{ const int j_1 = tessel_lane0 + TESSEL_VLANES - 1; tessel_all = tessel_all && (((j_0 * 16) + j_1) < 37); }"),
            "{code}"
        );
        assert!(code.contains("if (tessel_all) {\n"), "{code}");
        assert!(code.contains("tessel_vstore(&C["), "{code}");
        assert!(
            code.contains(
                "for (int j_1 = tessel_lane0; j_1 < tessel_lane0 + TESSEL_VLANES; ++j_1) {"
            ),
            "{code}"
        );
    }
}
