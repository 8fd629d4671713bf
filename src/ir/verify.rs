//! The IR verifier: the invariants every [`Program`] keeps between schedule primitives.
//!
//! A schedule primitive either applies completely and leaves a program that passes
//! [`verify`], or returns an error and leaves the program as it was; tests run the verifier
//! after every step. [`verify`] returns the first violation, [`verify_all`] every one it
//! finds. Neither panics, whatever the program: an id outside its arena is reported like any
//! other violation. Only nodes reachable from `root` are checked; replaced nodes left in the
//! arenas are ignored.
//!
//! The verifier walks the tree once (an explicit stack, so a malformed deep program cannot
//! overflow the call stack), records each reached node's parent and the pre-order, and then
//! checks loops and blocks in program order using that parent map and per-variable scratch
//! tables, so its cost is linear in the program size times the loop depth.
//!
//! Every error names its place by name (block, loop variable, buffer) and
//! [`VerifyError::invariant`] gives the number of the invariant it breaks:
//!
//! 1. **Tree.** Every node reachable from `root` is reached exactly once (no loop or block
//!    shared by two parents, no cycle), and every loop, block and buffer id, and every
//!    loop or iteration variable declaration, used by a reached node, `params` or `allocs`
//!    is inside its arena. (A variable id out of range inside an expression is reported
//!    as a scope violation, 3 or 4, since no loop or iteration variable declares it.)
//! 2. **Loops.** Every loop's extent is at least 1. Every reachable loop has its own
//!    variable, distinct from other reachable loops' and from every block iteration
//!    variable.
//! 3. **Bindings.** A block has exactly one binding per iteration variable and its iteration
//!    variables are distinct; bindings and the predicate refer only to variables of the
//!    loops enclosing the block.
//! 4. **Block bodies.** The body store (indices and value) and the init store refer only to
//!    the block's own iteration variables.
//! 5. **Binding ranges.** Every iteration variable's extent is at least 1. Over the
//!    enclosing loops' domains, every binding ranges inside `[0, extent)` of its iteration
//!    variable; when the block has a predicate only the lower side (`>= 0`) is required,
//!    since the predicate guards imperfect tiles. A binding whose range cannot be bounded
//!    fails.
//! 6. **Reductions.** An init is present only on blocks with a Reduce iteration variable;
//!    the init writes the same buffer at the same indices as the body; store indices (body
//!    and init) use only Spatial iteration variables.
//! 7. **Buffers.** Every buffer a load or store refers to is a parameter or in `allocs`;
//!    the index count equals the buffer's rank; no block stores to an Input buffer; every
//!    access index whose range over the block's iteration domain is bounded lies inside the
//!    buffer's shape, except loads inside a branch of a `Select` (guarded, e.g. padding).
//! 8. **Thread bindings.** A loop bound to a thread tag nested inside another loop bound to
//!    the same tag has the same extent; no blockIdx loop is nested inside a threadIdx or
//!    vthread loop; the binding of a Reduce iteration variable does not use the variable of
//!    an enclosing thread-bound loop; a block with Reduce iteration variables is not nested
//!    under two loops bound to the same tag.
//! 9. **Loop kinds.** A Vectorized loop's body is exactly one block. The variables of
//!    Vectorized and Parallel loops are not used by the binding of any Reduce iteration
//!    variable of the blocks under them.
//! 10. **Dataflow order.** For every buffer in `allocs` that some block reads, a block
//!     writing it comes before the first reader in program order (a reduction's init counts
//!     as a write before its body's read); every Output parameter is written by some block.
//! 11. **Names.** The names of reachable blocks are unique.

use super::expr::{BinOp, Expr, UnOp};
use super::ids::{BlockId, BufferId, LoopId, VarId};
use super::interval::{bound_with, Interval};
use super::program::{Block, BufferKind, IterKind, LoopKind, Node, Program, Store, ThreadTag};
use std::collections::HashMap;
use std::fmt;
use thiserror::Error;

/// The result of verification: `Ok` or the first violation.
pub type VerifyResult<T> = Result<T, VerifyError>;

/// Which store of a block an error is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StoreRole {
    /// The block's body (the update of a reduction).
    Body,
    /// The block's init (the first write of a reduction).
    Init,
}

impl fmt::Display for StoreRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreRole::Body => "body",
            StoreRole::Init => "init",
        })
    }
}

