//! Kernel expressions for the GPU-semantics interpreter: the [`Scope`] under which the
//! shared compiler (`interp::expr`) compiles them, and their evaluation for one thread.
//!
//! Under [`KernelScope`] every variable is a slot of a per-thread `Vec<i64>` (its `VarId`
//! index) and every buffer access names a kernel buffer slot ([`KBuf`]) with exactly one
//! (flat) index. A node of the wrong shape at run time is a [`Fault::Type`], never a
//! panic.

use super::super::exec::{floor_div, floor_mod};
use super::super::expr::{Access, BExpr, BufView, FExpr, IBin, IExpr, Scope, MAX_DEPTH};
use super::track::{RaceKind, SharedTrack};
use super::GpuInterpError;
use crate::ir::{BufferId, DType, Program, VarId};
use half::f16;

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

/// The expressions of one kernel: its variables, its buffers (one flat index each).
pub(super) struct KernelScope<'a> {
    pub prog: &'a Program,
    pub kernel: &'a str,
    /// Kernel buffer index of each program buffer, by `BufferId` index.
    pub buf_index: &'a [Option<u32>],
    pub bufs: &'a [KBuf],
    /// The kernel's `threadIdx.x` variable: a warp's lane, which makes its tensor-core
    /// stores alone.
    pub lane: Option<VarId>,
    /// The block's x extent, which a warp reduction's lane groups divide.
    pub block_x: i64,
}

impl Scope for KernelScope<'_> {
    type Error = GpuInterpError;

    fn var(&self, v: VarId) -> Result<u32, GpuInterpError> {
        if v.index() >= self.prog.vars.len() {
            return Err(GpuInterpError::DanglingId {
                kernel: self.kernel.to_string(),
                id: v.to_string(),
            });
        }
        Ok(v.index() as u32)
    }

    fn buffer(&self, b: BufferId, indices: usize) -> Result<BufView, GpuInterpError> {
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
        if indices != 1 {
            return Err(GpuInterpError::NotFlat {
                kernel: self.kernel.to_string(),
                buffer: name,
                got: indices,
            });
        }
        let buf = &self.bufs[k as usize];
        Ok(BufView {
            slot: k,
            dtype: buf.dtype,
            extents: vec![buf.size],
        })
    }

    fn type_error(&self, reason: String) -> GpuInterpError {
        GpuInterpError::Type {
            kernel: self.kernel.to_string(),
            reason,
        }
    }

    fn too_deep(&self) -> GpuInterpError {
        GpuInterpError::TooDeep {
            kernel: self.kernel.to_string(),
            limit: MAX_DEPTH,
        }
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

    /// The flat index of an access (its one index; more are summed by their strides).
    pub fn flat(&mut self, a: &Access) -> Eval<i64> {
        let mut off: i64 = 0;
        for ix in a.idx.iter() {
            let i = self.ev_i(&ix.expr)?;
            off = i
                .checked_mul(ix.stride)
                .and_then(|x| x.checked_add(off))
                .ok_or(Fault::Overflow)?;
        }
        Ok(off)
    }

    fn load(&mut self, a: &Access) -> Eval<f32> {
        let (buf, index) = (a.buf, self.flat(a)?);
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
    fn load_exact(&mut self, a: &Access) -> Eval<f32> {
        let v = self.load(a)?;
        if v.is_nan() {
            return Err(Fault::Unwritten(a.buf, self.flat(a)?));
        }
        Ok(v)
    }

    pub fn ev_i(&mut self, e: &IExpr) -> Eval<i64> {
        match e {
            IExpr::Const(c) => Ok(*c),
            IExpr::Slot(s) => self.env.get(*s as usize).copied().ok_or(Fault::Type),
            IExpr::Bin(op, a, b) => {
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
            IExpr::Neg(a) => self.ev_i(a)?.checked_neg().ok_or(Fault::Overflow),
            IExpr::Abs(a) => self.ev_i(a)?.checked_abs().ok_or(Fault::Overflow),
            IExpr::Select(c, t, f) => {
                if self.ev_b(c)? {
                    self.ev_i(t)
                } else {
                    self.ev_i(f)
                }
            }
            IExpr::Load(a) => Ok(self.load_exact(a)? as i64),
            IExpr::FromFloat(f) => Ok(self.ev_f(f)? as i32 as i64),
            IExpr::FromBool(b) => Ok(self.ev_b(b)? as i64),
            IExpr::Wrap32(a) => Ok(self.ev_i(a)? as i32 as i64),
        }
    }

    pub fn ev_f(&mut self, e: &FExpr) -> Eval<f32> {
        match e {
            FExpr::Const(c) => Ok(*c),
            FExpr::Load(a) => self.load(a),
            FExpr::Bin(op, a, b) => {
                let x = self.ev_f(a)?;
                let y = self.ev_f(b)?;
                Ok(op.apply(x, y))
            }
            FExpr::Un(op, a) => Ok(op.apply(self.ev_f(a)?)),
            FExpr::Select(c, t, f) => {
                if self.ev_b(c)? {
                    self.ev_f(t)
                } else {
                    self.ev_f(f)
                }
            }
            FExpr::FromInt(i) => Ok(self.ev_i(i)? as f32),
            FExpr::FromBool(b) => Ok(if self.ev_b(b)? { 1.0 } else { 0.0 }),
            FExpr::ToF16(a) => Ok(f16::from_f32(self.ev_f(a)?).to_f32()),
            FExpr::ToBF16(a) => Ok(half::bf16::from_f32(self.ev_f(a)?).to_f32()),
        }
    }

    pub fn ev_b(&mut self, e: &BExpr) -> Eval<bool> {
        match e {
            BExpr::CmpI(c, a, b) => {
                let x = self.ev_i(a)?;
                Ok(c.apply(x, self.ev_i(b)?))
            }
            BExpr::CmpF(c, a, b) => {
                let x = self.ev_f(a)?;
                Ok(c.apply(x, self.ev_f(b)?))
            }
            BExpr::And(a, b) => Ok(self.ev_b(a)? && self.ev_b(b)?),
            BExpr::Or(a, b) => Ok(self.ev_b(a)? || self.ev_b(b)?),
            BExpr::Not(a) => Ok(!self.ev_b(a)?),
            BExpr::Select(c, t, f) => {
                if self.ev_b(c)? {
                    self.ev_b(t)
                } else {
                    self.ev_b(f)
                }
            }
            BExpr::Load(a) => Ok(self.load_exact(a)? != 0.0),
            BExpr::IntNonZero(a) => Ok(self.ev_i(a)? != 0),
            BExpr::FloatNonZero(a) => Ok(self.ev_f(a)? != 0.0),
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
