//! The one compiler of IR expressions for both interpreters, and the typed form it
//! compiles to.
//!
//! Invariants of the compiled form (established here, relied on by `exec` and by the
//! GPU-semantics `Thread`):
//! * every variable is a slot of one `Vec<i64>` (its `VarId` index);
//! * every access names a buffer slot and holds one index per dimension the interpreter
//!   addresses (every dimension of the buffer on the serial interpreter, the one flat
//!   index of a kernel buffer on the GPU one), with its extent and row-major stride;
//! * every expression is typed (integer, float or boolean) with conversions explicit.
//!
//! The typing rules (which operands convert, which combinations are errors) are written
//! once, here. What differs between the interpreters, which variables an expression may
//! read, how a buffer is addressed and how errors name their place, is a [`Scope`].

use crate::ir::{BinOp, BufferId, DType, Expr, UnOp, VarId};

/// The deepest expression nesting accepted (evaluation is recursive).
pub(super) const MAX_DEPTH: usize = 512;

/// Integer binary operators.
#[derive(Copy, Clone, Debug)]
pub(super) enum IBin {
    Add,
    Sub,
    Mul,
    FloorDiv,
    FloorMod,
    Min,
    Max,
}

/// Float binary operators.
#[derive(Copy, Clone, Debug)]
pub(super) enum FBin {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
}

/// Float unary operators.
#[derive(Copy, Clone, Debug)]
pub(super) enum FUn {
    Neg,
    Exp,
    Sqrt,
    Tanh,
    Abs,
    Tf32,
}

/// Comparison operators.
#[derive(Copy, Clone, Debug)]
pub(super) enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl FBin {
    /// The float operator of an arithmetic `BinOp` (none for the others).
    pub fn of(op: BinOp) -> Option<FBin> {
        Some(match op {
            BinOp::Add => FBin::Add,
            BinOp::Sub => FBin::Sub,
            BinOp::Mul => FBin::Mul,
            BinOp::Div => FBin::Div,
            BinOp::Min => FBin::Min,
            BinOp::Max => FBin::Max,
            _ => return None,
        })
    }

    /// The operator on two values; min and max propagate NaN (Rust's and CUDA's `fminf`
    /// drop it).
    #[inline(always)]
    pub fn apply(self, x: f32, y: f32) -> f32 {
        match self {
            FBin::Add => x + y,
            FBin::Sub => x - y,
            FBin::Mul => x * y,
            FBin::Div => x / y,
            FBin::Min | FBin::Max if x.is_nan() || y.is_nan() => f32::NAN,
            FBin::Min => x.min(y),
            FBin::Max => x.max(y),
        }
    }
}

/// The bits of an f32 that TensorFloat-32 keeps: sign, exponent and 10 mantissa bits.
pub const TF32_MASK: u32 = 0xffff_e000;

impl FUn {
    /// The operator on a value.
    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            FUn::Neg => -x,
            FUn::Exp => x.exp(),
            FUn::Sqrt => x.sqrt(),
            FUn::Tanh => x.tanh(),
            FUn::Abs => x.abs(),
            FUn::Tf32 => f32::from_bits(x.to_bits() & TF32_MASK),
        }
    }
}

impl Cmp {
    /// The comparison of two values.
    #[inline(always)]
    pub fn apply<T: PartialOrd>(self, x: T, y: T) -> bool {
        match self {
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
            Cmp::Eq => x == y,
            Cmp::Ne => x != y,
        }
    }
}

/// One index of an access, with the extent and stride of its dimension.
#[derive(Debug)]
pub(super) struct Index {
    pub expr: IExpr,
    pub extent: i64,
    pub stride: i64,
}

/// `buffer[indices]` with the buffer resolved to its slot.
#[derive(Debug)]
pub(super) struct Access {
    pub buf: u32,
    pub idx: Box<[Index]>,
}

/// An integer-valued expression.
#[derive(Debug)]
pub(super) enum IExpr {
    Const(i64),
    Slot(u32),
    Bin(IBin, Box<IExpr>, Box<IExpr>),
    Neg(Box<IExpr>),
    Abs(Box<IExpr>),
    Select(Box<BExpr>, Box<IExpr>, Box<IExpr>),
    /// A load from an `int32` buffer.
    Load(Box<Access>),
    /// `Cast(int32, float)`: truncation toward zero, saturating at the `i32` range.
    FromFloat(Box<FExpr>),
    /// `Cast(int32, bool)`: 0 or 1.
    FromBool(Box<BExpr>),
    /// `Cast(int32, int)`: wraps to the `i32` range.
    Wrap32(Box<IExpr>),
}