/// A violated IR invariant. Places are named as in printed IR: blocks and buffers by name,
/// loops by their variable's name, expressions in TVMScript-like text. The module doc lists
/// the invariants; [`VerifyError::invariant`] says which one an error breaks.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum VerifyError {
    /// (1) An id outside its arena. `place` is where it was found, `id` the id as printed.
    #[error("{place}: {id} is out of range (the arena holds {len})")]
    IdOutOfRange {
        place: String,
        id: String,
        len: usize,
    },
    /// (1) A loop or block reached twice from the root: shared by two parents, or a cycle.
    #[error("{node} is reached twice: under {first} and under {second}")]
    NodeReachedTwice {
        node: String,
        first: String,
        second: String,
    },
    /// (2) A loop with an extent below 1.
    #[error("loop \"{lp}\": extent {extent} is less than 1")]
    LoopExtent { lp: String, extent: i64 },
    /// (2) A variable owned by two reachable loops, or by a loop and a block iteration
    /// variable.
    #[error("variable \"{var}\" ({id}) belongs to both {first} and {second}")]
    DuplicateVar {
        var: String,
        id: VarId,
        first: String,
        second: String,
    },
    /// (3) A block whose binding count differs from its iteration variable count.
    #[error("block \"{block}\": {bindings} bindings for {iter_vars} iter vars")]
    BindingCount {
        block: String,
        iter_vars: usize,
        bindings: usize,
    },
    /// (3) A block declaring the same iteration variable twice.
    #[error("block \"{block}\": iter var {iter_var} is declared twice")]
    DuplicateIterVar { block: String, iter_var: String },
    /// (3) A binding using a variable that is not an enclosing loop's.
    #[error("block \"{block}\": binding of {iter_var} = {binding} uses {var}, which is not the variable of an enclosing loop")]
    BindingScope {
        block: String,
        iter_var: String,
        binding: String,
        var: String,
    },
    /// (3) A predicate using a variable that is not an enclosing loop's.
    #[error("block \"{block}\": predicate {predicate} uses {var}, which is not the variable of an enclosing loop")]
    PredicateScope {
        block: String,
        predicate: String,
        var: String,
    },
    /// (4) A body or init store using a variable that is not one of the block's iteration
    /// variables.
    #[error("block \"{block}\": {role} uses {var}, which is not one of the block's iter vars")]
    StoreScope {
        block: String,
        role: StoreRole,
        var: String,
    },
    /// (5) An iteration variable with an extent below 1.
    #[error("block \"{block}\": iter var {iter_var} has extent {extent}, less than 1")]
    IterVarExtent {
        block: String,
        iter_var: String,
        extent: i64,
    },
    /// (5) A binding whose range over the enclosing loops leaves `[0, extent)` (only the
    /// lower side counts when `predicated`).
    #[error(
        "block \"{block}\": binding of {iter_var} = {binding} ranges over [{}, {}], outside [0, {extent}){}",
        show_lo(*.min), show_hi(*.max), if *.predicated { " (below 0; the predicate only guards the upper side)" } else { "" }
    )]
    BindingRange {
        block: String,
        iter_var: String,
        binding: String,
        min: i64,
        max: i64,
        extent: i64,
        predicated: bool,
    },
    /// (6) An init on a block without Reduce iteration variables.
    #[error("block \"{block}\": has an init but no reduce iter var")]
    InitWithoutReduce { block: String },
    /// (6) An init writing another place than the body.
    #[error("block \"{block}\": init writes {init} but the body writes {body}")]
    InitMismatch {
        block: String,
        init: String,
        body: String,
    },
    /// (6) A store index using a Reduce iteration variable.
    #[error("block \"{block}\": {role} store {store} is indexed by reduce iter var {iter_var}")]
    ReduceVarInStoreIndex {
        block: String,
        role: StoreRole,
        store: String,
        iter_var: String,
    },
    /// (7) An access to a buffer that is neither a parameter nor allocated.
    #[error("block \"{block}\": buffer {buffer} is neither a parameter nor allocated")]
    UndeclaredBuffer { block: String, buffer: String },
    /// (7) An access with the wrong number of indices.
    #[error(
        "block \"{block}\": access {access} has {indices} indices but {buffer} has rank {rank}"
    )]
    IndexCount {
        block: String,
        buffer: String,
        access: String,
        indices: usize,
        rank: usize,
    },
    /// (7) A store to an Input buffer.
    #[error("block \"{block}\": {role} stores to input buffer {buffer}")]
    StoreToInput {
        block: String,
        role: StoreRole,
        buffer: String,
    },
    /// (7) An unguarded access index whose bounded range leaves the buffer's shape.
    #[error("block \"{block}\": index {dim} of {access} ranges over [{min}, {max}], outside [0, {size}) of {buffer}")]
    AccessOutOfBounds {
        block: String,
        buffer: String,
        access: String,
        dim: usize,
        min: i64,
        max: i64,
        size: i64,
    },
    /// (8) Nested loops bound to the same tag with different extents.
    #[error("loop \"{inner}\" ({tag}, extent {inner_extent}) is nested in loop \"{outer}\" ({tag}, extent {outer_extent}) with another extent")]
    ThreadExtentMismatch {
        tag: ThreadTag,
        outer: String,
        outer_extent: i64,
        inner: String,
        inner_extent: i64,
    },
    /// (8) A blockIdx loop nested inside a threadIdx or vthread loop.
    #[error("loop \"{inner}\" ({inner_tag}) is nested in loop \"{outer}\" ({outer_tag})")]
    BlockIdxUnderThread {
        inner: String,
        inner_tag: ThreadTag,
        outer: String,
        outer_tag: ThreadTag,
    },
    /// (8) A Reduce iteration variable bound to an expression of a thread-bound loop.
    #[error("block \"{block}\": binding of reduce iter var {iter_var} uses loop \"{lp}\", bound to {tag}")]
    ReduceOverThread {
        block: String,
        iter_var: String,
        lp: String,
        tag: ThreadTag,
    },
    /// (8) A reduction block under two loops bound to the same tag.
    #[error("block \"{block}\": reduction nested under loops \"{outer}\" and \"{inner}\", both bound to {tag}")]
    ReduceUnderRepeatedTag {
        block: String,
        tag: ThreadTag,
        outer: String,
        inner: String,
    },
    /// (9) A Vectorized loop whose body is not exactly one block.
    #[error("loop \"{lp}\" is vectorized but its body is not exactly one block")]
    VectorizedNotInnermost { lp: String },
    /// (9) A Reduce iteration variable bound to an expression of a Vectorized or Parallel
    /// loop.
    #[error("block \"{block}\": binding of reduce iter var {iter_var} uses {kind} loop \"{lp}\"")]
    ReduceOverParallelLoop {
        block: String,
        iter_var: String,
        lp: String,
        kind: &'static str,
    },
    /// (10) An allocated buffer read before any block writes it.
    #[error("block \"{block}\" reads {buffer} before any block writes it")]
    ReadBeforeWrite { block: String, buffer: String },
    /// (10) An Output parameter no block writes.
    #[error("output {buffer} is never written")]
    OutputNotWritten { buffer: String },
    /// (11) Two reachable blocks with one name.
    #[error("two blocks are named \"{name}\"")]
    DuplicateBlockName { name: String },
}

