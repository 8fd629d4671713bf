//! Compilation of a [`Program`] into the interpreter's compact form.
//!
//! Invariants of the compiled form (established here, relied on by `exec`):
//! * every variable is a slot of one `Vec<i64>` (its `VarId` index);
//! * every accessed buffer is a dense slot (parameters first, then allocations) whose
//!   extents and row-major strides are copied into each access, so an offset whose
//!   indices are each within their extent is within the buffer;
//! * every expression is typed (integer, float or boolean) with conversions explicit;
//! * bindings and predicates only use enclosing loop variables; stores only use the
//!   block's iteration variables; no variable is bound twice in a scope.

use super::{InterpError, Result};
use crate::ir::{BinOp, BufferId, DType, Expr, IterKind, Node, Program, Store, UnOp, VarId};

/// The deepest expression nesting accepted (evaluation is recursive).
const MAX_DEPTH: usize = 512;

/// The most elements an allocated (intermediate) buffer may have.
const MAX_ALLOC_ELEMENTS: i64 = 1 << 30;

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

/// A store: the value is already converted to the `f32` element to write.
#[derive(Debug)]
pub(super) struct CStore {
    pub access: Access,
    pub value: FExpr,
}

/// One binding: the slot of the iteration variable, its value and its extent.
#[derive(Debug)]
pub(super) struct Binding {
    pub slot: u32,
    pub expr: IExpr,
    pub extent: i64,
}

/// A compiled block.
#[derive(Debug)]
pub(super) struct CBlock {
    pub name: String,
    pub iter_names: Vec<String>,
    pub bindings: Box<[Binding]>,
    pub predicate: Option<BExpr>,
    /// Slots of the reduction iteration variables: the init runs when all are 0.
    pub reduce_slots: Box<[u32]>,
    pub init: Option<CStore>,
    pub body: CStore,
}

/// A compiled statement.
#[derive(Debug)]
pub(super) enum Stmt {
    Loop {
        slot: u32,
        extent: i64,
        body: Box<[Stmt]>,
    },
    Block(Box<CBlock>),
}

/// A buffer slot: parameters first (in `prog.params` order), then allocations.
#[derive(Debug)]
pub(super) struct BufInfo {
    pub name: String,
    pub shape: Vec<i64>,
    pub numel: usize,
}

/// A program compiled for repeated runs. Build it once with [`Interpreter::new`], then
/// call [`Interpreter::run`] as often as needed.
#[derive(Debug)]
pub struct Interpreter {
    pub(super) program: String,
    pub(super) n_slots: usize,
    pub(super) n_params: usize,
    pub(super) bufs: Vec<BufInfo>,
    pub(super) root: Box<[Stmt]>,
}

/// A typed compiled expression.
enum Typed {
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

/// Which variables an expression may use.
#[derive(Copy, Clone)]
enum Site {
    Binding,
    Predicate,
    Store,
}

impl Site {
    fn name(self) -> &'static str {
        match self {
            Site::Binding => "binding",
            Site::Predicate => "predicate",
            Site::Store => "body",
        }
    }
}

struct Compiler<'p> {
    prog: &'p Program,
    /// Dense slot of each buffer, by `BufferId` index.
    buf_slot: Vec<Option<u32>>,
    bufs: Vec<BufInfo>,
    /// Whether each variable is an enclosing loop variable of the current node.
    in_loop_scope: Vec<bool>,
    /// Whether each variable is an iteration variable of the current block.
    in_block_scope: Vec<bool>,
    seen_loops: Vec<bool>,
    seen_blocks: Vec<bool>,
    /// Name of the block being compiled, for errors.
    block: String,
}

