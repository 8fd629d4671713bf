//! The loop-nest IR: a program is a tree of loops whose leaves are blocks.
//!
//! The shape follows TVM's TensorIR. A [`Block`] is one computation statement
//! (`buffer[indices] = value`) with its own iteration variables, each bound to an
//! expression of the enclosing loop variables; its body only refers to its iteration
//! variables, so it can be moved between loop nests by rewriting the bindings alone.
//! Loops, blocks, buffers and variables live in arenas indexed by typed ids; a node that
//! a primitive replaces stays in its arena, unreachable.

use super::expr::{DType, Expr};
use super::ids::{BlockId, BufferId, LoopId, VarId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A variable: a loop variable or a block iteration variable. Both are integers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Var {
    pub name: String,
}

/// Where a buffer lives.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Scope {
    Global,
    Shared,
    Local,
    /// A warp's tensor-core operand or accumulator tiles (`mma.sync` fragments), held in
    /// the registers of its 32 lanes. Compacted like a local buffer (the warp's region);
    /// every access goes through a tensorized loop nest (`schedule::tensorize`), whose
    /// intrinsic knows which lane holds which element.
    Fragment,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Shared => "shared",
            Scope::Local => "local",
            Scope::Fragment => "fragment",
        }
    }
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "global" => Some(Scope::Global),
            "shared" => Some(Scope::Shared),
            "local" => Some(Scope::Local),
            "fragment" => Some(Scope::Fragment),
            _ => None,
        }
    }
}

/// Whether a buffer is a parameter of the program or allocated inside it.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum BufferKind {
    Input,
    Output,
    Intermediate,
}

/// `storage_align(axis, factor, offset)`: pad the stride of `axis` so that
/// `stride % factor == offset` (used against shared-memory bank conflicts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageAlign {
    pub axis: usize,
    pub factor: i64,
    pub offset: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Buffer {
    pub name: String,
    pub shape: Vec<i64>,
    pub dtype: DType,
    pub scope: Scope,
    pub kind: BufferKind,
    pub align: Vec<StorageAlign>,
    /// `storage_swizzle`: stored in panels of 128-byte rows whose 16-byte chunks are
    /// permuted by the row (the 128-byte swizzle of Hopper's tensor-core operands and of
    /// conflict-free `ldmatrix`); see `lower::swizzle`.
    #[serde(default)]
    pub swizzle: bool,
}

impl Buffer {
    pub fn numel(&self) -> i64 {
        self.shape.iter().product()
    }
}

/// One of the three dimensions of a thread index.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum Dim3 {
    X,
    Y,
    Z,
}

/// What a thread-bound loop is bound to.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum ThreadTag {
    BlockIdx(Dim3),
    ThreadIdx(Dim3),
    VThread(Dim3),
}

impl ThreadTag {
    pub fn parse(s: &str) -> Option<ThreadTag> {
        let (head, dim) = s.rsplit_once('.')?;
        let d = match dim {
            "x" => Dim3::X,
            "y" => Dim3::Y,
            "z" => Dim3::Z,
            _ => return None,
        };
        match head {
            "blockIdx" => Some(ThreadTag::BlockIdx(d)),
            "threadIdx" => Some(ThreadTag::ThreadIdx(d)),
            "vthread" => Some(ThreadTag::VThread(d)),
            _ => None,
        }
    }
    pub fn dim(self) -> Dim3 {
        match self {
            ThreadTag::BlockIdx(d) | ThreadTag::ThreadIdx(d) | ThreadTag::VThread(d) => d,
        }
    }
    pub fn is_block_idx(self) -> bool {
        matches!(self, ThreadTag::BlockIdx(_))
    }
    pub fn is_thread_idx(self) -> bool {
        matches!(self, ThreadTag::ThreadIdx(_))
    }
}

impl fmt::Display for ThreadTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (head, d) = match self {
            ThreadTag::BlockIdx(d) => ("blockIdx", d),
            ThreadTag::ThreadIdx(d) => ("threadIdx", d),
            ThreadTag::VThread(d) => ("vthread", d),
        };
        let d = match d {
            Dim3::X => "x",
            Dim3::Y => "y",
            Dim3::Z => "z",
        };
        write!(f, "{head}.{d}")
    }
}

/// How a loop runs.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum LoopKind {
    Serial,
    Parallel,
    Vectorized,
    Unrolled,
    Thread(ThreadTag),
}