impl VerifyError {
    /// The number of the invariant (in the module doc) this error breaks.
    pub fn invariant(&self) -> u8 {
        use VerifyError::*;
        match self {
            IdOutOfRange { .. } | NodeReachedTwice { .. } => 1,
            LoopExtent { .. } | DuplicateVar { .. } => 2,
            BindingCount { .. }
            | DuplicateIterVar { .. }
            | BindingScope { .. }
            | PredicateScope { .. } => 3,
            StoreScope { .. } => 4,
            IterVarExtent { .. } | BindingRange { .. } => 5,
            InitWithoutReduce { .. } | InitMismatch { .. } | ReduceVarInStoreIndex { .. } => 6,
            UndeclaredBuffer { .. }
            | IndexCount { .. }
            | StoreToInput { .. }
            | AccessOutOfBounds { .. } => 7,
            ThreadExtentMismatch { .. }
            | BlockIdxUnderThread { .. }
            | ReduceOverThread { .. }
            | ReduceUnderRepeatedTag { .. } => 8,
            VectorizedNotInnermost { .. } | ReduceOverParallelLoop { .. } => 9,
            ReadBeforeWrite { .. } | OutputNotWritten { .. } => 10,
            DuplicateBlockName { .. } => 11,
        }
    }
}

fn show_lo(v: i64) -> String {
    if v == i64::MIN {
        "-inf".to_string()
    } else {
        v.to_string()
    }
}

fn show_hi(v: i64) -> String {
    if v == i64::MAX {
        "+inf".to_string()
    } else {
        v.to_string()
    }
}

/// Checks every invariant of the module doc; returns the first violation.
pub fn verify(p: &Program) -> VerifyResult<()> {
    match Verifier::run(p, 1).into_iter().next() {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// Checks every invariant of the module doc; returns every violation found, in the order
/// [`verify`] meets them (the first is the one `verify` returns).
pub fn verify_all(p: &Program) -> Vec<VerifyError> {
    Verifier::run(p, usize::MAX)
}

/// Displays an expression the way printed IR spells it, with variable and buffer names, for
/// error messages. Ids outside their arenas print as ids (`var7`), so it never panics.
struct ShowExpr<'a> {
    program: &'a Program,
    expr: &'a Expr,
}

impl fmt::Display for ShowExpr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_expr(f, self.program, self.expr, 0)
    }
}

fn var_name(p: &Program, v: VarId) -> String {
    p.vars
        .get(v.index())
        .map_or_else(|| v.to_string(), |x| x.name.clone())
}

fn buffer_name(p: &Program, b: BufferId) -> String {
    p.buffers
        .get(b.index())
        .map_or_else(|| b.to_string(), |x| x.name.clone())
}

fn show(p: &Program, e: &Expr) -> String {
    ShowExpr {
        program: p,
        expr: e,
    }
    .to_string()
}

fn show_access(p: &Program, b: BufferId, idx: &[Expr]) -> String {
    let mut s = buffer_name(p, b);
    s.push('[');
    for (i, e) in idx.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&show(p, e));
    }
    s.push(']');
    s
}

fn bin_spelling(op: BinOp) -> (&'static str, u8) {
    match op {
        BinOp::Or => ("or", 1),
        BinOp::And => ("and", 2),
        BinOp::Lt => ("<", 3),
        BinOp::Le => ("<=", 3),
        BinOp::Gt => (">", 3),
        BinOp::Ge => (">=", 3),
        BinOp::Eq => ("==", 3),
        BinOp::Ne => ("!=", 3),
        BinOp::Add => ("+", 4),
        BinOp::Sub => ("-", 4),
        BinOp::Mul => ("*", 5),
        BinOp::Div => ("/", 5),
        BinOp::FloorDiv => ("//", 5),
        BinOp::FloorMod => ("%", 5),
        BinOp::Min => ("min", 9),
        BinOp::Max => ("max", 9),
    }
}