/// A float-valued expression (`f32`).
#[derive(Debug)]
pub(super) enum FExpr {
    Const(f32),
    /// A load from a float buffer.
    Load(Box<Access>),
    Bin(FBin, Box<FExpr>, Box<FExpr>),
    Un(FUn, Box<FExpr>),
    Select(Box<BExpr>, Box<FExpr>, Box<FExpr>),
    FromInt(Box<IExpr>),
    FromBool(Box<BExpr>),
    /// Rounds to the nearest `f16` (kept as `f32`).
    ToF16(Box<FExpr>),
    /// Rounds to the nearest `bf16` (kept as `f32`).
    ToBF16(Box<FExpr>),
}

/// A boolean-valued expression.
#[derive(Debug)]
pub(super) enum BExpr {
    CmpI(Cmp, Box<IExpr>, Box<IExpr>),
    CmpF(Cmp, Box<FExpr>, Box<FExpr>),
    And(Box<BExpr>, Box<BExpr>),
    Or(Box<BExpr>, Box<BExpr>),
    Not(Box<BExpr>),
    Select(Box<BExpr>, Box<BExpr>, Box<BExpr>),
    /// A load from a `bool` buffer.
    Load(Box<Access>),
    IntNonZero(Box<IExpr>),
    FloatNonZero(Box<FExpr>),
}

/// A typed compiled expression.
pub(super) enum Typed {
    I(IExpr),
    F(FExpr),
    B(BExpr),
}

impl Typed {
    fn kind(&self) -> &'static str {
        match self {
            Typed::I(_) => "int",
            Typed::F(_) => "float",
            Typed::B(_) => "bool",
        }
    }
}

/// A buffer as an access sees it: its slot, dtype and the extents its indices address.
pub(super) struct BufView {
    pub slot: u32,
    pub dtype: DType,
    /// One extent per index of the access, outermost first.
    pub extents: Vec<i64>,
}

/// What the compiler asks the interpreter it compiles for.
pub(super) trait Scope {
    /// The interpreter's error.
    type Error;
    /// The slot of `v`, if an expression here may read it.
    fn var(&self, v: VarId) -> Result<u32, Self::Error>;
    /// The buffer behind `b`, accessed with `indices` indices (a wrong count is an error).
    fn buffer(&self, b: BufferId, indices: usize) -> Result<BufView, Self::Error>;
    /// A typing error, with the place the scope knows.
    fn type_error(&self, reason: String) -> Self::Error;
    /// Nesting beyond [`MAX_DEPTH`].
    fn too_deep(&self) -> Self::Error;
}

/// `buffer[indices]`, each index compiled as an integer, with row-major strides.
pub(super) fn access<S: Scope>(
    s: &S,
    b: BufferId,
    indices: &[Expr],
    depth: usize,
) -> Result<(Access, DType), S::Error> {
    let view = s.buffer(b, indices.len())?;
    // The scope bounded the product of the extents: the strides cannot overflow.
    let mut strides = vec![1i64; view.extents.len()];
    for d in (0..view.extents.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * view.extents[d + 1];
    }
    let mut idx = Vec::with_capacity(indices.len());
    for ((e, &extent), stride) in indices.iter().zip(&view.extents).zip(strides) {
        idx.push(Index {
            expr: int(s, e, depth + 1)?,
            extent,
            stride,
        });
    }
    Ok((
        Access {
            buf: view.slot,
            idx: idx.into(),
        },
        view.dtype,
    ))
}

/// An expression that must be an integer.
pub(super) fn int<S: Scope>(s: &S, e: &Expr, depth: usize) -> Result<IExpr, S::Error> {
    match expr(s, e, depth)? {
        Typed::I(i) => Ok(i),
        t => Err(s.type_error(format!("expected an integer, got a {}", t.kind()))),
    }
}

/// An expression that must be a boolean.
pub(super) fn boolean<S: Scope>(s: &S, e: &Expr, depth: usize) -> Result<BExpr, S::Error> {
    match expr(s, e, depth)? {
        Typed::B(b) => Ok(b),
        t => Err(s.type_error(format!("expected a boolean, got a {}", t.kind()))),
    }
}

