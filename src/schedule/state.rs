//! The [`Schedule`]: a program being transformed, the trace of what was done to it, and
//! the random variables that name its blocks, loops and sampled values.
//!
//! Every public method is one primitive: it checks, transforms, verifies and records one
//! [`Instruction`]. A primitive that fails (or whose result does not verify) leaves the
//! program exactly as it was and records nothing.

use super::annotation::{self, AnnTarget};
use super::error::{Result, ScheduleError};
use super::hints::Hints;
use super::inst::{Decision, InstKind, Instruction, Operand, RvInfo, RvKind, Trace};
use super::{
    cache, compute_at, get, im2col, inline, layout, loop_transformation, pad_einsum, reduction,
    rfactor, sampling,
};
use crate::ir::{AnnValue, BlockId, LoopId, Node, Program};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;

/// A block random variable: an index into the trace's rvs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct BlockRv(pub u32);
/// A loop random variable.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct LoopRv(pub u32);
/// An integer random variable (a sampled value).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExprRv(pub u32);

/// An integer argument: a literal, a sampled value, or a product of them.
#[derive(Clone, Debug, PartialEq)]
pub enum IntArg {
    Lit(i64),
    Rv(ExprRv),
    Product(Vec<IntArg>),
}

impl From<i64> for IntArg {
    fn from(v: i64) -> IntArg {
        IntArg::Lit(v)
    }
}
impl From<ExprRv> for IntArg {
    fn from(v: ExprRv) -> IntArg {
        IntArg::Rv(v)
    }
}

/// The value of an annotation argument.
#[derive(Clone, Debug, PartialEq)]
pub enum AnnArg {
    Int(i64),
    Str(String),
    Rv(ExprRv),
    /// A list of integers (literals, sampled values or products of them), e.g. the
    /// `software_pipeline_stage` of each statement of a loop body.
    List(Vec<IntArg>),
}

/// What an annotation is attached to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Block(BlockRv),
    Loop(LoopRv),
}

#[derive(Clone, Debug, PartialEq)]
enum RvValue {
    Block(BlockId),
    Loop(LoopId),
    Int(i64),
}

/// A program under transformation, with its trace.
#[derive(Clone, Debug)]
pub struct Schedule {
    prog: Program,
    trace: Trace,
    values: Vec<RvValue>,
    rng: ChaCha8Rng,
    /// Output names to use for the next instruction (set by replay).
    pub(crate) next_names: Option<Vec<String>>,
    verify: bool,
    /// Whether a failed primitive restores the program from a copy taken before it ran
    /// (invariant 2). Off only for a schedule that is dropped on the first error (replay,
    /// the evolutionary search's fresh samples).
    rollback: bool,
    /// A primitive failed while `rollback` was off: the program may be half transformed,
    /// and every later primitive is refused.
    abandoned: bool,
    /// Decisions a sketch building this schedule afresh takes where they fit (a mutant
    /// grown again; see `super::hints`).
    hints: Option<Hints>,
}

/// Checks run after every primitive.
fn post_check(p: &Program) -> std::result::Result<(), String> {
    crate::ir::verify::verify(p).map_err(|e| e.to_string())
}

impl Schedule {
    /// A schedule of `prog` whose sampling instructions draw from `seed`.
    pub fn new(prog: Program, seed: u64) -> Schedule {
        Schedule {
            prog,
            trace: Trace::default(),
            values: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            next_names: None,
            verify: true,
            rollback: true,
            abandoned: false,
            hints: None,
        }
    }

    /// Hands the sampling instructions to come the decisions of `hints`: each takes the
    /// next that fits it (over a decision the caller passes too), else samples.
    pub fn set_hints(&mut self, hints: Hints) {
        self.hints = Some(hints);
    }

    /// The hints, with which of them were taken; none are left set.
    pub fn take_hints(&mut self) -> Option<Hints> {
        self.hints.take()
    }

    /// The next hint for a sampling instruction `kind` with `attrs`, if one fits.
    fn hint(
        &mut self,
        kind: InstKind,
        attrs: &[(&str, Operand)],
        valid: impl Fn(&Decision) -> bool,
    ) -> Option<Decision> {
        self.hints.as_mut()?.take(kind, attrs, valid)
    }

    /// Turns off (or back on) the copy of the program each primitive takes to restore it
    /// if it fails. Off only while the caller drops the schedule on the first error and so
    /// never uses a program a failed primitive left behind: `replay`, which returns the
    /// error alone, and the evolutionary search's fresh samples, dropped when
    /// [`Schedule::abandoned`]. A primitive that fails with it off marks the schedule
    /// abandoned and every later one is refused. Taking and dropping those copies was about
    /// a third of the evolutionary search's time.
    pub(crate) fn set_rollback(&mut self, on: bool) {
        self.rollback = on;
    }

    /// Makes room for `insts` more instructions and `rvs` more rvs (a replay knows its
    /// trace's length).
    pub(crate) fn reserve(&mut self, insts: usize, rvs: usize) {
        self.trace.insts.reserve(insts);
        self.trace.rvs.reserve(rvs);
        self.values.reserve(rvs);
    }

    /// Whether the failed primitives restore the program (see [`Schedule::set_rollback`]).
    pub(crate) fn rolls_back(&self) -> bool {
        self.rollback
    }

