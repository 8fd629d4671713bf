//! Kernel expressions compiled for the GPU-semantics interpreter, and their evaluation
//! for one thread.
//!
//! Invariants of the compiled form (established by [`Compiler`], relied on by
//! [`Thread`]):
//! * every variable is a slot of a per-thread `Vec<i64>` (its `VarId` index);
//! * every buffer access names a kernel buffer slot ([`KBuf`]) and holds exactly one
//!   (flat) index expression;
//! * every expression is statically typed (integer, float, boolean) with conversions
//!   explicit; a node of the wrong type at run time is a [`Fault::Type`], never a panic.

use super::super::compile::{Cmp, FBin, FUn, IBin};
use super::super::exec::{floor_div, floor_mod};
use super::track::{RaceKind, SharedTrack};
use super::GpuInterpError;
use crate::ir::{BinOp, BufferId, DType, Expr, Program, UnOp};
use half::f16;

/// The deepest expression nesting accepted (evaluation is recursive).
const MAX_DEPTH: usize = 512;

/// Where a kernel buffer lives.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Mem {
    /// A kernel parameter (program parameter or workspace), by global position.
    Global,
    /// Per thread block, by shared-alloc position.
    Shared,
    /// Per thread, by local-alloc position.
    Local,
}

/// A buffer a kernel accesses.
#[derive(Clone, Debug)]
pub(super) struct KBuf {
    pub name: String,
    pub mem: Mem,
    /// Position among the buffers of its memory.
    pub slot: usize,
    /// Elements: the buffer's extent (global) or the alloc's compacted size.
    pub size: i64,
    pub dtype: DType,
}

/// A typed compiled expression.
#[derive(Debug)]
pub(super) enum CE {
    Int(i64),
    Float(f32),
    Var(u32),
    /// A load: kernel buffer index and flat index; its type follows the buffer's dtype.
    Load(u32, Box<CE>),
    IBin(IBin, Box<CE>, Box<CE>),
    FBin(FBin, Box<CE>, Box<CE>),
    INeg(Box<CE>),
    IAbs(Box<CE>),
    FUn(FUn, Box<CE>),
    CmpI(Cmp, Box<CE>, Box<CE>),
    CmpF(Cmp, Box<CE>, Box<CE>),
    And(Box<CE>, Box<CE>),
    Or(Box<CE>, Box<CE>),
    Not(Box<CE>),
    Select(Box<CE>, Box<CE>, Box<CE>),
    IntToF(Box<CE>),
    BoolToF(Box<CE>),
    BoolToI(Box<CE>),
    /// `Cast(int32, float)`: truncation toward zero, saturating at the `i32` range.
    FToI32(Box<CE>),
    /// `Cast(int32, int)`: wraps to the `i32` range.
    Wrap32(Box<CE>),
    IntNonZero(Box<CE>),
    FloatNonZero(Box<CE>),
    ToF16(Box<CE>),
}

/// The static type of a compiled expression.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Ty {
    I,
    F,
    B,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::I => "int",
            Ty::F => "float",
            Ty::B => "bool",
        }
    }
    fn of(d: DType) -> Ty {
        match d {
            DType::F32 | DType::F16 => Ty::F,
            DType::I32 => Ty::I,
            DType::Bool => Ty::B,
        }
    }
}

/// Compiles the expressions of one kernel.
pub(super) struct Compiler<'a> {
    pub prog: &'a Program,
    pub kernel: &'a str,
    /// Kernel buffer index of each program buffer, by `BufferId` index.
    pub buf_index: &'a [Option<u32>],
    pub bufs: &'a [KBuf],
}