/// The value stored into a `dtype` buffer, converted to the `f32` element to write.
pub(super) fn store_value<S: Scope>(s: &S, dtype: DType, e: &Expr) -> Result<FExpr, S::Error> {
    Ok(match cast(dtype, expr(s, e, 0)?) {
        Typed::F(f) => f,
        Typed::I(i) => FExpr::FromInt(Box::new(i)),
        Typed::B(b) => FExpr::FromBool(Box::new(b)),
    })
}

/// An operand of float arithmetic: integers convert, booleans do not.
fn float<S: Scope>(s: &S, t: Typed, what: &str) -> Result<FExpr, S::Error> {
    match t {
        Typed::F(f) => Ok(f),
        Typed::I(i) => Ok(FExpr::FromInt(Box::new(i))),
        Typed::B(_) => Err(s.type_error(format!("boolean operand of {what}"))),
    }
}

/// Explicit conversion, as `Cast(dtype, _)` (and as a store into a `dtype` buffer).
fn cast(dtype: DType, t: Typed) -> Typed {
    match (dtype, t) {
        (DType::F32, Typed::F(f)) => Typed::F(f),
        (DType::F32, Typed::I(i)) => Typed::F(FExpr::FromInt(Box::new(i))),
        (DType::F32, Typed::B(b)) => Typed::F(FExpr::FromBool(Box::new(b))),
        (DType::F16, t) => match cast(DType::F32, t) {
            Typed::F(f) => Typed::F(FExpr::ToF16(Box::new(f))),
            other => other,
        },
        (DType::BF16, t) => match cast(DType::F32, t) {
            Typed::F(f) => Typed::F(FExpr::ToBF16(Box::new(f))),
            other => other,
        },
        (DType::I32, Typed::I(i)) => Typed::I(IExpr::Wrap32(Box::new(i))),
        (DType::I32, Typed::F(f)) => Typed::I(IExpr::FromFloat(Box::new(f))),
        (DType::I32, Typed::B(b)) => Typed::I(IExpr::FromBool(Box::new(b))),
        (DType::Bool, Typed::B(b)) => Typed::B(b),
        (DType::Bool, Typed::I(i)) => Typed::B(BExpr::IntNonZero(Box::new(i))),
        (DType::Bool, Typed::F(f)) => Typed::B(BExpr::FloatNonZero(Box::new(f))),
    }
}

/// Compiles `e` to its typed form.
pub(super) fn expr<S: Scope>(s: &S, e: &Expr, depth: usize) -> Result<Typed, S::Error> {
    if depth > MAX_DEPTH {
        return Err(s.too_deep());
    }
    let d = depth + 1;
    match e {
        Expr::Int(v) => Ok(Typed::I(IExpr::Const(*v))),
        Expr::Float(v) => Ok(Typed::F(FExpr::Const(*v as f32))),
        Expr::Var(v) => Ok(Typed::I(IExpr::Slot(s.var(*v)?))),
        Expr::Load(b, idx) => {
            let (acc, dtype) = access(s, *b, idx, d)?;
            let acc = Box::new(acc);
            Ok(match dtype {
                DType::F32 | DType::F16 | DType::BF16 => Typed::F(FExpr::Load(acc)),
                DType::I32 => Typed::I(IExpr::Load(acc)),
                DType::Bool => Typed::B(BExpr::Load(acc)),
            })
        }
        Expr::Bin(op, a, b) => {
            let x = expr(s, a, d)?;
            let y = expr(s, b, d)?;
            binary(s, *op, x, y)
        }
        Expr::Un(op, a) => {
            let x = expr(s, a, d)?;
            unary(s, *op, x)
        }
        Expr::Select(c, t, f) => {
            let c = Box::new(boolean(s, c, d)?);
            let t = expr(s, t, d)?;
            let f = expr(s, f, d)?;
            Ok(match (t, f) {
                (Typed::I(t), Typed::I(f)) => Typed::I(IExpr::Select(c, Box::new(t), Box::new(f))),
                (Typed::B(t), Typed::B(f)) => Typed::B(BExpr::Select(c, Box::new(t), Box::new(f))),
                (t, f) => {
                    let t = float(s, t, "select")?;
                    let f = float(s, f, "select")?;
                    Typed::F(FExpr::Select(c, Box::new(t), Box::new(f)))
                }
            })
        }
        Expr::Cast(dtype, a) => Ok(cast(*dtype, expr(s, a, d)?)),
    }
}