/// The value of an annotation on a loop or block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum AnnValue {
    Int(i64),
    Str(String),
    /// A list of integers, e.g. `software_pipeline_stage`: one stage per statement.
    Ints(Vec<i64>),
}

impl fmt::Display for AnnValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnnValue::Int(v) => write!(f, "{v}"),
            AnnValue::Str(s) => write!(f, "{s:?}"),
            AnnValue::Ints(v) => {
                let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                write!(f, "[{}]", items.join(", "))
            }
        }
    }
}

/// A statement of a loop body (or of the program's root).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Node {
    Loop(LoopId),
    Block(BlockId),
}

/// `for var in range(extent)`, with a kind and annotations. Loops always start at 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Loop {
    pub var: VarId,
    pub extent: i64,
    pub kind: LoopKind,
    pub annotations: BTreeMap<String, AnnValue>,
    pub body: Vec<Node>,
}

/// Whether an iteration variable is data-parallel or a reduction.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum IterKind {
    Spatial,
    Reduce,
}

/// An iteration variable of a block, with domain `[0, extent)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterVar {
    pub var: VarId,
    pub extent: i64,
    pub kind: IterKind,
}

/// `buffer[indices] = value`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Store {
    pub buffer: BufferId,
    pub indices: Vec<Expr>,
    pub value: Expr,
}

/// One computation statement with its iteration domain.
///
/// `bindings[i]` gives the value of `iter_vars[i]` in terms of enclosing loop variables.
/// `init`, when present, runs before the first update: when every reduction iteration
/// variable is 0. `predicate` (over loop variables) guards the whole block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub name: String,
    pub iter_vars: Vec<IterVar>,
    pub bindings: Vec<Expr>,
    pub predicate: Option<Expr>,
    pub init: Option<Store>,
    pub body: Store,
    pub annotations: BTreeMap<String, AnnValue>,
}

impl Block {
    pub fn is_reduction(&self) -> bool {
        self.iter_vars.iter().any(|iv| iv.kind == IterKind::Reduce)
    }

    /// The product of the extents of the iteration variables of `kind` (of `Spatial`:
    /// the output elements the block computes).
    pub fn extent_of(&self, kind: IterKind) -> i64 {
        self.iter_vars
            .iter()
            .filter(|iv| iv.kind == kind)
            .map(|iv| iv.extent)
            .product()
    }
}

/// A whole program: one function over its parameter buffers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub name: String,
    pub vars: Vec<Var>,
    pub buffers: Vec<Buffer>,
    pub loops: Vec<Loop>,
    pub blocks: Vec<Block>,
    /// Parameters in call order: inputs, then outputs.
    pub params: Vec<BufferId>,
    /// Intermediate buffers allocated at the root, in allocation order.
    pub allocs: Vec<BufferId>,
    pub root: Vec<Node>,
}

/// Where a node sits: its parent loop (`None` at the root) and its position there.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub parent: Option<LoopId>,
    pub index: usize,
}

impl Program {
    pub fn new(name: impl Into<String>) -> Program {
        Program {
            name: name.into(),
            vars: Vec::new(),
            buffers: Vec::new(),
            loops: Vec::new(),
            blocks: Vec::new(),
            params: Vec::new(),
            allocs: Vec::new(),
            root: Vec::new(),
        }
    }

    // ----- arena access -------------------------------------------------------------

    pub fn var(&self, v: VarId) -> &Var {
        &self.vars[v.index()]
    }
    pub fn var_name(&self, v: VarId) -> &str {
        &self.vars[v.index()].name
    }
    pub fn buffer(&self, b: BufferId) -> &Buffer {
        &self.buffers[b.index()]
    }
    pub fn buffer_mut(&mut self, b: BufferId) -> &mut Buffer {
        &mut self.buffers[b.index()]
    }
    pub fn lp(&self, l: LoopId) -> &Loop {
        &self.loops[l.index()]
    }
    pub fn lp_mut(&mut self, l: LoopId) -> &mut Loop {
        &mut self.loops[l.index()]
    }
    pub fn block(&self, b: BlockId) -> &Block {
        &self.blocks[b.index()]
    }
    pub fn block_mut(&mut self, b: BlockId) -> &mut Block {
        &mut self.blocks[b.index()]
    }
    /// The name of a loop: the name of its variable.
    pub fn loop_name(&self, l: LoopId) -> &str {
        self.var_name(self.lp(l).var)
    }