impl Compiler<'_> {
    fn type_error(&self, reason: String) -> GpuInterpError {
        GpuInterpError::Type {
            kernel: self.kernel.to_string(),
            reason,
        }
    }

    /// The kernel buffer behind `b` and its single flat index.
    pub fn access(
        &self,
        b: BufferId,
        indices: &[Expr],
        depth: usize,
    ) -> Result<(u32, CE), GpuInterpError> {
        let name = self
            .prog
            .buffers
            .get(b.index())
            .map_or_else(|| b.to_string(), |x| x.name.clone());
        let k = self
            .buf_index
            .get(b.index())
            .copied()
            .flatten()
            .ok_or_else(|| GpuInterpError::UnknownBuffer {
                kernel: self.kernel.to_string(),
                buffer: name.clone(),
            })?;
        let [index] = indices else {
            return Err(GpuInterpError::NotFlat {
                kernel: self.kernel.to_string(),
                buffer: name,
                got: indices.len(),
            });
        };
        Ok((k, self.int(index, depth + 1)?))
    }

    /// An expression that must be an integer.
    pub fn int(&self, e: &Expr, depth: usize) -> Result<CE, GpuInterpError> {
        match self.expr(e, depth)? {
            (c, Ty::I) => Ok(c),
            (_, t) => Err(self.type_error(format!("expected an integer, got a {}", t.name()))),
        }
    }

    /// An expression that must be a boolean.
    pub fn boolean(&self, e: &Expr, depth: usize) -> Result<CE, GpuInterpError> {
        match self.expr(e, depth)? {
            (c, Ty::B) => Ok(c),
            (_, t) => Err(self.type_error(format!("expected a boolean, got a {}", t.name()))),
        }
    }

    /// An operand of float arithmetic: integers convert, booleans do not.
    fn float(&self, c: CE, t: Ty, what: &str) -> Result<CE, GpuInterpError> {
        match t {
            Ty::F => Ok(c),
            Ty::I => Ok(CE::IntToF(Box::new(c))),
            Ty::B => Err(self.type_error(format!("boolean operand of {what}"))),
        }
    }

    /// Explicit conversion, as `Cast(dtype, _)` (and as a store into a `dtype` buffer).
    pub fn cast(&self, dtype: DType, c: CE, t: Ty) -> (CE, Ty) {
        let b = Box::new(c);
        match (dtype, t) {
            (DType::F32, Ty::F) => (*b, Ty::F),
            (DType::F32, Ty::I) => (CE::IntToF(b), Ty::F),
            (DType::F32, Ty::B) => (CE::BoolToF(b), Ty::F),
            (DType::F16, t) => {
                let (f, _) = self.cast(DType::F32, *b, t);
                (CE::ToF16(Box::new(f)), Ty::F)
            }
            (DType::I32, Ty::I) => (CE::Wrap32(b), Ty::I),
            (DType::I32, Ty::F) => (CE::FToI32(b), Ty::I),
            (DType::I32, Ty::B) => (CE::BoolToI(b), Ty::I),
            (DType::Bool, Ty::B) => (*b, Ty::B),
            (DType::Bool, Ty::I) => (CE::IntNonZero(b), Ty::B),
            (DType::Bool, Ty::F) => (CE::FloatNonZero(b), Ty::B),
        }
    }

    /// The value stored into a `dtype` buffer, as the `f32` element to write.
    pub fn store_value(&self, dtype: DType, e: &Expr) -> Result<CE, GpuInterpError> {
        let (c, t) = self.expr(e, 0)?;
        let (c, t) = self.cast(dtype, c, t);
        Ok(match t {
            Ty::F => c,
            Ty::I => CE::IntToF(Box::new(c)),
            Ty::B => CE::BoolToF(Box::new(c)),
        })
    }

    fn expr(&self, e: &Expr, depth: usize) -> Result<(CE, Ty), GpuInterpError> {
        if depth > MAX_DEPTH {
            return Err(GpuInterpError::TooDeep {
                kernel: self.kernel.to_string(),
                limit: MAX_DEPTH,
            });
        }
        let d = depth + 1;
        Ok(match e {
            Expr::Int(v) => (CE::Int(*v), Ty::I),
            Expr::Float(v) => (CE::Float(*v as f32), Ty::F),
            Expr::Var(v) => {
                if v.index() >= self.prog.vars.len() {
                    return Err(GpuInterpError::DanglingId {
                        kernel: self.kernel.to_string(),
                        id: v.to_string(),
                    });
                }
                (CE::Var(v.index() as u32), Ty::I)
            }
            Expr::Load(b, idx) => {
                let (k, i) = self.access(*b, idx, d)?;
                (
                    CE::Load(k, Box::new(i)),
                    Ty::of(self.bufs[k as usize].dtype),
                )
            }
            Expr::Bin(op, a, b) => {
                let x = self.expr(a, d)?;
                let y = self.expr(b, d)?;
                self.binary(*op, x, y)?
            }
            Expr::Un(op, a) => {
                let x = self.expr(a, d)?;
                self.unary(*op, x)?
            }
            Expr::Select(c, t, f) => {
                let c = Box::new(self.boolean(c, d)?);
                let (t, tt) = self.expr(t, d)?;
                let (f, ft) = self.expr(f, d)?;
                if tt == ft && tt != Ty::F {
                    (CE::Select(c, Box::new(t), Box::new(f)), tt)
                } else {
                    let t = self.float(t, tt, "select")?;
                    let f = self.float(f, ft, "select")?;
                    (CE::Select(c, Box::new(t), Box::new(f)), Ty::F)
                }
            }
            Expr::Cast(dtype, a) => {
                let (x, t) = self.expr(a, d)?;
                self.cast(*dtype, x, t)
            }
        })
    }

    fn binary(&self, op: BinOp, x: (CE, Ty), y: (CE, Ty)) -> Result<(CE, Ty), GpuInterpError> {
        let ((a, ta), (b, tb)) = (x, y);
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
            return Ok(match (ta, tb) {
                (Ty::I, Ty::I) => (CE::CmpI(c, Box::new(a), Box::new(b)), Ty::B),
                (Ty::B, Ty::B) if matches!(c, Cmp::Eq | Cmp::Ne) => (
                    CE::CmpI(
                        c,
                        Box::new(CE::BoolToI(Box::new(a))),
                        Box::new(CE::BoolToI(Box::new(b))),
                    ),
                    Ty::B,
                ),
                _ => {
                    let a = self.float(a, ta, "a comparison")?;
                    let b = self.float(b, tb, "a comparison")?;
                    (CE::CmpF(c, Box::new(a), Box::new(b)), Ty::B)
                }
            });
        }
        let (a, b) = (Box::new(a), Box::new(b));
        match op {
            BinOp::And | BinOp::Or => match (ta, tb) {
                (Ty::B, Ty::B) if op == BinOp::And => Ok((CE::And(a, b), Ty::B)),
                (Ty::B, Ty::B) => Ok((CE::Or(a, b), Ty::B)),
                _ => Err(self.type_error(format!("{op:?} of a {} and a {}", ta.name(), tb.name()))),
            },
            BinOp::FloorDiv | BinOp::FloorMod => match (ta, tb) {
                (Ty::I, Ty::I) => {
                    let o = if op == BinOp::FloorDiv {
                        IBin::FloorDiv
                    } else {
                        IBin::FloorMod
                    };
                    Ok((CE::IBin(o, a, b), Ty::I))
                }
                _ => Err(self.type_error(format!(
                    "{op:?} of a {} and a {} (integers only)",
                    ta.name(),
                    tb.name()
                ))),
            },
            _ => {
                let (iop, fop) = match op {
                    BinOp::Add => (Some(IBin::Add), FBin::Add),
                    BinOp::Sub => (Some(IBin::Sub), FBin::Sub),
                    BinOp::Mul => (Some(IBin::Mul), FBin::Mul),
                    BinOp::Min => (Some(IBin::Min), FBin::Min),
                    BinOp::Max => (Some(IBin::Max), FBin::Max),
                    _ => (None, FBin::Div),
                };
                match (iop, ta, tb) {
                    (Some(o), Ty::I, Ty::I) => Ok((CE::IBin(o, a, b), Ty::I)),
                    (None, Ty::I, Ty::I) => Err(self.type_error(
                        "Div of two integers (use FloorDiv for index arithmetic)".to_string(),
                    )),
                    _ => {
                        let what = format!("{op:?}");
                        let a = self.float(*a, ta, &what)?;
                        let b = self.float(*b, tb, &what)?;
                        Ok((CE::FBin(fop, Box::new(a), Box::new(b)), Ty::F))
                    }
                }
            }
        }
    }

    fn unary(&self, op: UnOp, x: (CE, Ty)) -> Result<(CE, Ty), GpuInterpError> {
        let (a, t) = x;
        let fop = match (op, t) {
            (UnOp::Not, Ty::B) => return Ok((CE::Not(Box::new(a)), Ty::B)),
            (UnOp::Not, t) => return Err(self.type_error(format!("Not of a {}", t.name()))),
            (UnOp::Neg, Ty::I) => return Ok((CE::INeg(Box::new(a)), Ty::I)),
            (UnOp::Abs, Ty::I) => return Ok((CE::IAbs(Box::new(a)), Ty::I)),
            (UnOp::Neg, _) => FUn::Neg,
            (UnOp::Abs, _) => FUn::Abs,
            (UnOp::Exp, _) => FUn::Exp,
            (UnOp::Sqrt, _) => FUn::Sqrt,
            (UnOp::Tanh, _) => FUn::Tanh,
        };
        let f = self.float(a, t, op.name())?;
        Ok((CE::FUn(fop, Box::new(f)), Ty::F))
    }
}

