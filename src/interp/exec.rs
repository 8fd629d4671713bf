//! Execution of the compiled form: a tree walk over statements and typed expressions.
//!
//! Expression evaluation returns a small `Fault` on failure (16 bytes with the `Ok`
//! value, so results travel in registers); the block that faulted turns it into an
//! [`InterpError`] naming the block, the buffer and the indices.

use super::compile::{CBlock, CStore, Interpreter, Stmt};
use super::expr::{Access, BExpr, FExpr, IBin, IExpr};
use super::{InterpError, Result};
use half::f16;
use ndarray::ArrayD;

/// A dynamic failure inside a block. Payloads are boxed to keep results small.
pub(super) enum Fault {
    /// Buffer slot and the evaluated indices.
    OutOfBounds(Box<(u32, Vec<i64>)>),
    /// A NaN (never written) element read as an integer or boolean.
    Unwritten(Box<(u32, Vec<i64>)>),
    /// Binding position and its value.
    Binding(Box<(usize, i64)>),
    DivisionByZero,
    Overflow,
}

pub(super) type Eval<T> = std::result::Result<T, Fault>;

/// The buffers of one run, by slot.
type Bufs<'a> = [&'a mut [f32]];

impl Interpreter {
    /// Runs the compiled program on `params`, given in the program's parameter order;
    /// outputs are written in place. Intermediate buffers are allocated for this run and
    /// filled with NaN.
    pub fn run(&self, params: &mut [ArrayD<f32>]) -> Result<()> {
        if params.len() != self.n_params {
            return Err(InterpError::ParamCount {
                program: self.program.clone(),
                expected: self.n_params,
                got: params.len(),
            });
        }
        for (position, (arr, info)) in params.iter_mut().zip(&self.bufs).enumerate() {
            let shape_ok = arr.ndim() == info.shape.len()
                && arr
                    .shape()
                    .iter()
                    .zip(&info.shape)
                    .all(|(&a, &b)| a as i64 == b);
            if !shape_ok {
                return Err(InterpError::ParamShape {
                    position,
                    buffer: info.name.clone(),
                    expected: info.shape.clone(),
                    got: arr.shape().to_vec(),
                });
            }
            if arr.as_slice().is_none() {
                *arr = arr.as_standard_layout().into_owned();
            }
        }
        let mut owned: Vec<Vec<f32>> = self.bufs[self.n_params..]
            .iter()
            .map(|b| vec![f32::NAN; b.numel])
            .collect();
        let mut bufs: Vec<&mut [f32]> = Vec::with_capacity(self.bufs.len());
        for arr in params.iter_mut() {
            // Made standard-layout above; an empty array is one too.
            match arr.as_slice_mut() {
                Some(s) => bufs.push(s),
                None => bufs.push(&mut []),
            }
        }
        bufs.extend(owned.iter_mut().map(|v| v.as_mut_slice()));
        let mut env = vec![0i64; self.n_slots];
        let mut counts: Vec<Vec<i64>> = self
            .arrival_keys
            .iter()
            .map(|k| vec![0; (*k).max(0) as usize])
            .collect();
        self.stmts(&self.root, &mut env, &mut bufs, &mut counts)
    }

    /// Runs `stmts`; `counts` holds each serial split-K sum's arrivals by key.
    fn stmts(
        &self,
        stmts: &[Stmt],
        env: &mut [i64],
        bufs: &mut Bufs,
        counts: &mut [Vec<i64>],
    ) -> Result<()> {
        for s in stmts {
            match s {
                Stmt::Loop { slot, extent, body } => {
                    for v in 0..*extent {
                        env[*slot as usize] = v;
                        self.stmts(body, env, bufs, counts)?;
                    }
                }
                Stmt::Block(b) => {
                    if let Err(f) = block(b, env, bufs) {
                        return Err(self.describe(b, f));
                    }
                }
                Stmt::LastArrival {
                    id,
                    key,
                    arrivals,
                    body,
                } => {
                    let key = ev_i(key, env, bufs)
                        .ok()
                        .and_then(|k| usize::try_from(k).ok());
                    let Some(count) = key.and_then(|k| counts[*id as usize].get_mut(k)) else {
                        return Err(InterpError::Arrival(format!(
                            "a serial split-K sum's key is outside its {} tiles",
                            counts[*id as usize].len()
                        )));
                    };
                    *count += 1;
                    if *count == *arrivals {
                        *count = 0;
                        self.stmts(body, env, bufs, counts)?;
                    }
                }
            }
        }
        Ok(())
    }

