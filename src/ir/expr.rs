//! Expressions: index arithmetic, loads and the scalar value computations of blocks.

use super::ids::{BufferId, VarId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Element and scalar types.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum DType {
    F32,
    F16,
    /// bfloat16: float32's exponent, 8 significant bits.
    BF16,
    I32,
    Bool,
}

impl DType {
    /// The name used in the workload language and in printed IR (`float32`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I32 => "int32",
            DType::Bool => "bool",
        }
    }
    /// The short spelling of the workload language (`f32`).
    pub fn short(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::Bool => "bool",
        }
    }
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }
    /// A 16-bit float (`f16`, `bf16`): stored as 16 bits, computed in float32.
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }
    /// Size of one element in bytes.
    pub fn bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::Bool => 1,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Binary operators. `FloorDiv`/`FloorMod` are the integer index operators (Python's `//`
/// and `%`); `Div` is division of values.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    FloorMod,
    Min,
    Max,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    /// Comparison and logical operators produce booleans.
    pub fn is_predicate(self) -> bool {
        matches!(
            self,
            BinOp::Lt
                | BinOp::Le
                | BinOp::Gt
                | BinOp::Ge
                | BinOp::Eq
                | BinOp::Ne
                | BinOp::And
                | BinOp::Or
        )
    }
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
        )
    }
}

/// Unary operators on values.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum UnOp {
    Neg,
    Not,
    Exp,
    Sqrt,
    Tanh,
    Abs,
    /// An f32 value at TensorFloat-32's precision: its mantissa cut to 10 bits (toward
    /// zero), as tensor cores read f32 operands (`tf32(x)` in the workload language).
    /// The product of two such values is exact in f32, so `sum(tf32(a) * tf32(b))`
    /// states what a TF32 tensor-core GEMM computes up to the order of its additions.
    Tf32,
}

impl UnOp {
    pub fn name(self) -> &'static str {
        match self {
            UnOp::Neg => "neg",
            UnOp::Not => "not",
            UnOp::Exp => "exp",
            UnOp::Sqrt => "sqrt",
            UnOp::Tanh => "tanh",
            UnOp::Abs => "abs",
            UnOp::Tf32 => "tf32",
        }
    }
}

/// How a product's factor reads its element ([`Expr::factor_load`]).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum FactorRead {
    /// As stored.
    Plain,
    /// Converted to this type.
    Cast(DType),
    /// At TF32's precision.
    Tf32,
}

/// An expression tree. Expressions are values: cloned and rebuilt freely.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum Expr {
    /// An integer constant (index arithmetic).
    Int(i64),
    /// A floating-point constant (takes the value type of its context).
    Float(f64),
    /// A loop variable or block iteration variable.
    Var(VarId),
    /// `buffer[indices]`.
    Load(BufferId, Vec<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Un(UnOp, Box<Expr>),
    /// `if_then_else(cond, then, else)`: only the chosen side is evaluated.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(DType, Box<Expr>),
}