/// A binary operator on typed operands: comparisons give booleans, integers stay
/// integers where the operator has an integer form, anything else is float arithmetic.
fn binary<S: Scope>(s: &S, op: BinOp, x: Typed, y: Typed) -> Result<Typed, S::Error> {
    use Typed::{B, F, I};
    let int_op = |o: IBin, a: IExpr, b: IExpr| I(IExpr::Bin(o, Box::new(a), Box::new(b)));
    let cmp = match op {
        BinOp::Lt => Some(Cmp::Lt),
        BinOp::Le => Some(Cmp::Le),
        BinOp::Gt => Some(Cmp::Gt),
        BinOp::Ge => Some(Cmp::Ge),
        BinOp::Eq => Some(Cmp::Eq),
        BinOp::Ne => Some(Cmp::Ne),
        _ => None,
    };
    if let Some(c) = cmp {
        return Ok(match (x, y) {
            (I(a), I(b)) => B(BExpr::CmpI(c, Box::new(a), Box::new(b))),
            (B(a), B(b)) if matches!(c, Cmp::Eq | Cmp::Ne) => B(BExpr::CmpI(
                c,
                Box::new(IExpr::FromBool(Box::new(a))),
                Box::new(IExpr::FromBool(Box::new(b))),
            )),
            (x, y) => {
                let a = float(s, x, "a comparison")?;
                let b = float(s, y, "a comparison")?;
                B(BExpr::CmpF(c, Box::new(a), Box::new(b)))
            }
        });
    }
    match op {
        BinOp::And | BinOp::Or => match (x, y) {
            (B(a), B(b)) => Ok(B(if matches!(op, BinOp::And) {
                BExpr::And(Box::new(a), Box::new(b))
            } else {
                BExpr::Or(Box::new(a), Box::new(b))
            })),
            (x, y) => Err(s.type_error(format!("{op:?} of a {} and a {}", x.kind(), y.kind()))),
        },
        BinOp::FloorDiv | BinOp::FloorMod => match (x, y) {
            (I(a), I(b)) => Ok(int_op(
                if matches!(op, BinOp::FloorDiv) {
                    IBin::FloorDiv
                } else {
                    IBin::FloorMod
                },
                a,
                b,
            )),
            (x, y) => Err(s.type_error(format!(
                "{op:?} of a {} and a {} (integers only)",
                x.kind(),
                y.kind()
            ))),
        },
        _ => {
            let iop = match op {
                BinOp::Add => Some(IBin::Add),
                BinOp::Sub => Some(IBin::Sub),
                BinOp::Mul => Some(IBin::Mul),
                BinOp::Min => Some(IBin::Min),
                BinOp::Max => Some(IBin::Max),
                _ => None,
            };
            let fop = FBin::of(op).unwrap_or(FBin::Div);
            match (iop, x, y) {
                (Some(o), I(a), I(b)) => Ok(int_op(o, a, b)),
                (None, I(_), I(_)) => Err(s.type_error(
                    "Div of two integers (use FloorDiv for index arithmetic)".to_string(),
                )),
                (_, x, y) => {
                    let what = format!("{op:?}");
                    let a = float(s, x, &what)?;
                    let b = float(s, y, &what)?;
                    Ok(F(FExpr::Bin(fop, Box::new(a), Box::new(b))))
                }
            }
        }
    }
}

/// A unary operator on a typed operand.
fn unary<S: Scope>(s: &S, op: UnOp, x: Typed) -> Result<Typed, S::Error> {
    use Typed::{B, F, I};
    let fop = match (op, x) {
        (UnOp::Not, B(b)) => return Ok(B(BExpr::Not(Box::new(b)))),
        (UnOp::Not, x) => return Err(s.type_error(format!("Not of a {}", x.kind()))),
        (UnOp::Neg, I(i)) => return Ok(I(IExpr::Neg(Box::new(i)))),
        (UnOp::Abs, I(i)) => return Ok(I(IExpr::Abs(Box::new(i)))),
        (UnOp::Neg, x) => (FUn::Neg, x),
        (UnOp::Abs, x) => (FUn::Abs, x),
        (UnOp::Exp, x) => (FUn::Exp, x),
        (UnOp::Sqrt, x) => (FUn::Sqrt, x),
        (UnOp::Tanh, x) => (FUn::Tanh, x),
        (UnOp::Tf32, x) => (FUn::Tf32, x),
    };
    let f = float(s, fop.1, op.name())?;
    Ok(F(FExpr::Un(fop.0, Box::new(f))))
}