fn write_list(f: &mut fmt::Formatter<'_>, p: &Program, items: &[&Expr]) -> fmt::Result {
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write_expr(f, p, e, 0)?;
    }
    Ok(())
}

/// Writes `e`, parenthesised when its precedence is below `min_prec`.
fn write_expr(f: &mut fmt::Formatter<'_>, p: &Program, e: &Expr, min_prec: u8) -> fmt::Result {
    match e {
        Expr::Int(v) => write!(f, "{v}"),
        Expr::Float(v) => write!(f, "{v:?}"),
        Expr::Var(v) => f.write_str(&var_name(p, *v)),
        Expr::Load(b, idx) => {
            f.write_str(&buffer_name(p, *b))?;
            f.write_str("[")?;
            write_list(f, p, &idx.iter().collect::<Vec<_>>())?;
            f.write_str("]")
        }
        Expr::Bin(op, a, b) => {
            let (sym, prec) = bin_spelling(*op);
            if prec == 9 {
                write!(f, "{sym}(")?;
                write_list(f, p, &[a, b])?;
                return f.write_str(")");
            }
            let paren = prec < min_prec;
            if paren {
                f.write_str("(")?;
            }
            write_expr(f, p, a, prec)?;
            write!(f, " {sym} ")?;
            write_expr(f, p, b, prec + 1)?;
            if paren {
                f.write_str(")")?;
            }
            Ok(())
        }
        Expr::Un(UnOp::Neg, a) => {
            let paren = 6 < min_prec;
            if paren {
                f.write_str("(")?;
            }
            f.write_str("-")?;
            write_expr(f, p, a, 7)?;
            if paren {
                f.write_str(")")?;
            }
            Ok(())
        }
        Expr::Un(op, a) => {
            write!(f, "{}(", op.name())?;
            write_expr(f, p, a, 0)?;
            f.write_str(")")
        }
        Expr::Select(c, t, x) => {
            f.write_str("if_then_else(")?;
            write_list(f, p, &[c, t, x])?;
            f.write_str(")")
        }
        Expr::Cast(t, a) => {
            write!(f, "{}(", t.name())?;
            write_expr(f, p, a, 0)?;
            f.write_str(")")
        }
    }
}

/// Calls `f(buffer, indices, guarded)` on every load of `e`; `guarded` is true inside a
/// branch of a `Select`.
fn for_each_load<'e>(e: &'e Expr, guarded: bool, f: &mut impl FnMut(BufferId, &'e [Expr], bool)) {
    match e {
        Expr::Int(_) | Expr::Float(_) | Expr::Var(_) => {}
        Expr::Load(b, idx) => {
            f(*b, idx, guarded);
            idx.iter().for_each(|i| for_each_load(i, guarded, f));
        }
        Expr::Bin(_, a, b) => {
            for_each_load(a, guarded, f);
            for_each_load(b, guarded, f);
        }
        Expr::Un(_, a) | Expr::Cast(_, a) => for_each_load(a, guarded, f),
        Expr::Select(c, t, x) => {
            for_each_load(c, guarded, f);
            for_each_load(t, true, f);
            for_each_load(x, true, f);
        }
    }
}

/// A load of a block: its buffer, its indices, and whether it is inside a branch of a
/// `Select`.
type Load<'e> = (BufferId, &'e [Expr], bool);

/// Every load of a block's body store, then of its init, in program order.
fn loads_of(blk: &Block) -> Vec<Load<'_>> {
    let mut loads = Vec::new();
    for store in std::iter::once(&blk.body).chain(&blk.init) {
        for e in store.indices.iter().chain(std::iter::once(&store.value)) {
            for_each_load(e, false, &mut |b, idx, guarded| {
                loads.push((b, idx, guarded))
            });
        }
    }
    loads
}

/// The first variable of `e` for which `ok` is false.
fn first_var_where(e: &Expr, ok: impl Fn(VarId) -> bool) -> Option<VarId> {
    let mut found = None;
    e.visit(&mut |x| {
        if let Expr::Var(v) = x {
            if found.is_none() && !ok(*v) {
                found = Some(*v);
            }
        }
    });
    found
}

/// Who declares a variable.
#[derive(Copy, Clone)]
enum Owner {
    Loop(LoopId),
    Block,
}