    /// Whether a primitive failed while the program was not restored on failure: the
    /// program may be half transformed and must not be used.
    pub(crate) fn abandoned(&self) -> bool {
        self.abandoned
    }

    /// Turns the verifier after each primitive off (it is on by default).
    pub fn without_verifier(mut self) -> Schedule {
        self.verify = false;
        self
    }

    pub fn program(&self) -> &Program {
        &self.prog
    }
    pub fn into_program(self) -> Program {
        self.prog
    }
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The name an rv prints as.
    pub fn rv_name(&self, rv: u32) -> &str {
        self.trace
            .rvs
            .get(rv as usize)
            .map_or("?", |r| r.name.as_str())
    }

    // ----- rv resolution ----------------------------------------------------------------

    /// The block an rv names, if it is still live.
    pub fn block_id(&self, rv: BlockRv) -> Result<BlockId> {
        match self.values.get(rv.0 as usize) {
            Some(RvValue::Block(b)) if self.prog.is_live(Node::Block(*b)) => Ok(*b),
            Some(RvValue::Block(_)) => Err(ScheduleError::StaleRv {
                rv: self.rv_name(rv.0).into(),
                kind: "block",
            }),
            _ => Err(ScheduleError::RvKind {
                rv: self.rv_name(rv.0).into(),
                expected: "block",
            }),
        }
    }
    /// The loop an rv names, if it is still live.
    pub fn loop_id(&self, rv: LoopRv) -> Result<LoopId> {
        match self.values.get(rv.0 as usize) {
            Some(RvValue::Loop(l)) if self.prog.is_live(Node::Loop(*l)) => Ok(*l),
            Some(RvValue::Loop(_)) => Err(ScheduleError::StaleRv {
                rv: self.rv_name(rv.0).into(),
                kind: "loop",
            }),
            _ => Err(ScheduleError::RvKind {
                rv: self.rv_name(rv.0).into(),
                expected: "loop",
            }),
        }
    }
    /// The value of a sampled integer.
    pub fn value(&self, rv: ExprRv) -> Result<i64> {
        match self.values.get(rv.0 as usize) {
            Some(RvValue::Int(v)) => Ok(*v),
            _ => Err(ScheduleError::RvKind {
                rv: self.rv_name(rv.0).into(),
                expected: "sampled integer",
            }),
        }
    }
    fn int(&self, a: &IntArg) -> Result<i64> {
        match a {
            IntArg::Lit(v) => Ok(*v),
            IntArg::Rv(r) => self.value(*r),
            IntArg::Product(fs) => fs.iter().try_fold(1i64, |acc, f| {
                let v = self.int(f)?;
                acc.checked_mul(v)
                    .ok_or_else(|| ScheduleError::InvalidArgument {
                        what: "product",
                        reason: "overflow".into(),
                    })
            }),
        }
    }
    fn int_operand(a: &IntArg) -> Operand {
        match a {
            IntArg::Lit(v) => Operand::Int(*v),
            IntArg::Rv(r) => Operand::Rv(r.0),
            // A product of one factor is recorded as that factor, so that the trace is
            // written as it validates (a product of one factor was refused on reading).
            IntArg::Product(fs) if fs.len() == 1 => Self::int_operand(&fs[0]),
            IntArg::Product(fs) => Operand::Product(fs.iter().map(Self::int_operand).collect()),
        }
    }

    // ----- recording --------------------------------------------------------------------

    /// Runs a transformation of the program; on error or failed verification restores it.
    fn transact<T>(
        &mut self,
        primitive: &'static str,
        f: impl FnOnce(&mut Program) -> Result<T>,
    ) -> Result<T> {
        if self.abandoned {
            return Err(ScheduleError::Abandoned { primitive });
        }
        let backup = self.rollback.then(|| self.prog.clone());
        let out = f(&mut self.prog).and_then(|v| match self.verify {
            true => post_check(&self.prog)
                .map(|()| v)
                .map_err(|reason| ScheduleError::Verify { primitive, reason }),
            false => Ok(v),
        });
        match (&out, backup) {
            (Err(_), Some(backup)) => self.prog = backup,
            (Err(_), None) => self.abandoned = true,
            (Ok(_), _) => {}
        }
        out
    }

    /// [`Schedule::transact`] for a primitive that changes annotations or a buffer's
    /// storage hints (`align`, `swizzle`) alone. The verifier reads none of them (its
    /// invariants, `ir::verify`, are about the tree, bindings, accesses, buffer kinds and
    /// shapes, and loop kinds), so the program passes it as it did before the primitive
    /// and it is not run again; the primitive checks what it sets itself (a software
    /// pipeline is planned where it is annotated).
    fn transact_annotations<T>(
        &mut self,
        primitive: &'static str,
        f: impl FnOnce(&mut Program) -> Result<T>,
    ) -> Result<T> {
        let verify = std::mem::replace(&mut self.verify, false);
        let out = self.transact(primitive, f);
        self.verify = verify;
        out
    }