#[allow(clippy::should_implement_trait)]
impl Expr {
    pub fn var(v: VarId) -> Expr {
        Expr::Var(v)
    }
    pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::Bin(op, Box::new(a), Box::new(b))
    }
    pub fn select(c: Expr, t: Expr, e: Expr) -> Expr {
        Expr::Select(Box::new(c), Box::new(t), Box::new(e))
    }
    pub fn add(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Add, a, b)
    }
    pub fn mul(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Mul, a, b)
    }
    pub fn sub(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Sub, a, b)
    }
    /// The row-major position of `digits` (each an index and the extent it ranges over,
    /// outermost first): `((i0 * e1 + i1) * e2 + i2) ...`; 0 for none.
    pub fn row_major(digits: impl IntoIterator<Item = (Expr, i64)>) -> Expr {
        digits
            .into_iter()
            .reduce(|(acc, _), (e, extent)| {
                (Expr::add(Expr::mul(acc, Expr::Int(extent)), e), extent)
            })
            .map_or(Expr::Int(0), |(e, _)| e)
    }
    pub fn and(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::And, a, b)
    }
    pub fn lt(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Lt, a, b)
    }
    pub fn ge(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Ge, a, b)
    }

    /// The integer value, when the expression is a constant.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Expr::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// Calls `f` on every sub-expression, this one first.
    pub fn visit(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Int(_) | Expr::Float(_) | Expr::Var(_) => {}
            Expr::Load(_, idx) => idx.iter().for_each(|e| e.visit(f)),
            Expr::Bin(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Expr::Un(_, a) | Expr::Cast(_, a) => a.visit(f),
            Expr::Select(c, t, e) => {
                c.visit(f);
                t.visit(f);
                e.visit(f);
            }
        }
    }

    /// Rebuilds the expression bottom-up, letting `f` replace any node (after its
    /// children have been rewritten).
    pub fn rewrite(&self, f: &mut impl FnMut(Expr) -> Expr) -> Expr {
        let e = match self {
            Expr::Int(_) | Expr::Float(_) | Expr::Var(_) => self.clone(),
            Expr::Load(b, idx) => Expr::Load(*b, idx.iter().map(|e| e.rewrite(f)).collect()),
            Expr::Bin(op, a, b) => Expr::bin(*op, a.rewrite(f), b.rewrite(f)),
            Expr::Un(op, a) => Expr::Un(*op, Box::new(a.rewrite(f))),
            Expr::Cast(t, a) => Expr::Cast(*t, Box::new(a.rewrite(f))),
            Expr::Select(c, t, e) => Expr::select(c.rewrite(f), t.rewrite(f), e.rewrite(f)),
        };
        f(e)
    }

    /// Replaces variables by expressions.
    pub fn substitute(&self, map: &impl Fn(VarId) -> Option<Expr>) -> Expr {
        self.rewrite(&mut |e| match e {
            Expr::Var(v) => map(v).unwrap_or(Expr::Var(v)),
            other => other,
        })
    }

    /// A factor of a product that reads one element: `b[..]`, `cast(t, b[..])` (a 16-bit
    /// operand accumulated in f32) or `tf32(b[..])` (an f32 operand at TF32's
    /// precision). How it reads, the buffer and the indices; `None` for anything else.
    pub fn factor_load(&self) -> Option<(FactorRead, BufferId, &[Expr])> {
        let (read, load) = match self {
            Expr::Cast(t, inner) => (FactorRead::Cast(*t), &**inner),
            Expr::Un(UnOp::Tf32, inner) => (FactorRead::Tf32, &**inner),
            e => (FactorRead::Plain, e),
        };
        match load {
            Expr::Load(b, idx) => Some((read, *b, idx)),
            _ => None,
        }
    }

    /// Whether the variable occurs in the expression.
    pub fn uses_var(&self, v: VarId) -> bool {
        let mut found = false;
        self.visit(&mut |e| {
            if let Expr::Var(x) = e {
                if *x == v {
                    found = true;
                }
            }
        });
        found
    }

    /// The value of an integer expression with every variable's value given by `env`
    /// (wrapping arithmetic; loads and floats read as 0, division by 0 gives 0).
    pub fn eval_int(&self, env: &dyn Fn(VarId) -> i64) -> i64 {
        use super::interval::{floordiv, floormod};
        match self {
            Expr::Int(v) => *v,
            Expr::Var(v) => env(*v),
            Expr::Bin(op, a, b) => {
                let (x, y) = (a.eval_int(env), b.eval_int(env));
                match op {
                    BinOp::Add => x.wrapping_add(y),
                    BinOp::Sub => x.wrapping_sub(y),
                    BinOp::Mul => x.wrapping_mul(y),
                    BinOp::Div | BinOp::FloorDiv if y != 0 => floordiv(x, y),
                    BinOp::FloorMod if y != 0 => floormod(x, y),
                    BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod => 0,
                    BinOp::Min => x.min(y),
                    BinOp::Max => x.max(y),
                    BinOp::Lt => i64::from(x < y),
                    BinOp::Le => i64::from(x <= y),
                    BinOp::Gt => i64::from(x > y),
                    BinOp::Ge => i64::from(x >= y),
                    BinOp::Eq => i64::from(x == y),
                    BinOp::Ne => i64::from(x != y),
                    BinOp::And => i64::from(x != 0 && y != 0),
                    BinOp::Or => i64::from(x != 0 || y != 0),
                }
            }
            Expr::Un(UnOp::Neg, a) => a.eval_int(env).wrapping_neg(),
            Expr::Un(UnOp::Not, a) => i64::from(a.eval_int(env) == 0),
            Expr::Select(c, t, f) => {
                if c.eval_int(env) != 0 {
                    t.eval_int(env)
                } else {
                    f.eval_int(env)
                }
            }
            _ => 0,
        }
    }

    /// All variables occurring in the expression, in first-occurrence order.
    pub fn vars(&self) -> Vec<VarId> {
        let mut out = Vec::new();
        self.visit(&mut |e| {
            if let Expr::Var(x) = e {
                if !out.contains(x) {
                    out.push(*x);
                }
            }
        });
        out
    }

    /// The conjuncts of a condition (`a && b && c` -> `[a, b, c]`; itself when it is no
    /// conjunction).
    pub fn conjuncts(&self) -> Vec<Expr> {
        match self {
            Expr::Bin(BinOp::And, a, b) => {
                let mut out = a.conjuncts();
                out.extend(b.conjuncts());
                out
            }
            other => vec![other.clone()],
        }
    }

    /// All loads in the expression, in evaluation order.
    pub fn loads(&self) -> Vec<(BufferId, Vec<Expr>)> {
        let mut out = Vec::new();
        self.visit(&mut |e| {
            if let Expr::Load(b, idx) = e {
                out.push((*b, idx.clone()));
            }
        });
        out
    }
}