    pub fn new_var(&mut self, name: impl Into<String>) -> VarId {
        self.vars.push(Var { name: name.into() });
        VarId(self.vars.len() as u32 - 1)
    }
    pub fn new_buffer(&mut self, buf: Buffer) -> BufferId {
        self.buffers.push(buf);
        BufferId(self.buffers.len() as u32 - 1)
    }
    /// A new serial loop over `extent` with a fresh variable called `name`.
    pub fn new_loop(&mut self, name: impl Into<String>, extent: i64, body: Vec<Node>) -> LoopId {
        let var = self.new_var(name);
        self.loops.push(Loop {
            var,
            extent,
            kind: LoopKind::Serial,
            annotations: BTreeMap::new(),
            body,
        });
        LoopId(self.loops.len() as u32 - 1)
    }
    pub fn new_block(&mut self, block: Block) -> BlockId {
        self.blocks.push(block);
        BlockId(self.blocks.len() as u32 - 1)
    }

    // ----- tree navigation ----------------------------------------------------------

    /// The statements under `parent` (the root when `None`).
    pub fn body(&self, parent: Option<LoopId>) -> &Vec<Node> {
        match parent {
            None => &self.root,
            Some(l) => &self.lp(l).body,
        }
    }
    pub fn body_mut(&mut self, parent: Option<LoopId>) -> &mut Vec<Node> {
        match parent {
            None => &mut self.root,
            Some(l) => &mut self.lp_mut(l).body,
        }
    }

    /// Every reachable node in pre-order (program order), with its place.
    pub fn walk(&self) -> Vec<(Node, Place)> {
        let mut out = Vec::new();
        fn go(p: &Program, parent: Option<LoopId>, out: &mut Vec<(Node, Place)>) {
            for (index, n) in p.body(parent).iter().enumerate() {
                out.push((*n, Place { parent, index }));
                if let Node::Loop(l) = n {
                    go(p, Some(*l), out);
                }
            }
        }
        go(self, None, &mut out);
        out
    }

    /// Where a node sits, if it is reachable.
    pub fn place(&self, node: Node) -> Option<Place> {
        let mut chain = Vec::new();
        self.find_with_chain(node, None, &mut chain)
    }

    /// Depth-first search for `node` under `parent`; `chain` holds the loops entered on
    /// the way (outermost first) and, when found, the loops enclosing `node`. The search
    /// stops at the node and allocates only the chain (the search is on the path of every
    /// primitive).
    fn find_with_chain(
        &self,
        node: Node,
        parent: Option<LoopId>,
        chain: &mut Vec<LoopId>,
    ) -> Option<Place> {
        for (index, n) in self.body(parent).iter().enumerate() {
            if *n == node {
                return Some(Place { parent, index });
            }
            if let Node::Loop(l) = n {
                chain.push(*l);
                if let Some(p) = self.find_with_chain(node, Some(*l), chain) {
                    return Some(p);
                }
                chain.pop();
            }
        }
        None
    }

    pub fn parent(&self, node: Node) -> Option<LoopId> {
        self.place(node).and_then(|p| p.parent)
    }

    /// The loops enclosing a node, outermost first.
    pub fn ancestors(&self, node: Node) -> Vec<LoopId> {
        let mut chain = Vec::new();
        match self.find_with_chain(node, None, &mut chain) {
            Some(_) => chain,
            None => Vec::new(),
        }
    }

    /// Whether `node` is reachable from the root.
    pub fn is_live(&self, node: Node) -> bool {
        self.place(node).is_some()
    }

    /// Blocks in program order.
    pub fn blocks_in_order(&self) -> Vec<BlockId> {
        self.walk()
            .into_iter()
            .filter_map(|(n, _)| match n {
                Node::Block(b) => Some(b),
                _ => None,
            })
            .collect()
    }

    /// Blocks under a node (the block itself for a block), in program order.
    pub fn blocks_under(&self, node: Node) -> Vec<BlockId> {
        let mut out = Vec::new();
        fn go(p: &Program, n: Node, out: &mut Vec<BlockId>) {
            match n {
                Node::Block(b) => out.push(b),
                Node::Loop(l) => p.lp(l).body.iter().for_each(|c| go(p, *c, out)),
            }
        }
        go(self, node, &mut out);
        out
    }

    /// Loops under a loop (not including it), in pre-order.
    pub fn loops_under(&self, l: LoopId) -> Vec<LoopId> {
        let mut out = Vec::new();
        fn go(p: &Program, l: LoopId, out: &mut Vec<LoopId>) {
            for c in &p.lp(l).body {
                if let Node::Loop(c) = c {
                    out.push(*c);
                    go(p, *c, out);
                }
            }
        }
        go(self, l, &mut out);
        out
    }