    fn default_name(&self, kind: RvKind, value: &RvValue, taken: &HashSet<String>) -> String {
        let base = match (kind, value) {
            (RvKind::Loop, RvValue::Loop(l)) => self.prog.loop_name(*l).to_string(),
            (RvKind::Block, _) => format!(
                "b{}",
                self.trace
                    .rvs
                    .iter()
                    .filter(|r| r.kind == RvKind::Block)
                    .count()
            ),
            _ => format!(
                "v{}",
                self.trace
                    .rvs
                    .iter()
                    .filter(|r| r.kind == RvKind::Expr)
                    .count()
            ),
        };
        crate::ir::fresh_name(&base, |n| taken.contains(n))
    }

    fn record(
        &mut self,
        kind: InstKind,
        inputs: Vec<Operand>,
        attrs: Vec<(&str, Operand)>,
        decision: Option<Decision>,
        outs: Vec<RvValue>,
    ) -> Vec<u32> {
        let mut names = self.next_names.take().unwrap_or_default();
        let out_kind = kind.signature().output;
        // The names in use, gathered only when a default name is needed (replay gives
        // every name).
        let mut taken: Option<HashSet<String>> = None;
        let mut ids = Vec::new();
        for (i, v) in outs.into_iter().enumerate() {
            let rk = match v {
                RvValue::Block(_) => RvKind::Block,
                RvValue::Loop(_) => RvKind::Loop,
                RvValue::Int(_) => RvKind::Expr,
            };
            debug_assert!(out_kind.is_none_or(|k| k == rk));
            let name = match names.get_mut(i).map(std::mem::take) {
                Some(n) => {
                    if let Some(taken) = taken.as_mut() {
                        taken.insert(n.clone());
                    }
                    n
                }
                None => {
                    let taken = taken.get_or_insert_with(|| {
                        self.trace.rvs.iter().map(|r| r.name.clone()).collect()
                    });
                    let name = self.default_name(rk, &v, taken);
                    taken.insert(name.clone());
                    name
                }
            };
            self.trace.rvs.push(RvInfo { kind: rk, name });
            self.values.push(v);
            ids.push(self.trace.rvs.len() as u32 - 1);
        }
        self.trace.insts.push(Instruction {
            kind,
            inputs,
            attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            outputs: ids.clone(),
            decision,
        });
        ids
    }

    // ----- lookup -----------------------------------------------------------------------

    /// `get_block(name)`.
    pub fn get_block(&mut self, name: &str) -> Result<BlockRv> {
        let b = get::get_block(&self.prog, name)?;
        let ids = self.record(
            InstKind::GetBlock,
            vec![],
            vec![("name", Operand::Str(name.into()))],
            None,
            vec![RvValue::Block(b)],
        );
        Ok(BlockRv(ids[0]))
    }

    /// `get_loops(block)`: the loops around the block, outermost first.
    pub fn get_loops(&mut self, block: BlockRv) -> Result<Vec<LoopRv>> {
        let b = self.block_id(block)?;
        let loops = get::get_loops(&self.prog, b);
        let ids = self.record(
            InstKind::GetLoops,
            vec![Operand::Rv(block.0)],
            vec![],
            None,
            loops.into_iter().map(RvValue::Loop).collect(),
        );
        Ok(ids.into_iter().map(LoopRv).collect())
    }

    /// `get_consumers(block)`.
    pub fn get_consumers(&mut self, block: BlockRv) -> Result<Vec<BlockRv>> {
        let b = self.block_id(block)?;
        let bs = get::get_consumers(&self.prog, b);
        let ids = self.record(
            InstKind::GetConsumers,
            vec![Operand::Rv(block.0)],
            vec![],
            None,
            bs.into_iter().map(RvValue::Block).collect(),
        );
        Ok(ids.into_iter().map(BlockRv).collect())
    }

    /// `get_producers(block)`.
    pub fn get_producers(&mut self, block: BlockRv) -> Result<Vec<BlockRv>> {
        let b = self.block_id(block)?;
        let bs = get::get_producers(&self.prog, b);
        let ids = self.record(
            InstKind::GetProducers,
            vec![Operand::Rv(block.0)],
            vec![],
            None,
            bs.into_iter().map(RvValue::Block).collect(),
        );
        Ok(ids.into_iter().map(BlockRv).collect())
    }

    // ----- loop transformations ---------------------------------------------------------

    /// `split(loop, factors)`; one factor may be `None` (inferred).
    pub fn split(&mut self, lp: LoopRv, factors: &[Option<IntArg>]) -> Result<Vec<LoopRv>> {
        let l = self.loop_id(lp)?;
        let values: Vec<Option<i64>> = factors
            .iter()
            .map(|f| f.as_ref().map(|a| self.int(a)).transpose())
            .collect::<Result<_>>()?;
        let new = self.transact("split", |p| loop_transformation::split(p, l, &values))?;
        let ops = factors
            .iter()
            .map(|f| f.as_ref().map_or(Operand::None, Self::int_operand))
            .collect();
        let ids = self.record(
            InstKind::Split,
            vec![Operand::Rv(lp.0)],
            vec![("factors", Operand::List(ops))],
            None,
            new.into_iter().map(RvValue::Loop).collect(),
        );
        Ok(ids.into_iter().map(LoopRv).collect())
    }