    #[cold]
    fn describe(&self, b: &CBlock, f: Fault) -> InterpError {
        let block = b.name.clone();
        match f {
            Fault::OutOfBounds(p) => {
                let info = &self.bufs[p.0 as usize];
                InterpError::OutOfBounds {
                    block,
                    buffer: info.name.clone(),
                    indices: p.1,
                    shape: info.shape.clone(),
                }
            }
            Fault::Unwritten(p) => InterpError::UnwrittenRead {
                block,
                buffer: self.bufs[p.0 as usize].name.clone(),
                indices: p.1,
            },
            Fault::Binding(p) => InterpError::BindingOutOfRange {
                block,
                iter_var: b.iter_names[p.0].clone(),
                value: p.1,
                extent: b.bindings[p.0].extent,
            },
            Fault::DivisionByZero => InterpError::DivisionByZero { block },
            Fault::Overflow => InterpError::Overflow { block },
        }
    }
}

/// One block execution: predicate, bindings, init, body.
#[inline]
fn block(b: &CBlock, env: &mut [i64], bufs: &mut Bufs) -> Eval<()> {
    if let Some(p) = &b.predicate {
        if !ev_b(p, env, bufs)? {
            return Ok(());
        }
    }
    for (i, bd) in b.bindings.iter().enumerate() {
        let v = ev_index(&bd.expr, env, bufs)?;
        if v < 0 || v >= bd.extent {
            return Err(Fault::Binding(Box::new((i, v))));
        }
        env[bd.slot as usize] = v;
    }
    if let Some(init) = &b.init {
        if b.reduce_slots.iter().all(|&s| env[s as usize] == 0) {
            store(init, env, bufs)?;
        }
    }
    store(&b.body, env, bufs)
}

#[inline]
fn store(s: &CStore, env: &[i64], bufs: &mut Bufs) -> Eval<()> {
    let v = ev_operand(&s.value, env, bufs)?;
    let off = offset(&s.access, env, bufs)?;
    bufs[s.access.buf as usize][off] = v;
    Ok(())
}

/// The row-major offset of an access, each index checked against its extent. Indices
/// are evaluated in order; the bounds error lists all of them.
#[inline]
fn offset(a: &Access, env: &[i64], bufs: &Bufs) -> Eval<usize> {
    let mut off = 0i64;
    for ix in a.idx.iter() {
        let v = ev_index(&ix.expr, env, bufs)?;
        if v < 0 || v >= ix.extent {
            return Err(out_of_bounds(a, env, bufs));
        }
        off += v * ix.stride;
    }
    Ok(off as usize)
}

#[cold]
fn out_of_bounds(a: &Access, env: &[i64], bufs: &Bufs) -> Fault {
    match indices(a, env, bufs) {
        Ok(idx) => Fault::OutOfBounds(Box::new((a.buf, idx))),
        Err(f) => f,
    }
}

fn indices(a: &Access, env: &[i64], bufs: &Bufs) -> Eval<Vec<i64>> {
    a.idx.iter().map(|ix| ev_i(&ix.expr, env, bufs)).collect()
}

#[inline]
fn load(a: &Access, env: &[i64], bufs: &Bufs) -> Eval<f32> {
    let off = offset(a, env, bufs)?;
    Ok(bufs[a.buf as usize][off])
}

/// A load of an integer or boolean element, which must have been written.
fn load_exact(a: &Access, env: &[i64], bufs: &Bufs) -> Eval<f32> {
    let v = load(a, env, bufs)?;
    if v.is_nan() {
        return Err(match indices(a, env, bufs) {
            Ok(idx) => Fault::Unwritten(Box::new((a.buf, idx))),
            Err(f) => f,
        });
    }
    Ok(v)
}