    /// Whether `anc` is a (strict) ancestor of `node`.
    pub fn is_ancestor(&self, anc: LoopId, node: Node) -> bool {
        self.ancestors(node).contains(&anc)
    }

    /// Finds a live block by name.
    pub fn find_block(&self, name: &str) -> Vec<BlockId> {
        self.blocks_in_order()
            .into_iter()
            .filter(|b| self.block(*b).name == name)
            .collect()
    }

    /// Live blocks writing `buf`, in program order.
    pub fn writers(&self, buf: BufferId) -> Vec<BlockId> {
        self.blocks_in_order()
            .into_iter()
            .filter(|b| {
                let blk = self.block(*b);
                blk.body.buffer == buf || blk.init.as_ref().is_some_and(|s| s.buffer == buf)
            })
            .collect()
    }

    /// Live blocks reading `buf` (other than a reduction's read of its own output), in
    /// program order.
    pub fn readers(&self, buf: BufferId) -> Vec<BlockId> {
        self.blocks_in_order()
            .into_iter()
            .filter(|b| self.block_reads(*b).iter().any(|(rb, _)| *rb == buf))
            .collect()
    }

    /// The buffer regions a block reads, as the access points of its body (in terms of its
    /// iteration variables), in first-occurrence order without repeats. A block with an
    /// `init` does not list the read of its own output (that read is the reduction's).
    /// `cache_read`'s `read_index` counts in this list.
    pub fn block_reads(&self, b: BlockId) -> Vec<(BufferId, Vec<Expr>)> {
        let blk = self.block(b);
        let mut out: Vec<(BufferId, Vec<Expr>)> = Vec::new();
        let mut exprs: Vec<&Expr> = blk.body.indices.iter().collect();
        exprs.push(&blk.body.value);
        for e in exprs {
            for (buf, idx) in e.loads() {
                if blk.init.is_some() && buf == blk.body.buffer && idx == blk.body.indices {
                    continue;
                }
                if !out.iter().any(|(ob, oi)| *ob == buf && *oi == idx) {
                    out.push((buf, idx));
                }
            }
        }
        out
    }

    /// The buffer a block writes, with its indices.
    pub fn block_write(&self, b: BlockId) -> (BufferId, Vec<Expr>) {
        let blk = self.block(b);
        (blk.body.buffer, blk.body.indices.clone())
    }

    /// Names in use by loop variables of live loops.
    pub fn live_loop_names(&self) -> Vec<String> {
        self.walk()
            .into_iter()
            .filter_map(|(n, _)| match n {
                Node::Loop(l) => Some(self.loop_name(l).to_string()),
                _ => None,
            })
            .collect()
    }

    /// A block name not used by any live block: `base`, else `base_1`, `base_2`, ...
    pub fn fresh_block_name(&self, base: &str) -> String {
        let used: Vec<String> = self
            .blocks_in_order()
            .iter()
            .map(|b| self.block(*b).name.clone())
            .collect();
        fresh_name(base, |n| used.iter().any(|u| u == n))
    }

    /// A buffer name not used by any parameter or allocation.
    pub fn fresh_buffer_name(&self, base: &str) -> String {
        let used: Vec<&str> = self
            .params
            .iter()
            .chain(self.allocs.iter())
            .map(|b| self.buffer(*b).name.as_str())
            .collect();
        fresh_name(base, |n| used.contains(&n))
    }

    /// The extents of loops by variable (for interval analysis), for all live loops.
    pub fn loop_var_extents(&self) -> BTreeMap<VarId, i64> {
        self.walk()
            .into_iter()
            .filter_map(|(n, _)| match n {
                Node::Loop(l) => Some((self.lp(l).var, self.lp(l).extent)),
                _ => None,
            })
            .collect()
    }

    /// The loop owning a variable, if it is a live loop's.
    pub fn loop_of_var(&self, v: VarId) -> Option<LoopId> {
        self.walk().into_iter().find_map(|(n, _)| match n {
            Node::Loop(l) if self.lp(l).var == v => Some(l),
            _ => None,
        })
    }
}

/// `base` if `taken(base)` is false, else the first free `base_1`, `base_2`, ...
pub fn fresh_name(base: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_string();
    }
    (1..)
        .map(|i| format!("{base}_{i}"))
        .find(|n| !taken(n))
        .expect("unbounded")
}