    /// `fuse(loops...)`.
    pub fn fuse(&mut self, loops: &[LoopRv]) -> Result<LoopRv> {
        let ls: Vec<LoopId> = loops
            .iter()
            .map(|l| self.loop_id(*l))
            .collect::<Result<_>>()?;
        let f = self.transact("fuse", |p| loop_transformation::fuse(p, &ls))?;
        let ids = self.record(
            InstKind::Fuse,
            loops.iter().map(|l| Operand::Rv(l.0)).collect(),
            vec![],
            None,
            vec![RvValue::Loop(f)],
        );
        Ok(LoopRv(ids[0]))
    }

    /// `reorder(loops...)`.
    pub fn reorder(&mut self, loops: &[LoopRv]) -> Result<()> {
        let ls: Vec<LoopId> = loops
            .iter()
            .map(|l| self.loop_id(*l))
            .collect::<Result<_>>()?;
        self.transact("reorder", |p| loop_transformation::reorder(p, &ls))?;
        self.record(
            InstKind::Reorder,
            loops.iter().map(|l| Operand::Rv(l.0)).collect(),
            vec![],
            None,
            vec![],
        );
        Ok(())
    }

    // ----- loop kinds and annotations ---------------------------------------------------

    /// `bind(loop, thread)`.
    pub fn bind(&mut self, lp: LoopRv, thread: &str) -> Result<()> {
        let l = self.loop_id(lp)?;
        self.transact("bind", |p| annotation::bind(p, l, thread))?;
        self.record(
            InstKind::Bind,
            vec![Operand::Rv(lp.0)],
            vec![("thread", Operand::Str(thread.into()))],
            None,
            vec![],
        );
        Ok(())
    }

    /// `vectorize(loop)`.
    pub fn vectorize(&mut self, lp: LoopRv) -> Result<()> {
        let l = self.loop_id(lp)?;
        self.transact("vectorize", |p| annotation::vectorize(p, l))?;
        self.record(
            InstKind::Vectorize,
            vec![Operand::Rv(lp.0)],
            vec![],
            None,
            vec![],
        );
        Ok(())
    }

    /// `tensorize(loop, intrin)`: the loop nest rooted at `loop` is to be replaced by a
    /// tensor-core intrinsic (`ir::tensorize`).
    pub fn tensorize(&mut self, lp: LoopRv, intrin: &str) -> Result<()> {
        let l = self.loop_id(lp)?;
        self.transact("tensorize", |p| annotation::tensorize(p, l, intrin))?;
        self.record(
            InstKind::Tensorize,
            vec![Operand::Rv(lp.0)],
            vec![("intrin", Operand::Str(intrin.into()))],
            None,
            vec![],
        );
        Ok(())
    }

    /// `unroll(loop)`.
    pub fn unroll(&mut self, lp: LoopRv) -> Result<()> {
        let l = self.loop_id(lp)?;
        self.transact("unroll", |p| annotation::unroll(p, l))?;
        self.record(
            InstKind::Unroll,
            vec![Operand::Rv(lp.0)],
            vec![],
            None,
            vec![],
        );
        Ok(())
    }

    /// `parallel(loop)`.
    pub fn parallel(&mut self, lp: LoopRv) -> Result<()> {
        let l = self.loop_id(lp)?;
        self.transact("parallel", |p| annotation::parallel(p, l))?;
        self.record(
            InstKind::Parallel,
            vec![Operand::Rv(lp.0)],
            vec![],
            None,
            vec![],
        );
        Ok(())
    }

    /// `annotate(block_or_loop, key, value)`.
    pub fn annotate(&mut self, target: Target, key: &str, value: AnnArg) -> Result<()> {
        let (t, op) = match target {
            Target::Block(b) => (AnnTarget::Block(self.block_id(b)?), Operand::Rv(b.0)),
            Target::Loop(l) => (AnnTarget::Loop(self.loop_id(l)?), Operand::Rv(l.0)),
        };
        let (v, vop) = match &value {
            AnnArg::Int(i) => (AnnValue::Int(*i), Operand::Int(*i)),
            AnnArg::Str(s) => (AnnValue::Str(s.clone()), Operand::Str(s.clone())),
            AnnArg::Rv(r) => (AnnValue::Int(self.value(*r)?), Operand::Rv(r.0)),
            AnnArg::List(items) => (
                AnnValue::Ints(items.iter().map(|a| self.int(a)).collect::<Result<_>>()?),
                Operand::List(items.iter().map(Self::int_operand).collect()),
            ),
        };
        self.transact_annotations("annotate", |p| annotation::annotate(p, t, key, v))?;
        self.record(
            InstKind::Annotate,
            vec![op],
            vec![("key", Operand::Str(key.into())), ("value", vop)],
            None,
            vec![],
        );
        Ok(())
    }

    /// `storage_swizzle(block, buffer_index)`.
    pub fn storage_swizzle(&mut self, block: BlockRv, buffer_index: i64) -> Result<()> {
        let b = self.block_id(block)?;
        self.transact_annotations("storage_swizzle", |p| {
            annotation::storage_swizzle(p, b, buffer_index)
        })?;
        self.record(
            InstKind::StorageSwizzle,
            vec![Operand::Rv(block.0)],
            vec![("buffer_index", Operand::Int(buffer_index))],
            None,
            vec![],
        );
        Ok(())
    }