/// One verification run: the parent map and pre-order of the walk, scratch tables indexed
/// by variable and buffer, and the errors found so far (at most `limit`).
struct Verifier<'p> {
    p: &'p Program,
    limit: usize,
    errors: Vec<VerifyError>,
    /// Per loop: `Some(parent)` once reached (`Some(None)`: under the root).
    loop_parent: Vec<Option<Option<LoopId>>>,
    /// Per block: `Some(parent)` once reached.
    block_parent: Vec<Option<Option<LoopId>>>,
    /// Reached nodes in pre-order (program order).
    order: Vec<Node>,
    /// Per variable: the reachable loop owning it.
    owner: Vec<Option<Owner>>,
    /// Per variable: its domain while it is an enclosing loop's variable of the current block.
    loop_scope: Vec<Option<Interval>>,
    /// Per variable: its domain and kind while it is an iteration variable of the current
    /// block.
    iter_scope: Vec<Option<(Interval, IterKind)>>,
    /// Per buffer: a parameter or an allocation.
    declared: Vec<bool>,
    /// Per buffer: in `allocs`.
    allocated: Vec<bool>,
    /// Per buffer: written by a block met so far in program order.
    written: Vec<bool>,
    /// Per buffer: a read-before-write was already reported.
    read_reported: Vec<bool>,
}

impl<'p> Verifier<'p> {
    fn run(p: &'p Program, limit: usize) -> Vec<VerifyError> {
        let mut v = Verifier {
            p,
            limit,
            errors: Vec::new(),
            loop_parent: vec![None; p.loops.len()],
            block_parent: vec![None; p.blocks.len()],
            order: Vec::with_capacity(p.loops.len() + p.blocks.len()),
            owner: vec![None; p.vars.len()],
            loop_scope: vec![None; p.vars.len()],
            iter_scope: vec![None; p.vars.len()],
            declared: vec![false; p.buffers.len()],
            allocated: vec![false; p.buffers.len()],
            written: vec![false; p.buffers.len()],
            read_reported: vec![false; p.buffers.len()],
        };
        v.walk_tree();
        v.check_buffer_lists();
        let order = std::mem::take(&mut v.order);
        for n in &order {
            if v.full() {
                break;
            }
            if let Node::Loop(l) = n {
                v.check_loop(*l);
            }
        }
        let mut names: HashMap<&str, BlockId> = HashMap::with_capacity(order.len());
        let mut ancestors = Vec::new();
        for n in &order {
            if v.full() {
                break;
            }
            if let Node::Block(b) = n {
                let blk = &p.blocks[b.index()];
                if names.insert(blk.name.as_str(), *b).is_some() {
                    v.report(VerifyError::DuplicateBlockName {
                        name: blk.name.clone(),
                    });
                }
                v.ancestors_of(v.block_parent[b.index()].flatten(), &mut ancestors);
                v.check_block(blk, &ancestors);
            }
        }
        v.check_outputs();
        v.errors
    }

    fn full(&self) -> bool {
        self.errors.len() >= self.limit
    }

    fn report(&mut self, e: VerifyError) {
        if !self.full() && !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }

    fn loop_label(&self, l: LoopId) -> String {
        match self
            .p
            .loops
            .get(l.index())
            .and_then(|lp| self.p.vars.get(lp.var.index()))
        {
            Some(v) => format!("loop \"{}\"", v.name),
            None => l.to_string(),
        }
    }

    fn loop_name(&self, l: LoopId) -> String {
        match self.p.loops.get(l.index()) {
            Some(lp) => var_name(self.p, lp.var),
            None => l.to_string(),
        }
    }

    fn parent_label(&self, parent: Option<LoopId>) -> String {
        match parent {
            None => "root".to_string(),
            Some(l) => self.loop_label(l),
        }
    }

    fn node_label(&self, n: Node) -> String {
        match n {
            Node::Loop(l) => self.loop_label(l),
            Node::Block(b) => match self.p.blocks.get(b.index()) {
                Some(blk) => format!("block \"{}\"", blk.name),
                None => b.to_string(),
            },
        }
    }

    /// Invariant 1: walks the tree from the root with an explicit stack, recording parents
    /// and the pre-order; never descends into a node twice, so cycles end.
    fn walk_tree(&mut self) {
        let p = self.p;
        let mut stack: Vec<(Node, Option<LoopId>)> =
            p.root.iter().rev().map(|n| (*n, None)).collect();
        while let Some((n, parent)) = stack.pop() {
            let (seen, len) = match n {
                Node::Loop(l) => (self.loop_parent.get(l.index()).copied(), p.loops.len()),
                Node::Block(b) => (self.block_parent.get(b.index()).copied(), p.blocks.len()),
            };
            match seen {
                None => {
                    let id = match n {
                        Node::Loop(l) => l.to_string(),
                        Node::Block(b) => b.to_string(),
                    };
                    self.report(VerifyError::IdOutOfRange {
                        place: self.parent_label(parent),
                        id,
                        len,
                    });
                }
                Some(Some(first)) => self.report(VerifyError::NodeReachedTwice {
                    node: self.node_label(n),
                    first: self.parent_label(first),
                    second: self.parent_label(parent),
                }),
                Some(None) => {
                    self.order.push(n);
                    match n {
                        Node::Loop(l) => {
                            self.loop_parent[l.index()] = Some(parent);
                            stack.extend(
                                p.loops[l.index()].body.iter().rev().map(|c| (*c, Some(l))),
                            );
                        }
                        Node::Block(b) => self.block_parent[b.index()] = Some(parent),
                    }
                }
            }
        }
    }