/// A dynamic failure of one thread; the kernel runner adds the place.
#[derive(Debug)]
pub(super) enum Fault {
    /// Kernel buffer index and the flat index.
    OutOfBounds(u32, i64),
    /// A NaN (never written) element read as an integer or boolean.
    Unwritten(u32, i64),
    /// A shared-memory race with another thread of the block.
    Race {
        buf: u32,
        index: i64,
        other: u32,
        kind: RaceKind,
    },
    DivisionByZero,
    Overflow,
    /// A node of the wrong type (a broken compiler invariant, reported, not panicked).
    Type,
}

pub(super) type Eval<T> = std::result::Result<T, Fault>;

/// What one thread sees while it evaluates: its variables, the memories, and the race
/// tracker of its block.
pub(super) struct Thread<'a> {
    pub id: u32,
    pub env: &'a [i64],
    pub bufs: &'a [KBuf],
    pub global: &'a [&'a mut [f32]],
    pub shared: &'a [Vec<f32>],
    /// Each local alloc holds the elements of all threads, thread after thread.
    pub local: &'a [Vec<f32>],
    pub track: &'a mut SharedTrack,
}

impl Thread<'_> {
    /// Checks `index` against the buffer and returns its element position in storage.
    pub fn locate(&self, buf: u32, index: i64) -> Eval<(Mem, usize, usize)> {
        let b = self.bufs.get(buf as usize).ok_or(Fault::Type)?;
        if index < 0 || index >= b.size {
            return Err(Fault::OutOfBounds(buf, index));
        }
        let off = match b.mem {
            Mem::Local => self.id as usize * b.size as usize + index as usize,
            Mem::Global | Mem::Shared => index as usize,
        };
        Ok((b.mem, b.slot, off))
    }

    fn load(&mut self, buf: u32, idx: &CE) -> Eval<f32> {
        let index = self.ev_i(idx)?;
        let (mem, slot, off) = self.locate(buf, index)?;
        let v = match mem {
            Mem::Global => self.global.get(slot).and_then(|s| s.get(off)),
            Mem::Shared => {
                if let Some((other, kind)) = self.track.read(slot, off, self.id) {
                    return Err(Fault::Race {
                        buf,
                        index,
                        other,
                        kind,
                    });
                }
                self.shared.get(slot).and_then(|s| s.get(off))
            }
            Mem::Local => self.local.get(slot).and_then(|s| s.get(off)),
        };
        v.copied().ok_or(Fault::OutOfBounds(buf, index))
    }

    /// A load of an integer or boolean element, which must have been written.
    fn load_exact(&mut self, buf: u32, idx: &CE) -> Eval<f32> {
        let v = self.load(buf, idx)?;
        if v.is_nan() {
            return Err(Fault::Unwritten(buf, self.ev_i(idx)?));
        }
        Ok(v)
    }

    pub fn ev_i(&mut self, e: &CE) -> Eval<i64> {
        match e {
            CE::Int(c) => Ok(*c),
            CE::Var(s) => self.env.get(*s as usize).copied().ok_or(Fault::Type),
            CE::IBin(op, a, b) => {
                let x = self.ev_i(a)?;
                let y = self.ev_i(b)?;
                let r = match op {
                    IBin::Add => x.checked_add(y),
                    IBin::Sub => x.checked_sub(y),
                    IBin::Mul => x.checked_mul(y),
                    IBin::Min => Some(x.min(y)),
                    IBin::Max => Some(x.max(y)),
                    IBin::FloorDiv => return floor_div(x, y).map_err(|_| int_fault(y)),
                    IBin::FloorMod => return floor_mod(x, y).map_err(|_| int_fault(y)),
                };
                r.ok_or(Fault::Overflow)
            }
            CE::INeg(a) => self.ev_i(a)?.checked_neg().ok_or(Fault::Overflow),
            CE::IAbs(a) => self.ev_i(a)?.checked_abs().ok_or(Fault::Overflow),
            CE::Select(c, t, f) => {
                if self.ev_b(c)? {
                    self.ev_i(t)
                } else {
                    self.ev_i(f)
                }
            }
            CE::Load(b, idx) => Ok(self.load_exact(*b, idx)? as i64),
            CE::FToI32(f) => Ok(self.ev_f(f)? as i32 as i64),
            CE::BoolToI(b) => Ok(self.ev_b(b)? as i64),
            CE::Wrap32(a) => Ok(self.ev_i(a)? as i32 as i64),
            _ => Err(Fault::Type),
        }
    }

    pub fn ev_f(&mut self, e: &CE) -> Eval<f32> {
        match e {
            CE::Float(c) => Ok(*c),
            CE::Load(b, idx) => self.load(*b, idx),
            CE::FBin(op, a, b) => {
                let x = self.ev_f(a)?;
                let y = self.ev_f(b)?;
                Ok(match op {
                    FBin::Add => x + y,
                    FBin::Sub => x - y,
                    FBin::Mul => x * y,
                    FBin::Div => x / y,
                    FBin::Min if x.is_nan() || y.is_nan() => f32::NAN,
                    FBin::Max if x.is_nan() || y.is_nan() => f32::NAN,
                    FBin::Min => x.min(y),
                    FBin::Max => x.max(y),
                })
            }
            CE::FUn(op, a) => {
                let x = self.ev_f(a)?;
                Ok(match op {
                    FUn::Neg => -x,
                    FUn::Exp => x.exp(),
                    FUn::Sqrt => x.sqrt(),
                    FUn::Tanh => x.tanh(),
                    FUn::Abs => x.abs(),
                })
            }
            CE::Select(c, t, f) => {
                if self.ev_b(c)? {
                    self.ev_f(t)
                } else {
                    self.ev_f(f)
                }
            }
            CE::IntToF(i) => Ok(self.ev_i(i)? as f32),
            CE::BoolToF(b) => Ok(if self.ev_b(b)? { 1.0 } else { 0.0 }),
            CE::ToF16(a) => Ok(f16::from_f32(self.ev_f(a)?).to_f32()),
            _ => Err(Fault::Type),
        }
    }

    pub fn ev_b(&mut self, e: &CE) -> Eval<bool> {
        match e {
            CE::CmpI(c, a, b) => {
                let x = self.ev_i(a)?;
                Ok(compare(*c, x, self.ev_i(b)?))
            }
            CE::CmpF(c, a, b) => {
                let x = self.ev_f(a)?;
                Ok(compare(*c, x, self.ev_f(b)?))
            }
            CE::And(a, b) => Ok(self.ev_b(a)? && self.ev_b(b)?),
            CE::Or(a, b) => Ok(self.ev_b(a)? || self.ev_b(b)?),
            CE::Not(a) => Ok(!self.ev_b(a)?),
            CE::Select(c, t, f) => {
                if self.ev_b(c)? {
                    self.ev_b(t)
                } else {
                    self.ev_b(f)
                }
            }
            CE::Load(b, idx) => Ok(self.load_exact(*b, idx)? != 0.0),
            CE::IntNonZero(a) => Ok(self.ev_i(a)? != 0),
            CE::FloatNonZero(a) => Ok(self.ev_f(a)? != 0.0),
            _ => Err(Fault::Type),
        }
    }
}

fn int_fault(divisor: i64) -> Fault {
    if divisor == 0 {
        Fault::DivisionByZero
    } else {
        Fault::Overflow
    }
}

fn compare<T: PartialOrd>(c: Cmp, x: T, y: T) -> bool {
    match c {
        Cmp::Lt => x < y,
        Cmp::Le => x <= y,
        Cmp::Gt => x > y,
        Cmp::Ge => x >= y,
        Cmp::Eq => x == y,
        Cmp::Ne => x != y,
    }
}