    /// `storage_widen(block, buffer_index)`.
    pub fn storage_widen(&mut self, block: BlockRv, buffer_index: i64) -> Result<()> {
        let b = self.block_id(block)?;
        self.transact("storage_widen", |p| {
            layout::storage_widen(p, b, buffer_index)
        })?;
        self.record(
            InstKind::StorageWiden,
            vec![Operand::Rv(block.0)],
            vec![("buffer_index", Operand::Int(buffer_index))],
            None,
            vec![],
        );
        Ok(())
    }

    /// `storage_align(block, buffer_index, axis, factor, offset)`.
    pub fn storage_align(
        &mut self,
        block: BlockRv,
        buffer_index: i64,
        axis: i64,
        factor: i64,
        offset: i64,
    ) -> Result<()> {
        let b = self.block_id(block)?;
        self.transact_annotations("storage_align", |p| {
            annotation::storage_align(p, b, buffer_index, axis, factor, offset)
        })?;
        self.record(
            InstKind::StorageAlign,
            vec![Operand::Rv(block.0)],
            vec![
                ("buffer_index", Operand::Int(buffer_index)),
                ("axis", Operand::Int(axis)),
                ("factor", Operand::Int(factor)),
                ("offset", Operand::Int(offset)),
            ],
            None,
            vec![],
        );
        Ok(())
    }

    /// `split_layout(block, buffer_index, axis, factor)`: axis `axis` of the buffer the
    /// block writes stored as two, `[extent / factor, factor]` (a sampled factor keeps the
    /// split with the tile it follows when a mutation changes it).
    pub fn split_layout(
        &mut self,
        block: BlockRv,
        buffer_index: i64,
        axis: i64,
        factor: IntArg,
    ) -> Result<()> {
        let b = self.block_id(block)?;
        let f = self.int(&factor)?;
        self.transact("split_layout", |p| {
            layout::split_layout(p, b, buffer_index, axis, f)
        })?;
        self.record(
            InstKind::SplitLayout,
            vec![Operand::Rv(block.0)],
            vec![
                ("buffer_index", Operand::Int(buffer_index)),
                ("axis", Operand::Int(axis)),
                ("factor", Self::int_operand(&factor)),
            ],
            None,
            vec![],
        );
        Ok(())
    }

    /// `transform_layout(block, buffer_index, permutation)`: the buffer the block writes is
    /// stored with its axes permuted (new axis `i` is old axis `permutation[i]`) and, where
    /// an entry is a group of old axes, those fused row-major into one new axis. Printed
    /// as `permutation=[1, 0]` or `permutation=[0, 1, [2, 3]]`.
    pub fn transform_layout(
        &mut self,
        block: BlockRv,
        buffer_index: i64,
        permutation: &[Vec<i64>],
    ) -> Result<()> {
        let b = self.block_id(block)?;
        self.transact("transform_layout", |p| {
            layout::transform_layout(p, b, buffer_index, permutation)
        })?;
        let entry = |g: &Vec<i64>| match g.as_slice() {
            [x] => Operand::Int(*x),
            _ => Operand::List(g.iter().map(|x| Operand::Int(*x)).collect()),
        };
        self.record(
            InstKind::TransformLayout,
            vec![Operand::Rv(block.0)],
            vec![
                ("buffer_index", Operand::Int(buffer_index)),
                (
                    "permutation",
                    Operand::List(permutation.iter().map(entry).collect()),
                ),
            ],
            None,
            vec![],
        );
        Ok(())
    }

    // ----- caches, compute location, inlining, reduction --------------------------------

    /// `cache_read(block, read_index, scope)`: returns the copy block.
    pub fn cache_read(&mut self, block: BlockRv, read_index: i64, scope: &str) -> Result<BlockRv> {
        let b = self.block_id(block)?;
        let nb = self.transact("cache_read", |p| cache::cache_read(p, b, read_index, scope))?;
        let ids = self.record(
            InstKind::CacheRead,
            vec![Operand::Rv(block.0)],
            vec![
                ("read_index", Operand::Int(read_index)),
                ("scope", Operand::Str(scope.into())),
            ],
            None,
            vec![RvValue::Block(nb)],
        );
        Ok(BlockRv(ids[0]))
    }

    /// `read_cache(block, cache)`: `block` reads the buffer that the `cache_read` copy
    /// `cache` copies from the copy instead.
    pub fn read_cache(&mut self, block: BlockRv, cache: BlockRv) -> Result<()> {
        let (b, c) = (self.block_id(block)?, self.block_id(cache)?);
        self.transact("read_cache", |p| cache::read_cache(p, b, c))?;
        self.record(
            InstKind::ReadCache,
            vec![Operand::Rv(block.0), Operand::Rv(cache.0)],
            vec![],
            None,
            vec![],
        );
        Ok(())
    }