    /// Invariant 1 (and the tables of 7): `params` and `allocs` ids are in range.
    fn check_buffer_lists(&mut self) {
        let p = self.p;
        for (list, place, is_alloc) in [(&p.params, "params", false), (&p.allocs, "allocs", true)] {
            for b in list {
                match self.declared.get_mut(b.index()) {
                    Some(d) => {
                        *d = true;
                        self.allocated[b.index()] |= is_alloc;
                    }
                    None => self.report(VerifyError::IdOutOfRange {
                        place: place.to_string(),
                        id: b.to_string(),
                        len: p.buffers.len(),
                    }),
                }
            }
        }
    }

    /// The loops enclosing a node whose parent is `parent`, outermost first. Parents were
    /// recorded on first visit, before their children, so the chain ends.
    fn ancestors_of(&self, parent: Option<LoopId>, out: &mut Vec<LoopId>) {
        out.clear();
        let mut cur = parent;
        while let Some(l) = cur {
            out.push(l);
            cur = self.loop_parent.get(l.index()).copied().flatten().flatten();
        }
        out.reverse();
    }

    /// Invariants 2, 8 (thread nesting) and 9 (vectorized bodies) for one reached loop.
    fn check_loop(&mut self, l: LoopId) {
        let p = self.p;
        let lp = &p.loops[l.index()];
        if lp.extent < 1 {
            self.report(VerifyError::LoopExtent {
                lp: self.loop_name(l),
                extent: lp.extent,
            });
        }
        match self.owner.get(lp.var.index()).copied() {
            None => self.report(VerifyError::IdOutOfRange {
                place: l.to_string(),
                id: lp.var.to_string(),
                len: p.vars.len(),
            }),
            Some(Some(Owner::Loop(other))) => self.report(VerifyError::DuplicateVar {
                var: var_name(p, lp.var),
                id: lp.var,
                first: self.loop_label(other),
                second: self.loop_label(l),
            }),
            Some(_) => self.owner[lp.var.index()] = Some(Owner::Loop(l)),
        }
        if let LoopKind::Thread(tag) = lp.kind {
            let mut cur = self.loop_parent[l.index()].flatten();
            while let Some(a) = cur {
                let outer = &p.loops[a.index()];
                if let LoopKind::Thread(outer_tag) = outer.kind {
                    if outer_tag == tag && outer.extent != lp.extent {
                        self.report(VerifyError::ThreadExtentMismatch {
                            tag,
                            outer: self.loop_name(a),
                            outer_extent: outer.extent,
                            inner: self.loop_name(l),
                            inner_extent: lp.extent,
                        });
                    }
                    if tag.is_block_idx() && !outer_tag.is_block_idx() {
                        self.report(VerifyError::BlockIdxUnderThread {
                            inner: self.loop_name(l),
                            inner_tag: tag,
                            outer: self.loop_name(a),
                            outer_tag,
                        });
                    }
                }
                cur = self.loop_parent[a.index()].flatten();
            }
        }
        if lp.kind == LoopKind::Vectorized && !matches!(lp.body.as_slice(), [Node::Block(_)]) {
            self.report(VerifyError::VectorizedNotInnermost {
                lp: self.loop_name(l),
            });
        }
    }

    /// Invariants 3 to 10 for one reached block under `ancestors` (outermost first).
    fn check_block(&mut self, blk: &'p Block, ancestors: &[LoopId]) {
        let p = self.p;
        let name = &blk.name;
        // Scopes: the enclosing loops' variables, then the block's iteration variables.
        for a in ancestors {
            let lp = &p.loops[a.index()];
            if let Some(s) = self.loop_scope.get_mut(lp.var.index()) {
                *s = Some(Interval::new(0, lp.extent.max(1) - 1));
            }
        }
        let mut iter_ok = vec![false; blk.iter_vars.len()];
        for (i, iv) in blk.iter_vars.iter().enumerate() {
            // Named only in an error: verification runs after every primitive.
            let iter_var = || var_name(p, iv.var);
            if iv.extent < 1 {
                self.report(VerifyError::IterVarExtent {
                    block: name.clone(),
                    iter_var: iter_var(),
                    extent: iv.extent,
                });
            }
            let Some(slot) = self.iter_scope.get(iv.var.index()) else {
                self.report(VerifyError::IdOutOfRange {
                    place: format!("block \"{name}\""),
                    id: iv.var.to_string(),
                    len: p.vars.len(),
                });
                continue;
            };
            if slot.is_some() {
                self.report(VerifyError::DuplicateIterVar {
                    block: name.clone(),
                    iter_var: iter_var(),
                });
                continue;
            }
            if let Some(Owner::Loop(l)) = self.owner[iv.var.index()] {
                self.report(VerifyError::DuplicateVar {
                    var: iter_var(),
                    id: iv.var,
                    first: self.loop_label(l),
                    second: format!("block \"{name}\""),
                });
            }
            if self.owner[iv.var.index()].is_none() {
                self.owner[iv.var.index()] = Some(Owner::Block);
            }
            self.iter_scope[iv.var.index()] =
                Some((Interval::new(0, iv.extent.max(1) - 1), iv.kind));
            iter_ok[i] = true;
        }

        self.check_bindings(blk, ancestors);
        self.check_stores(blk);
        let loads = loads_of(blk);
        self.check_accesses(blk, &loads);
        self.check_dataflow(blk, &loads);

        // Clear the scratch scopes for the next block.
        for a in ancestors {
            let lp = &p.loops[a.index()];
            if let Some(s) = self.loop_scope.get_mut(lp.var.index()) {
                *s = None;
            }
        }
        for (iv, ok) in blk.iter_vars.iter().zip(iter_ok) {
            if ok {
                self.iter_scope[iv.var.index()] = None;
            }
        }
    }