impl Interpreter {
    /// Compiles `prog`, checking everything that can be checked before running.
    pub fn new(prog: &Program) -> Result<Interpreter> {
        let mut c = Compiler {
            prog,
            buf_slot: vec![None; prog.buffers.len()],
            bufs: Vec::new(),
            in_loop_scope: vec![false; prog.vars.len()],
            in_block_scope: vec![false; prog.vars.len()],
            seen_loops: vec![false; prog.loops.len()],
            seen_blocks: vec![false; prog.blocks.len()],
            block: String::new(),
        };
        for &b in &prog.params {
            c.declare(b, false)?;
        }
        for &b in &prog.allocs {
            c.declare(b, true)?;
        }
        let root = c.nodes(&prog.root)?;
        Ok(Interpreter {
            program: prog.name.clone(),
            n_slots: prog.vars.len(),
            n_params: prog.params.len(),
            bufs: c.bufs,
            root,
        })
    }
}

impl Compiler<'_> {
    fn dangling(&self, id: String) -> InterpError {
        InterpError::DanglingId {
            program: self.prog.name.clone(),
            id,
        }
    }

    fn var_name(&self, v: VarId) -> String {
        self.prog
            .vars
            .get(v.index())
            .map_or_else(|| v.to_string(), |x| x.name.clone())
    }

    /// Gives buffer `b` the next slot, checking its shape.
    fn declare(&mut self, b: BufferId, alloc: bool) -> Result<()> {
        let buf = self
            .prog
            .buffers
            .get(b.index())
            .ok_or_else(|| self.dangling(b.to_string()))?;
        if self.buf_slot[b.index()].is_some() {
            return Err(InterpError::DuplicateBuffer {
                buffer: buf.name.clone(),
            });
        }
        let bad = |reason: &str| InterpError::BadShape {
            buffer: buf.name.clone(),
            shape: buf.shape.clone(),
            reason: reason.to_string(),
        };
        // The product of the nonzero extents bounds every stride: it must fit too.
        let mut numel: i64 = 1;
        let mut span: i64 = 1;
        for &d in &buf.shape {
            if d < 0 {
                return Err(bad("negative extent"));
            }
            numel *= d;
            span = span
                .checked_mul(d.max(1))
                .ok_or_else(|| bad("too many elements"))?;
        }
        if alloc && numel > MAX_ALLOC_ELEMENTS {
            return Err(bad("too many elements to allocate"));
        }
        let numel = usize::try_from(numel).map_err(|_| bad("too many elements"))?;
        self.buf_slot[b.index()] = Some(self.bufs.len() as u32);
        self.bufs.push(BufInfo {
            name: buf.name.clone(),
            shape: buf.shape.clone(),
            numel,
        });
        Ok(())
    }

    fn nodes(&mut self, nodes: &[Node]) -> Result<Box<[Stmt]>> {
        nodes.iter().map(|n| self.node(*n)).collect()
    }

    fn node(&mut self, node: Node) -> Result<Stmt> {
        match node {
            Node::Loop(l) => {
                let lp = self
                    .prog
                    .loops
                    .get(l.index())
                    .ok_or_else(|| self.dangling(l.to_string()))?;
                if std::mem::replace(&mut self.seen_loops[l.index()], true) {
                    return Err(InterpError::NodeRepeated {
                        node: l.to_string(),
                    });
                }
                let v = lp.var.index();
                if v >= self.in_loop_scope.len() {
                    return Err(self.dangling(lp.var.to_string()));
                }
                let name = self.var_name(lp.var);
                if lp.extent < 0 {
                    return Err(InterpError::NegativeExtent {
                        name,
                        extent: lp.extent,
                    });
                }
                if self.in_loop_scope[v] {
                    return Err(InterpError::DuplicateVar {
                        var: name,
                        site: format!("nested loop {l}"),
                    });
                }
                self.in_loop_scope[v] = true;
                let body = self.nodes(&lp.body);
                self.in_loop_scope[v] = false;
                Ok(Stmt::Loop {
                    slot: v as u32,
                    extent: lp.extent,
                    body: body?,
                })
            }
            Node::Block(b) => {
                if b.index() >= self.prog.blocks.len() {
                    return Err(self.dangling(b.to_string()));
                }
                if std::mem::replace(&mut self.seen_blocks[b.index()], true) {
                    return Err(InterpError::NodeRepeated {
                        node: b.to_string(),
                    });
                }
                let iter_vars: Vec<VarId> = self.prog.blocks[b.index()]
                    .iter_vars
                    .iter()
                    .map(|iv| iv.var)
                    .collect();
                let out = self.block(b.index());
                for v in iter_vars {
                    if let Some(s) = self.in_block_scope.get_mut(v.index()) {
                        *s = false;
                    }
                }
                Ok(Stmt::Block(Box::new(out?)))
            }
        }
    }

    fn block(&mut self, index: usize) -> Result<CBlock> {
        let prog = self.prog;
        let blk = &prog.blocks[index];
        self.block = blk.name.clone();
        if blk.bindings.len() != blk.iter_vars.len() {
            return Err(InterpError::BindingCount {
                block: blk.name.clone(),
                iter_vars: blk.iter_vars.len(),
                bindings: blk.bindings.len(),
            });
        }
        let mut bindings = Vec::with_capacity(blk.bindings.len());
        let mut reduce_slots = Vec::new();
        for (iv, e) in blk.iter_vars.iter().zip(&blk.bindings) {
            let v = iv.var.index();
            if v >= self.in_block_scope.len() {
                return Err(self.dangling(iv.var.to_string()));
            }
            if self.in_loop_scope[v] || self.in_block_scope[v] {
                return Err(InterpError::DuplicateVar {
                    var: self.var_name(iv.var),
                    site: format!("block {}", blk.name),
                });
            }
            let expr = self.int(e, Site::Binding, 0)?;
            self.in_block_scope[v] = true;
            if iv.kind == IterKind::Reduce {
                reduce_slots.push(v as u32);
            }
            bindings.push(Binding {
                slot: v as u32,
                expr,
                extent: iv.extent,
            });
        }
        let predicate = match &blk.predicate {
            Some(p) => Some(self.boolean(p, Site::Predicate, 0)?),
            None => None,
        };
        let init = match &blk.init {
            Some(s) => Some(self.store(s)?),
            None => None,
        };
        let body = self.store(&blk.body)?;
        Ok(CBlock {
            name: blk.name.clone(),
            iter_names: blk
                .iter_vars
                .iter()
                .map(|iv| self.var_name(iv.var))
                .collect(),
            bindings: bindings.into(),
            predicate,
            reduce_slots: reduce_slots.into(),
            init,
            body,
        })
    }

    fn store(&self, s: &Store) -> Result<CStore> {
        let (access, dtype) = self.access(s.buffer, &s.indices, Site::Store, 0)?;
        let value = self.expr(&s.value, Site::Store, 0)?;
        let value = match self.cast(dtype, value)? {
            Typed::F(f) => f,
            Typed::I(i) => FExpr::FromInt(Box::new(i)),
            Typed::B(b) => FExpr::FromBool(Box::new(b)),
        };
        Ok(CStore { access, value })
    }

    fn type_error(&self, reason: String) -> InterpError {
        InterpError::Type {
            block: self.block.clone(),
            reason,
        }
    }

    fn access(
        &self,
        b: BufferId,
        indices: &[Expr],
        site: Site,
        depth: usize,
    ) -> Result<(Access, DType)> {
        let buf = self
            .prog
            .buffers
            .get(b.index())
            .ok_or_else(|| self.dangling(b.to_string()))?;
        let slot = self.buf_slot[b.index()].ok_or_else(|| InterpError::BufferNotAllocated {
            block: self.block.clone(),
            buffer: buf.name.clone(),
        })?;
        if indices.len() != buf.shape.len() {
            return Err(InterpError::Arity {
                block: self.block.clone(),
                buffer: buf.name.clone(),
                rank: buf.shape.len(),
                got: indices.len(),
            });
        }
        // `declare` bounded the product of the extents: the strides cannot overflow.
        let mut strides = vec![1i64; buf.shape.len()];
        for d in (0..buf.shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * buf.shape[d + 1];
        }
        let mut idx = Vec::with_capacity(indices.len());
        for (d, e) in indices.iter().enumerate() {
            idx.push(Index {
                expr: self.int(e, site, depth + 1)?,
                extent: buf.shape[d],
                stride: strides[d],
            });
        }
        Ok((
            Access {
                buf: slot,
                idx: idx.into(),
            },
            buf.dtype,
        ))
    }

    fn int(&self, e: &Expr, site: Site, depth: usize) -> Result<IExpr> {
        match self.expr(e, site, depth)? {
            Typed::I(i) => Ok(i),
            t => Err(self.type_error(format!("expected an integer, got a {}", t.kind()))),
        }
    }

    fn boolean(&self, e: &Expr, site: Site, depth: usize) -> Result<BExpr> {
        match self.expr(e, site, depth)? {
            Typed::B(b) => Ok(b),
            t => Err(self.type_error(format!("expected a boolean, got a {}", t.kind()))),
        }
    }

    /// An operand of float arithmetic: integers convert, booleans do not.
    fn float(&self, t: Typed, what: &str) -> Result<FExpr> {
        match t {
            Typed::F(f) => Ok(f),
            Typed::I(i) => Ok(FExpr::FromInt(Box::new(i))),
            Typed::B(_) => Err(self.type_error(format!("boolean operand of {what}"))),
        }
    }

    /// Explicit conversion, as `Cast(dtype, _)`.
    fn cast(&self, dtype: DType, t: Typed) -> Result<Typed> {
        Ok(match (dtype, t) {
            (DType::F32, Typed::F(f)) => Typed::F(f),
            (DType::F32, Typed::I(i)) => Typed::F(FExpr::FromInt(Box::new(i))),
            (DType::F32, Typed::B(b)) => Typed::F(FExpr::FromBool(Box::new(b))),
            (DType::F16, t) => {
                let f = self.cast(DType::F32, t)?;
                match f {
                    Typed::F(f) => Typed::F(FExpr::ToF16(Box::new(f))),
                    other => other,
                }
            }
            (DType::I32, Typed::I(i)) => Typed::I(IExpr::Wrap32(Box::new(i))),
            (DType::I32, Typed::F(f)) => Typed::I(IExpr::FromFloat(Box::new(f))),
            (DType::I32, Typed::B(b)) => Typed::I(IExpr::FromBool(Box::new(b))),
            (DType::Bool, Typed::B(b)) => Typed::B(b),
            (DType::Bool, Typed::I(i)) => Typed::B(BExpr::IntNonZero(Box::new(i))),
            (DType::Bool, Typed::F(f)) => Typed::B(BExpr::FloatNonZero(Box::new(f))),
        })
    }

    fn expr(&self, e: &Expr, site: Site, depth: usize) -> Result<Typed> {
        if depth > MAX_DEPTH {
            return Err(InterpError::TooDeep {
                block: self.block.clone(),
                limit: MAX_DEPTH,
            });
        }
        let d = depth + 1;
        match e {
            Expr::Int(v) => Ok(Typed::I(IExpr::Const(*v))),
            Expr::Float(v) => Ok(Typed::F(FExpr::Const(*v as f32))),
            Expr::Var(v) => {
                let i = v.index();
                if i >= self.in_loop_scope.len() {
                    return Err(self.dangling(v.to_string()));
                }
                let ok = match site {
                    Site::Binding | Site::Predicate => self.in_loop_scope[i],
                    Site::Store => self.in_block_scope[i],
                };
                if !ok {
                    return Err(InterpError::UnboundVar {
                        block: self.block.clone(),
                        var: self.var_name(*v),
                        site: site.name(),
                    });
                }
                Ok(Typed::I(IExpr::Slot(i as u32)))
            }
            Expr::Load(b, idx) => {
                let (acc, dtype) = self.access(*b, idx, site, d)?;
                let acc = Box::new(acc);
                Ok(match dtype {
                    DType::F32 | DType::F16 => Typed::F(FExpr::Load(acc)),
                    DType::I32 => Typed::I(IExpr::Load(acc)),
                    DType::Bool => Typed::B(BExpr::Load(acc)),
                })
            }
            Expr::Bin(op, a, b) => {
                let x = self.expr(a, site, d)?;
                let y = self.expr(b, site, d)?;
                self.binary(*op, x, y)
            }
            Expr::Un(op, a) => {
                let x = self.expr(a, site, d)?;
                self.unary(*op, x)
            }
            Expr::Select(c, t, f) => {
                let c = Box::new(self.boolean(c, site, d)?);
                let t = self.expr(t, site, d)?;
                let f = self.expr(f, site, d)?;
                Ok(match (t, f) {
                    (Typed::I(t), Typed::I(f)) => {
                        Typed::I(IExpr::Select(c, Box::new(t), Box::new(f)))
                    }
                    (Typed::B(t), Typed::B(f)) => {
                        Typed::B(BExpr::Select(c, Box::new(t), Box::new(f)))
                    }
                    (t, f) => {
                        let t = self.float(t, "select")?;
                        let f = self.float(f, "select")?;
                        Typed::F(FExpr::Select(c, Box::new(t), Box::new(f)))
                    }
                })
            }
            Expr::Cast(dtype, a) => {
                let x = self.expr(a, site, d)?;
                self.cast(*dtype, x)
            }
        }
    }

    fn binary(&self, op: BinOp, x: Typed, y: Typed) -> Result<Typed> {
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
                    let a = self.float(x, "a comparison")?;
                    let b = self.float(y, "a comparison")?;
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
                (x, y) => {
                    Err(self.type_error(format!("{op:?} of a {} and a {}", x.kind(), y.kind())))
                }
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
                (x, y) => Err(self.type_error(format!(
                    "{op:?} of a {} and a {} (integers only)",
                    x.kind(),
                    y.kind()
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
                match (iop, x, y) {
                    (Some(o), I(a), I(b)) => Ok(int_op(o, a, b)),
                    (None, I(_), I(_)) => Err(self.type_error(
                        "Div of two integers (use FloorDiv for index arithmetic)".to_string(),
                    )),
                    (_, x, y) => {
                        let what = format!("{op:?}");
                        let a = self.float(x, &what)?;
                        let b = self.float(y, &what)?;
                        Ok(F(FExpr::Bin(fop, Box::new(a), Box::new(b))))
                    }
                }
            }
        }
    }

    fn unary(&self, op: UnOp, x: Typed) -> Result<Typed> {
        use Typed::{B, F, I};
        let fop = match (op, x) {
            (UnOp::Not, B(b)) => return Ok(B(BExpr::Not(Box::new(b)))),
            (UnOp::Not, x) => return Err(self.type_error(format!("Not of a {}", x.kind()))),
            (UnOp::Neg, I(i)) => return Ok(I(IExpr::Neg(Box::new(i)))),
            (UnOp::Abs, I(i)) => return Ok(I(IExpr::Abs(Box::new(i)))),
            (UnOp::Neg, x) => (FUn::Neg, x),
            (UnOp::Abs, x) => (FUn::Abs, x),
            (UnOp::Exp, x) => (FUn::Exp, x),
            (UnOp::Sqrt, x) => (FUn::Sqrt, x),
            (UnOp::Tanh, x) => (FUn::Tanh, x),
        };
        let f = self.float(fop.1, op.name())?;
        Ok(F(FExpr::Un(fop.0, Box::new(f))))
    }
}