    /// `cache_write(block, write_index, scope)`: returns the copy-back block.
    pub fn cache_write(
        &mut self,
        block: BlockRv,
        write_index: i64,
        scope: &str,
    ) -> Result<BlockRv> {
        let b = self.block_id(block)?;
        let nb = self.transact("cache_write", |p| {
            cache::cache_write(p, b, write_index, scope)
        })?;
        let ids = self.record(
            InstKind::CacheWrite,
            vec![Operand::Rv(block.0)],
            vec![
                ("write_index", Operand::Int(write_index)),
                ("scope", Operand::Str(scope.into())),
            ],
            None,
            vec![RvValue::Block(nb)],
        );
        Ok(BlockRv(ids[0]))
    }

    /// `compute_at(block, loop)`.
    pub fn compute_at(&mut self, block: BlockRv, lp: LoopRv) -> Result<()> {
        let (b, l) = (self.block_id(block)?, self.loop_id(lp)?);
        self.transact("compute_at", |p| compute_at::compute_at(p, b, l))?;
        self.record(
            InstKind::ComputeAt,
            vec![Operand::Rv(block.0), Operand::Rv(lp.0)],
            vec![],
            None,
            vec![],
        );
        Ok(())
    }

    /// `reverse_compute_at(block, loop)`.
    pub fn reverse_compute_at(&mut self, block: BlockRv, lp: LoopRv) -> Result<()> {
        let (b, l) = (self.block_id(block)?, self.loop_id(lp)?);
        self.transact("reverse_compute_at", |p| {
            compute_at::reverse_compute_at(p, b, l)
        })?;
        self.record(
            InstKind::ReverseComputeAt,
            vec![Operand::Rv(block.0), Operand::Rv(lp.0)],
            vec![],
            None,
            vec![],
        );
        Ok(())
    }

    /// `serial_sum_at(block, loop)`: the split-K sum `block` run in the kernel of its
    /// partials, under blockIdx loop `loop`, by the last split to arrive at each tile.
    pub fn serial_sum_at(&mut self, block: BlockRv, lp: LoopRv) -> Result<()> {
        let (b, l) = (self.block_id(block)?, self.loop_id(lp)?);
        self.transact("serial_sum_at", |p| {
            super::serial_sum::serial_sum_at(p, b, l)
        })?;
        self.record(
            InstKind::SerialSumAt,
            vec![Operand::Rv(block.0), Operand::Rv(lp.0)],
            vec![],
            None,
            vec![],
        );
        Ok(())
    }

    /// `compute_inline(block)`.
    pub fn compute_inline(&mut self, block: BlockRv) -> Result<()> {
        let b = self.block_id(block)?;
        self.transact("compute_inline", |p| inline::compute_inline(p, b))?;
        self.record(
            InstKind::ComputeInline,
            vec![Operand::Rv(block.0)],
            vec![],
            None,
            vec![],
        );
        Ok(())
    }

    /// `reverse_compute_inline(block)`.
    pub fn reverse_compute_inline(&mut self, block: BlockRv) -> Result<()> {
        let b = self.block_id(block)?;
        self.transact("reverse_compute_inline", |p| {
            inline::reverse_compute_inline(p, b)
        })?;
        self.record(
            InstKind::ReverseComputeInline,
            vec![Operand::Rv(block.0)],
            vec![],
            None,
            vec![],
        );
        Ok(())
    }

    /// `decompose_reduction(block, loop)`: returns the init block.
    pub fn decompose_reduction(&mut self, block: BlockRv, lp: LoopRv) -> Result<BlockRv> {
        let (b, l) = (self.block_id(block)?, self.loop_id(lp)?);
        let ib = self.transact("decompose_reduction", |p| {
            reduction::decompose_reduction(p, b, l)
        })?;
        let ids = self.record(
            InstKind::DecomposeReduction,
            vec![Operand::Rv(block.0), Operand::Rv(lp.0)],
            vec![],
            None,
            vec![RvValue::Block(ib)],
        );
        Ok(BlockRv(ids[0]))
    }

    /// `rfactor(loop, factor_axis)`: the reduction under `loop` writes partial results
    /// indexed by the loop (a new axis at `factor_axis`) and the original block sums them.
    /// Returns the rf block; the original block's rv stands for the write-back.
    pub fn rfactor(&mut self, lp: LoopRv, factor_axis: i64) -> Result<BlockRv> {
        let l = self.loop_id(lp)?;
        let rb = self.transact("rfactor", |p| rfactor::rfactor(p, l, factor_axis))?;
        let ids = self.record(
            InstKind::Rfactor,
            vec![Operand::Rv(lp.0)],
            vec![("factor_axis", Operand::Int(factor_axis))],
            None,
            vec![RvValue::Block(rb)],
        );
        Ok(BlockRv(ids[0]))
    }

    /// `im2col(block)`: rewrites a convolution as a GEMM over two-dimensional buffers, with
    /// stages for its data and weights and an elementwise block storing the result back
    /// (see [`im2col`]); the block keeps its name and handle.
    pub fn im2col(&mut self, block: BlockRv) -> Result<im2col::Im2col> {
        let b = self.block_id(block)?;
        let made = self.transact("im2col", |p| im2col::im2col(p, b))?;
        self.record(
            InstKind::Im2col,
            vec![Operand::Rv(block.0)],
            vec![],
            None,
            vec![],
        );
        Ok(made)
    }