    fn in_loop_scope(&self, v: VarId) -> bool {
        matches!(self.loop_scope.get(v.index()), Some(Some(_)))
    }

    fn in_iter_scope(&self, v: VarId) -> bool {
        matches!(self.iter_scope.get(v.index()), Some(Some(_)))
    }

    /// Invariants 3, 5, 8 and 9: binding count, scope and range; predicate scope; reduce
    /// bindings against thread-bound, vectorized and parallel loops; reductions under a
    /// repeated thread tag.
    fn check_bindings(&mut self, blk: &Block, ancestors: &[LoopId]) {
        let p = self.p;
        let name = &blk.name;
        if blk.bindings.len() != blk.iter_vars.len() {
            self.report(VerifyError::BindingCount {
                block: name.clone(),
                iter_vars: blk.iter_vars.len(),
                bindings: blk.bindings.len(),
            });
        }
        for (iv, binding) in blk.iter_vars.iter().zip(&blk.bindings) {
            if let Some(v) = first_var_where(binding, |v| self.in_loop_scope(v)) {
                self.report(VerifyError::BindingScope {
                    block: name.clone(),
                    iter_var: var_name(p, iv.var),
                    binding: show(p, binding),
                    var: var_name(p, v),
                });
                continue;
            }
            let r = bound_with(binding, &|v| {
                self.loop_scope.get(v.index()).copied().flatten()
            });
            let predicated = blk.predicate.is_some();
            let bad_hi = !predicated && (r.max == i64::MAX || r.max >= iv.extent);
            if r.min < 0 || bad_hi {
                self.report(VerifyError::BindingRange {
                    block: name.clone(),
                    iter_var: var_name(p, iv.var),
                    binding: show(p, binding),
                    min: r.min,
                    max: r.max,
                    extent: iv.extent,
                    predicated,
                });
            }
            if iv.kind == IterKind::Reduce {
                for a in ancestors {
                    let lp = &p.loops[a.index()];
                    // The loop's kind first: most loops are serial, and a search of the
                    // binding for their variable would be wasted.
                    if matches!(lp.kind, LoopKind::Serial | LoopKind::Unrolled)
                        || !binding.uses_var(lp.var)
                    {
                        continue;
                    }
                    let kind = match lp.kind {
                        LoopKind::Thread(tag) => {
                            self.report(VerifyError::ReduceOverThread {
                                block: name.clone(),
                                iter_var: var_name(p, iv.var),
                                lp: self.loop_name(*a),
                                tag,
                            });
                            continue;
                        }
                        LoopKind::Vectorized => "vectorized",
                        LoopKind::Parallel => "parallel",
                        LoopKind::Serial | LoopKind::Unrolled => continue,
                    };
                    self.report(VerifyError::ReduceOverParallelLoop {
                        block: name.clone(),
                        iter_var: var_name(p, iv.var),
                        lp: self.loop_name(*a),
                        kind,
                    });
                }
            }
        }
        if let Some(pred) = &blk.predicate {
            if let Some(v) = first_var_where(pred, |v| self.in_loop_scope(v)) {
                self.report(VerifyError::PredicateScope {
                    block: name.clone(),
                    predicate: show(p, pred),
                    var: var_name(p, v),
                });
            }
        }
        if blk.is_reduction() {
            let tagged: Vec<(LoopId, ThreadTag)> = ancestors
                .iter()
                .filter_map(|a| match p.loops[a.index()].kind {
                    LoopKind::Thread(t) => Some((*a, t)),
                    _ => None,
                })
                .collect();
            for (i, (inner, tag)) in tagged.iter().enumerate() {
                if let Some((outer, _)) = tagged[..i].iter().find(|(_, t)| t == tag) {
                    self.report(VerifyError::ReduceUnderRepeatedTag {
                        block: name.clone(),
                        tag: *tag,
                        outer: self.loop_name(*outer),
                        inner: self.loop_name(*inner),
                    });
                }
            }
        }
    }