/// Python's `a // b`.
pub(super) fn floor_div(a: i64, b: i64) -> Eval<i64> {
    if b == 0 {
        return Err(Fault::DivisionByZero);
    }
    let q = a.checked_div(b).ok_or(Fault::Overflow)?;
    Ok(if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

/// Python's `a % b` (the sign of the divisor).
pub(super) fn floor_mod(a: i64, b: i64) -> Eval<i64> {
    if b == 0 {
        return Err(Fault::DivisionByZero);
    }
    if b == -1 {
        return Ok(0);
    }
    let r = a % b;
    Ok(if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    })
}

/// `ev_i` with the common leaves inlined (most indices and bindings are a variable).
#[inline(always)]
fn ev_index(e: &IExpr, env: &[i64], bufs: &Bufs) -> Eval<i64> {
    match e {
        IExpr::Slot(s) => Ok(env[*s as usize]),
        IExpr::Const(c) => Ok(*c),
        _ => ev_i(e, env, bufs),
    }
}

fn ev_i(e: &IExpr, env: &[i64], bufs: &Bufs) -> Eval<i64> {
    match e {
        IExpr::Slot(s) => Ok(env[*s as usize]),
        IExpr::Const(c) => Ok(*c),
        IExpr::Bin(op, a, b) => {
            let x = ev_index(a, env, bufs)?;
            let y = ev_index(b, env, bufs)?;
            match op {
                IBin::Add => x.checked_add(y).ok_or(Fault::Overflow),
                IBin::Sub => x.checked_sub(y).ok_or(Fault::Overflow),
                IBin::Mul => x.checked_mul(y).ok_or(Fault::Overflow),
                IBin::FloorDiv => floor_div(x, y),
                IBin::FloorMod => floor_mod(x, y),
                IBin::Min => Ok(x.min(y)),
                IBin::Max => Ok(x.max(y)),
            }
        }
        IExpr::Neg(a) => ev_i(a, env, bufs)?.checked_neg().ok_or(Fault::Overflow),
        IExpr::Abs(a) => ev_i(a, env, bufs)?.checked_abs().ok_or(Fault::Overflow),
        IExpr::Select(c, t, f) => {
            if ev_b(c, env, bufs)? {
                ev_i(t, env, bufs)
            } else {
                ev_i(f, env, bufs)
            }
        }
        IExpr::Load(a) => Ok(load_exact(a, env, bufs)? as i64),
        IExpr::FromFloat(f) => Ok(ev_f(f, env, bufs)? as i32 as i64),
        IExpr::FromBool(b) => Ok(ev_b(b, env, bufs)? as i64),
        IExpr::Wrap32(a) => Ok(ev_i(a, env, bufs)? as i32 as i64),
    }
}

/// `ev_f` with the common leaves inlined.
#[inline(always)]
fn ev_operand(e: &FExpr, env: &[i64], bufs: &Bufs) -> Eval<f32> {
    match e {
        FExpr::Load(a) => load(a, env, bufs),
        FExpr::Const(c) => Ok(*c),
        _ => ev_f(e, env, bufs),
    }
}

fn ev_f(e: &FExpr, env: &[i64], bufs: &Bufs) -> Eval<f32> {
    match e {
        FExpr::Load(a) => load(a, env, bufs),
        FExpr::Const(c) => Ok(*c),
        FExpr::Bin(op, a, b) => {
            let x = ev_operand(a, env, bufs)?;
            let y = ev_operand(b, env, bufs)?;
            Ok(op.apply(x, y))
        }
        FExpr::Un(op, a) => Ok(op.apply(ev_f(a, env, bufs)?)),
        FExpr::Select(c, t, f) => {
            if ev_b(c, env, bufs)? {
                ev_f(t, env, bufs)
            } else {
                ev_f(f, env, bufs)
            }
        }
        FExpr::FromInt(i) => Ok(ev_i(i, env, bufs)? as f32),
        FExpr::FromBool(b) => Ok(if ev_b(b, env, bufs)? { 1.0 } else { 0.0 }),
        FExpr::ToF16(a) => Ok(f16::from_f32(ev_f(a, env, bufs)?).to_f32()),
        FExpr::ToBF16(a) => Ok(half::bf16::from_f32(ev_f(a, env, bufs)?).to_f32()),
    }
}

fn ev_b(e: &BExpr, env: &[i64], bufs: &Bufs) -> Eval<bool> {
    match e {
        BExpr::CmpI(c, a, b) => Ok(c.apply(ev_i(a, env, bufs)?, ev_i(b, env, bufs)?)),
        BExpr::CmpF(c, a, b) => Ok(c.apply(ev_f(a, env, bufs)?, ev_f(b, env, bufs)?)),
        BExpr::And(a, b) => Ok(ev_b(a, env, bufs)? && ev_b(b, env, bufs)?),
        BExpr::Or(a, b) => Ok(ev_b(a, env, bufs)? || ev_b(b, env, bufs)?),
        BExpr::Not(a) => Ok(!ev_b(a, env, bufs)?),
        BExpr::Select(c, t, f) => {
            if ev_b(c, env, bufs)? {
                ev_b(t, env, bufs)
            } else {
                ev_b(f, env, bufs)
            }
        }
        BExpr::Load(a) => Ok(load_exact(a, env, bufs)? != 0.0),
        BExpr::IntNonZero(a) => Ok(ev_i(a, env, bufs)? != 0),
        BExpr::FloatNonZero(a) => Ok(ev_f(a, env, bufs)? != 0.0),
    }
}