    /// `pad_einsum(block, padding)`: pads the einsum's iteration variables to multiples of
    /// `padding` (one per iteration variable), reading inputs through zero-filled padded
    /// stages and writing a padded output copied back (see [`pad_einsum`]).
    pub fn pad_einsum(&mut self, block: BlockRv, padding: &[IntArg]) -> Result<()> {
        let b = self.block_id(block)?;
        let values: Vec<i64> = padding.iter().map(|a| self.int(a)).collect::<Result<_>>()?;
        self.transact("pad_einsum", |p| pad_einsum::pad_einsum(p, b, &values))?;
        self.record(
            InstKind::PadEinsum,
            vec![Operand::Rv(block.0)],
            vec![(
                "padding",
                Operand::List(padding.iter().map(Self::int_operand).collect()),
            )],
            None,
            vec![],
        );
        Ok(())
    }

    // ----- sampling ---------------------------------------------------------------------

    /// The extent of the loop a tile-sampling instruction splits, after checking its level
    /// count `n` (1..=16); `what` names the argument in the error.
    pub(crate) fn tiled_extent(&self, lp: LoopRv, n: i64, what: &'static str) -> Result<i64> {
        let l = self.loop_id(lp)?;
        if !(1..=16).contains(&n) {
            return Err(ScheduleError::InvalidArgument {
                what,
                reason: format!("{n} is not in 1..=16"),
            });
        }
        Ok(self.prog.lp(l).extent)
    }

    /// `sample_perfect_tile(loop, n, max_innermost_factor)`: `n` factors of the loop's
    /// extent. With `decision`, checks and uses it instead of sampling.
    pub fn sample_perfect_tile(
        &mut self,
        lp: LoopRv,
        n: i64,
        max_innermost: i64,
        decision: Option<Vec<i64>>,
    ) -> Result<Vec<ExprRv>> {
        let extent = self.tiled_extent(lp, n, "sample_perfect_tile n")?;
        let attrs = [
            ("n", Operand::Int(n)),
            ("max_innermost_factor", Operand::Int(max_innermost)),
        ];
        let hinted = self.hint(InstKind::SamplePerfectTile, &attrs, |d| {
            matches!(d, Decision::Tile(t) if sampling::check_tile(extent, n as usize, max_innermost, t).is_ok())
        });
        let decision = match hinted {
            Some(Decision::Tile(t)) => Some(t),
            _ => decision,
        };
        let tiles = match decision {
            Some(t) => {
                sampling::check_tile(extent, n as usize, max_innermost, &t).map_err(|reason| {
                    ScheduleError::InvalidDecision {
                        instruction: format!("sample_perfect_tile({})", self.rv_name(lp.0)),
                        decision: format!("{t:?}"),
                        reason,
                    }
                })?;
                t
            }
            None => sampling::sample_tile(&mut self.rng, extent, n as usize, max_innermost)?,
        };
        let ids = self.record(
            InstKind::SamplePerfectTile,
            vec![Operand::Rv(lp.0)],
            attrs.to_vec(),
            Some(Decision::Tile(tiles.clone())),
            tiles.into_iter().map(RvValue::Int).collect(),
        );
        Ok(ids.into_iter().map(ExprRv).collect())
    }

    /// `sample_tile(loop, n, max_innermost_factor, max_waste)`: `n` factors whose product
    /// covers the loop's extent, perhaps exceeding it (the split then gets a predicate) by
    /// at most `max_waste` of the padded iterations. With `decision`, checks and uses it
    /// instead of sampling; a decision that pads more is refused, naming the loop.
    pub fn sample_tile(
        &mut self,
        lp: LoopRv,
        n: i64,
        max_innermost: i64,
        max_waste: f64,
        decision: Option<Vec<i64>>,
    ) -> Result<Vec<ExprRv>> {
        let extent = self.tiled_extent(lp, n, "sample_tile n")?;
        let l = self.loop_id(lp)?;
        let attrs = [
            ("n", Operand::Int(n)),
            ("max_innermost_factor", Operand::Int(max_innermost)),
            ("max_waste", Operand::Float(max_waste)),
        ];
        let hinted = self.hint(InstKind::SampleTile, &attrs, |d| {
            matches!(d, Decision::Tile(t) if sampling::check_imperfect_tile(extent, n as usize, max_innermost, max_waste, t).is_ok())
        });
        let decision = match hinted {
            Some(Decision::Tile(t)) => Some(t),
            _ => decision,
        };
        let tiles = match decision {
            Some(t) => {
                sampling::check_imperfect_tile(extent, n as usize, max_innermost, max_waste, &t)
                    .map_err(|reason| ScheduleError::InvalidDecision {
                        instruction: format!(
                            "sample_tile({}) of loop {}",
                            self.rv_name(lp.0),
                            self.prog.loop_name(l)
                        ),
                        decision: format!("{t:?}"),
                        reason,
                    })?;
                t
            }
            None => sampling::sample_imperfect_tile(
                &mut self.rng,
                extent,
                n as usize,
                max_innermost,
                max_waste,
            )?,
        };
        let ids = self.record(
            InstKind::SampleTile,
            vec![Operand::Rv(lp.0)],
            attrs.to_vec(),
            Some(Decision::Tile(tiles.clone())),
            tiles.into_iter().map(RvValue::Int).collect(),
        );
        Ok(ids.into_iter().map(ExprRv).collect())
    }