    /// Invariants 4 and 6: store scopes, init placement and store indices.
    fn check_stores(&mut self, blk: &Block) {
        let p = self.p;
        let name = &blk.name;
        let stores = [
            (StoreRole::Body, Some(&blk.body)),
            (StoreRole::Init, blk.init.as_ref()),
        ];
        for (role, store) in stores {
            let Some(store) = store else { continue };
            let exprs = store.indices.iter().chain(std::iter::once(&store.value));
            if let Some(v) = exprs
                .filter_map(|e| first_var_where(e, |v| self.in_iter_scope(v)))
                .next()
            {
                self.report(VerifyError::StoreScope {
                    block: name.clone(),
                    role,
                    var: var_name(p, v),
                });
            }
        }
        if let Some(init) = &blk.init {
            if !blk.is_reduction() {
                self.report(VerifyError::InitWithoutReduce {
                    block: name.clone(),
                });
            }
            if init.buffer != blk.body.buffer || init.indices != blk.body.indices {
                self.report(VerifyError::InitMismatch {
                    block: name.clone(),
                    init: show_access(p, init.buffer, &init.indices),
                    body: show_access(p, blk.body.buffer, &blk.body.indices),
                });
            }
        }
        for (role, store) in stores {
            let Some(store) = store else { continue };
            let reduce_var = store.indices.iter().find_map(|e| {
                first_var_where(e, |v| {
                    !matches!(
                        self.iter_scope.get(v.index()),
                        Some(Some((_, IterKind::Reduce)))
                    )
                })
            });
            if let Some(v) = reduce_var {
                self.report(VerifyError::ReduceVarInStoreIndex {
                    block: name.clone(),
                    role,
                    store: show_access(p, store.buffer, &store.indices),
                    iter_var: var_name(p, v),
                });
            }
        }
    }

    /// Invariant 7: every store and load of the block.
    fn check_accesses(&mut self, blk: &Block, loads: &[Load<'_>]) {
        let mut stores: Vec<(StoreRole, &Store)> = vec![(StoreRole::Body, &blk.body)];
        if let Some(init) = &blk.init {
            stores.push((StoreRole::Init, init));
        }
        for (role, store) in &stores {
            if self.check_access(&blk.name, store.buffer, &store.indices, false) {
                let buf = &self.p.buffers[store.buffer.index()];
                if buf.kind == BufferKind::Input {
                    self.report(VerifyError::StoreToInput {
                        block: blk.name.clone(),
                        role: *role,
                        buffer: buf.name.clone(),
                    });
                }
            }
        }
        for &(b, idx, guarded) in loads {
            self.check_access(&blk.name, b, idx, guarded);
        }
    }

    /// Checks one access of invariant 7; true when the buffer is declared and the index
    /// count matches its rank.
    fn check_access(&mut self, block: &str, b: BufferId, idx: &[Expr], guarded: bool) -> bool {
        let p = self.p;
        let Some(buf) = p.buffers.get(b.index()) else {
            self.report(VerifyError::IdOutOfRange {
                place: format!("block \"{block}\""),
                id: b.to_string(),
                len: p.buffers.len(),
            });
            return false;
        };
        if !self.declared[b.index()] {
            self.report(VerifyError::UndeclaredBuffer {
                block: block.to_string(),
                buffer: buf.name.clone(),
            });
            return false;
        }
        if idx.len() != buf.shape.len() {
            self.report(VerifyError::IndexCount {
                block: block.to_string(),
                buffer: buf.name.clone(),
                access: show_access(p, b, idx),
                indices: idx.len(),
                rank: buf.shape.len(),
            });
            return false;
        }
        if guarded {
            return true;
        }
        for (dim, (e, &size)) in idx.iter().zip(&buf.shape).enumerate() {
            let r = bound_with(e, &|v| {
                self.iter_scope
                    .get(v.index())
                    .copied()
                    .flatten()
                    .map(|(i, _)| i)
            });
            if r.is_bounded() && (r.min < 0 || r.max >= size) {
                self.report(VerifyError::AccessOutOfBounds {
                    block: block.to_string(),
                    buffer: buf.name.clone(),
                    access: show_access(p, b, idx),
                    dim,
                    min: r.min,
                    max: r.max,
                    size,
                });
            }
        }
        true
    }

    /// Invariant 10 (first part): reads of allocated buffers come after a write.
    fn check_dataflow(&mut self, blk: &Block, loads: &[Load<'_>]) {
        let p = self.p;
        if let Some(w) = blk
            .init
            .as_ref()
            .and_then(|init| self.written.get_mut(init.buffer.index()))
        {
            *w = true;
        }
        for &(b, _, _) in loads {
            let i = b.index();
            let unwritten = self.allocated.get(i).copied().unwrap_or(false) && !self.written[i];
            if unwritten && !self.read_reported[i] {
                self.read_reported[i] = true;
                self.report(VerifyError::ReadBeforeWrite {
                    block: blk.name.clone(),
                    buffer: buffer_name(p, b),
                });
            }
        }
        if let Some(w) = self.written.get_mut(blk.body.buffer.index()) {
            *w = true;
        }
    }

    /// Invariant 10 (second part): every Output parameter is written.
    fn check_outputs(&mut self) {
        let p = self.p;
        for b in &p.params {
            if let Some(buf) = p.buffers.get(b.index()) {
                if buf.kind == BufferKind::Output && !self.written[b.index()] {
                    self.report(VerifyError::OutputNotWritten {
                        buffer: buf.name.clone(),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
