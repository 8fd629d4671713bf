//! Compilation of a [`Program`] into the serial interpreter's compact form: statements
//! and blocks here, expressions by the shared compiler of `expr` under this
//! interpreter's [`Scope`].
//!
//! Invariants of the compiled form (established here, relied on by `exec`):
//! * every variable is a slot of one `Vec<i64>` (its `VarId` index);
//! * every accessed buffer is a dense slot (parameters first, then allocations) whose
//!   extents and row-major strides are copied into each access (one index per
//!   dimension), so an offset whose indices are each within their extent is within the
//!   buffer;
//! * every expression is typed (integer, float or boolean) with conversions explicit;
//! * bindings and predicates only use enclosing loop variables; stores only use the
//!   block's iteration variables; no variable is bound twice in a scope.

use super::expr::{self, Access, BExpr, BufView, FExpr, IExpr, Scope, MAX_DEPTH};
use super::{InterpError, Result};
use crate::ir::{BufferId, IterKind, Node, Program, Store, VarId};

/// The most elements an allocated (intermediate) buffer may have.
const MAX_ALLOC_ELEMENTS: i64 = 1 << 30;

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
    /// A serial split-K sum's node (`ir::arrival`): `body` runs on the `arrivals`-th
    /// arrival at `key`, counted in the run's counters of arrival `id`.
    LastArrival {
        id: u32,
        key: IExpr,
        arrivals: i64,
        body: Box<[Stmt]>,
    },
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
    /// The number of keys of each serial split-K sum, by arrival id.
    pub(super) arrival_keys: Vec<i64>,
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
    /// The serial split-K sums' arrivals, by their id.
    arrivals: Vec<crate::ir::arrival::Arrival>,
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
            arrivals: Vec::new(),
        };
        for &b in &prog.params {
            c.declare(b, false)?;
        }
        for &b in &prog.allocs {
            c.declare(b, true)?;
        }
        let mut root = c.nodes(&prog.root)?;
        // Serial split-K sums are placed once the tree is known to be one (no node
        // reached twice, no cycle), then the tree is compiled again around them.
        let serial = crate::ir::arrival::SERIAL_SUM_KEY;
        if prog
            .blocks
            .iter()
            .any(|b| b.annotations.contains_key(serial))
        {
            c.arrivals = crate::ir::arrival::arrivals(prog).map_err(InterpError::Arrival)?;
            c.seen_loops.fill(false);
            c.seen_blocks.fill(false);
            root = c.nodes(&prog.root)?;
        }
        Ok(Interpreter {
            program: prog.name.clone(),
            n_slots: prog.vars.len(),
            n_params: prog.params.len(),
            bufs: c.bufs,
            root,
            arrival_keys: c.arrivals.iter().map(|a| a.keys).collect(),
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
        let stmt = self.node_alone(node)?;
        let Some(id) = self.arrivals.iter().position(|a| a.node == node) else {
            return Ok(stmt);
        };
        let arrival = &self.arrivals[id];
        self.block = self.prog.block(arrival.block).name.clone();
        let key = expr::int(&self.at(Site::Binding), &arrival.key, 0)?;
        Ok(Stmt::LastArrival {
            id: id as u32,
            key,
            arrivals: arrival.arrivals,
            body: Box::new([stmt]),
        })
    }

    fn node_alone(&mut self, node: Node) -> Result<Stmt> {
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
            let expr = expr::int(&self.at(Site::Binding), e, 0)?;
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
            Some(p) => Some(expr::boolean(&self.at(Site::Predicate), p, 0)?),
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
        let scope = self.at(Site::Store);
        let (access, dtype) = expr::access(&scope, s.buffer, &s.indices, 0)?;
        let value = expr::store_value(&scope, dtype, &s.value)?;
        Ok(CStore { access, value })
    }

    /// The scope of expressions at `site` of the current block.
    fn at(&self, site: Site) -> SiteScope<'_, '_> {
        SiteScope { c: self, site }
    }
}

/// Expressions at one site of the block being compiled: bindings and predicates read
/// enclosing loop variables, stores the block's iteration variables; every buffer is
/// addressed by all its dimensions.
struct SiteScope<'c, 'p> {
    c: &'c Compiler<'p>,
    site: Site,
}

impl Scope for SiteScope<'_, '_> {
    type Error = InterpError;

    fn var(&self, v: VarId) -> Result<u32> {
        let i = v.index();
        if i >= self.c.in_loop_scope.len() {
            return Err(self.c.dangling(v.to_string()));
        }
        let ok = match self.site {
            Site::Binding | Site::Predicate => self.c.in_loop_scope[i],
            Site::Store => self.c.in_block_scope[i],
        };
        if !ok {
            return Err(InterpError::UnboundVar {
                block: self.c.block.clone(),
                var: self.c.var_name(v),
                site: self.site.name(),
            });
        }
        Ok(i as u32)
    }

    fn buffer(&self, b: BufferId, indices: usize) -> Result<BufView> {
        let buf = self
            .c
            .prog
            .buffers
            .get(b.index())
            .ok_or_else(|| self.c.dangling(b.to_string()))?;
        let slot = self.c.buf_slot[b.index()].ok_or_else(|| InterpError::BufferNotAllocated {
            block: self.c.block.clone(),
            buffer: buf.name.clone(),
        })?;
        if indices != buf.shape.len() {
            return Err(InterpError::Arity {
                block: self.c.block.clone(),
                buffer: buf.name.clone(),
                rank: buf.shape.len(),
                got: indices,
            });
        }
        // `declare` bounded the product of the extents.
        Ok(BufView {
            slot,
            dtype: buf.dtype,
            extents: buf.shape.clone(),
        })
    }

    fn type_error(&self, reason: String) -> InterpError {
        InterpError::Type {
            block: self.c.block.clone(),
            reason,
        }
    }

    fn too_deep(&self) -> InterpError {
        InterpError::TooDeep {
            block: self.c.block.clone(),
            limit: MAX_DEPTH,
        }
    }
}