    /// `sample_categorical(candidates, probs)`: one of the candidates. With `decision`
    /// (an index), checks and uses it instead of sampling.
    pub fn sample_categorical(
        &mut self,
        candidates: &[i64],
        probs: &[f64],
        decision: Option<usize>,
    ) -> Result<ExprRv> {
        if candidates.is_empty() || candidates.len() != probs.len() {
            return Err(ScheduleError::InvalidArgument {
                what: "sample_categorical",
                reason: format!(
                    "{} candidates and {} probabilities",
                    candidates.len(),
                    probs.len()
                ),
            });
        }
        let attrs = [
            (
                "candidates",
                Operand::List(candidates.iter().map(|c| Operand::Int(*c)).collect()),
            ),
            (
                "probs",
                Operand::List(probs.iter().map(|p| Operand::Float(*p)).collect()),
            ),
        ];
        let hinted = self.hint(
            InstKind::SampleCategorical,
            &attrs,
            |d| matches!(d, Decision::Categorical(i) if *i < candidates.len()),
        );
        let decision = match hinted {
            Some(Decision::Categorical(i)) => Some(i),
            _ => decision,
        };
        let index = match decision {
            Some(i) if i < candidates.len() => i,
            Some(i) => {
                return Err(ScheduleError::InvalidDecision {
                    instruction: "sample_categorical".into(),
                    decision: i.to_string(),
                    reason: format!("there are {} candidates", candidates.len()),
                })
            }
            None => sampling::sample_index(&mut self.rng, probs)?,
        };
        let ids = self.record(
            InstKind::SampleCategorical,
            vec![],
            attrs.to_vec(),
            Some(Decision::Categorical(index)),
            vec![RvValue::Int(candidates[index])],
        );
        Ok(ExprRv(ids[0]))
    }

    /// `sample_compute_location(block, locations)`: one of `locations`, the loops a sketch
    /// rule may `compute_at` (`reverse_compute_at`) `block` at, drawn uniformly; the rule
    /// then places the block at the loop returned, so where it goes is a decision of the
    /// trace. With `decision` (an index into `locations`), checks and uses it instead.
    pub fn sample_compute_location(
        &mut self,
        block: BlockRv,
        locations: &[LoopRv],
        decision: Option<usize>,
    ) -> Result<LoopRv> {
        let b = self.block_id(block)?;
        if locations.is_empty() {
            return Err(ScheduleError::InvalidArgument {
                what: "sample_compute_location",
                reason: format!("no locations for block {}", self.prog.block(b).name),
            });
        }
        let loops = locations
            .iter()
            .map(|l| self.loop_id(*l))
            .collect::<Result<Vec<_>>>()?;
        let count = loops.len();
        let hinted = self.hint(
            InstKind::SampleComputeLocation,
            &[],
            |d| matches!(d, Decision::Categorical(i) if *i < count),
        );
        let decision = match hinted {
            Some(Decision::Categorical(i)) => Some(i),
            _ => decision,
        };
        let index = match decision {
            Some(i) if i < loops.len() => i,
            Some(i) => {
                return Err(ScheduleError::InvalidDecision {
                    instruction: format!(
                        "sample_compute_location of block {}",
                        self.prog.block(b).name
                    ),
                    decision: i.to_string(),
                    reason: format!("there are {} locations", loops.len()),
                })
            }
            None => sampling::sample_index(&mut self.rng, &vec![1.0; loops.len()])?,
        };
        let ids = self.record(
            InstKind::SampleComputeLocation,
            vec![
                Operand::Rv(block.0),
                Operand::List(locations.iter().map(|l| Operand::Rv(l.0)).collect()),
            ],
            vec![],
            Some(Decision::Categorical(index)),
            vec![RvValue::Loop(loops[index])],
        );
        Ok(LoopRv(ids[0]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A schedule of a small matmul and its output block (which cannot be inlined).
    fn matmul() -> (Schedule, BlockRv) {
        let program = crate::workload::preset("matmul:8x8x8")
            .expect("preset")
            .to_program();
        let out = program.block(program.blocks_in_order()[0]).name.clone();
        let mut sch = Schedule::new(program, 0);
        let b = sch.get_block(&out).expect("the output block");
        (sch, b)
    }

    #[test]
    fn a_failure_without_rollback_abandons_the_schedule() {
        let (mut sch, b) = matmul();
        sch.set_rollback(false);
        assert!(sch.compute_inline(b).is_err());
        assert!(sch.abandoned());
        let loops = sch.get_loops(b).expect("loops");
        assert!(matches!(
            sch.split(loops[0], &[None, Some(IntArg::Lit(2))]),
            Err(ScheduleError::Abandoned { primitive: "split" })
        ));
    }

    #[test]
    fn a_failure_with_rollback_leaves_the_program_and_the_schedule_usable() {
        let (mut sch, b) = matmul();
        let before = sch.program().clone();
        assert!(sch.compute_inline(b).is_err());
        assert!(!sch.abandoned());
        assert_eq!(sch.program(), &before);
        let loops = sch.get_loops(b).expect("loops");
        assert!(sch.split(loops[0], &[None, Some(IntArg::Lit(2))]).is_ok());
    }
}
