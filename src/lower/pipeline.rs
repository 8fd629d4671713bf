//! Software pipelining of a shared-memory fetch with `cp.async` (a loop annotated with
//! `software_pipeline_stage`; `ir::pipeline` says which loops qualify).
//!
//! It runs on the kernel IR after compaction and barrier insertion, so every index is a
//! flat index into one iteration's compacted region. For a loop `k` of extent `K` with
//! `S` stages:
//!
//! 1. **Multi-buffering.** Every shared buffer the fetches fill gets `S` copies: its alloc
//!    grows to `S` times its per-stage size (rounded up to 16 bytes, so every copy keeps
//!    the alignment of vector copies), and iteration `j` uses copy `j mod S` (the offset
//!    `(j mod S) * stage_size` added to its flat index: a leading axis of `S`).
//! 2. **Asynchronous copies.** A fetch store that copies a global element (or a float2 /
//!    float4 vector, or 4, 8 or 16 bytes of 16-bit elements) into the buffer, possibly zero-padded
//!    (`select(c, load, 0)`), becomes a [`KStmt::CpAsync`] (the padding its `valid`
//!    operand); other fetch stores (a transposed store of one element) stay ordinary
//!    stores into the multi-buffer, issued at the same stage.
//!    With [`Plan::register_fetch`] (`software_pipeline_register_fetch`), a transposing
//!    vector fetch (a vectorized loop that copies a global float2/float4 to elements
//!    scattered over a reduction-major tile's rows) is staged in registers instead: its
//!    vector is loaded into a slot of a thread-local staging array where the fetch is
//!    issued, and the slot's lanes are stored into the tile after the iteration's compute,
//!    under the same loops and guards (the loops around it unrolled, so the slot is a
//!    constant and the array stays in registers). The load's latency is then hidden by
//!    the compute, as CUTLASS's SIMT kernels hide theirs, and a vector costs one load and
//!    `lanes` shared stores instead of `lanes` 4-byte copies. The stores go into the copy
//!    that iteration `k - 1` read, which every thread finished before this iteration's
//!    barrier; the next iteration's barrier makes them visible. At most
//!    [`MAX_STAGED_ELEMENTS`] a thread are staged; beyond, and where the compute is
//!    asynchronous (below), the fetch stays as it is.
//! 3. **Prologue, body.** The fetches of iterations `0 .. S-2` are issued before the loop,
//!    each committed as a group; iteration `k` then waits until at most `S - 2` groups
//!    are in flight (its own fetch has landed for this thread), synchronizes the block
//!    (every thread's copies of iteration `k` are visible, and every thread has finished
//!    computing iteration `k - 1`, whose buffer copy the next fetch overwrites), issues
//!    the fetch of iteration `k + S - 1` (guarded at the tail; the group is committed
//!    even when empty so that the count stays uniform), and computes iteration `k`.
//!    Where the compute is asynchronous (`wgmma` nests, whose instructions run on after
//!    the threads issued them), the fetch is issued after the compute instead, so that
//!    the copies are issued while the tensor cores work, and the iteration ends waiting
//!    until one `wgmma` group is left in flight (`MmaOp::WgmmaWait(1)`, with 4 stages or
//!    more; none with fewer, where the fetch would run only one iteration ahead): the
//!    fetch then runs `S - 2` iterations ahead (the
//!    prologue issuing as many), into the
//!    copy that iteration `k - 2` read, whose group every thread has seen complete before
//!    the barrier.
//!    The barriers the barrier pass put in the loop body are replaced by that one; a
//!    barrier after the loop keeps a later overwrite of the buffers (the next iteration
//!    of an enclosing loop) behind every thread's last reads.

use super::kernel::{Alloc, ForKind, KStmt, Kernel, Mma, MmaOp};
use super::{LowerError, Result};
use crate::ir::interval::Interval;
use crate::ir::pipeline::Plan;
use crate::ir::simplify::simplify;
use crate::ir::{BinOp, Buffer, BufferId, BufferKind, DType, Expr, Program, Scope, VarId};
use std::collections::{BTreeMap, BTreeSet};

/// A loop of the kernel to pipeline: its variable and its plan.
#[derive(Clone, Debug)]
pub(super) struct Pipelined {
    pub var: VarId,
    pub plan: Plan,
}

/// The most elements a thread stages in registers for one pipelined loop.
pub(crate) const MAX_STAGED_ELEMENTS: i64 = 64;

/// Bytes every stage copy of a buffer is aligned to (the widest `cp.async`).
const STAGE_ALIGN_BYTES: i64 = 16;

/// Pipelines the loops `loops` of kernel `k`.
pub(super) fn apply(
    p: &mut Program,
    k: &mut Kernel,
    loops: &[Pipelined],
    ranges: &BTreeMap<VarId, i64>,
    asynchronous: &[VarId],
) -> Result<()> {
    if loops.is_empty() {
        return Ok(());
    }
    // 1. Multi-buffering: every fetched buffer's alloc holds S copies.
    let mut stage_size: BTreeMap<BufferId, i64> = BTreeMap::new();
    for l in loops {
        for buf in &l.plan.buffers {
            let alloc = k
                .allocs
                .iter_mut()
                .find(|a| a.buffer == *buf && a.scope == Scope::Shared)
                .ok_or_else(|| LowerError::Pipeline {
                    name: p.var_name(l.var).into(),
                    reason: format!("{} is not allocated in shared memory", p.buffer(*buf).name),
                })?;
            let align = STAGE_ALIGN_BYTES / p.buffer(*buf).dtype.bytes() as i64;
            let size = (alloc.size + align - 1) / align * align;
            alloc.size = size * l.plan.stages;
            stage_size.insert(*buf, size);
        }
    }
    // 2. A staging array for each loop whose transposing fetches go through registers.
    let staging: BTreeMap<VarId, BufferId> = loops
        .iter()
        .filter(|l| l.plan.register_fetch)
        .map(|l| {
            let name = format!("{}_staged", p.var_name(l.var));
            let buffer = p.new_buffer(Buffer {
                name,
                shape: vec![MAX_STAGED_ELEMENTS],
                dtype: DType::F32,
                scope: Scope::Local,
                kind: BufferKind::Intermediate,
                align: Vec::new(),
                swizzle: false,
            });
            (l.var, buffer)
        })
        .collect();
    let p: &Program = p;
    let cx = Cx {
        p,
        ranges,
        stage_size: &stage_size,
        asynchronous,
        staging: &staging,
    };
    // The loops found, with the staging elements each used.
    let mut found = BTreeMap::new();
    k.body = cx.rewrite(std::mem::take(&mut k.body), loops, &mut found)?;
    if let Some(l) = loops.iter().find(|l| !found.contains_key(&l.var)) {
        return Err(LowerError::Pipeline {
            name: p.var_name(l.var).into(),
            reason: "the loop is not part of the kernel".into(),
        });
    }
    for (var, buffer) in &staging {
        let used = found.get(var).copied().unwrap_or(0);
        if used > 0 {
            k.allocs.push(Alloc {
                buffer: *buffer,
                scope: Scope::Local,
                size: used,
                at: None,
                swizzle_row: None,
            });
        }
    }
    Ok(())
}

struct Cx<'a> {
    p: &'a Program,
    ranges: &'a BTreeMap<VarId, i64>,
    stage_size: &'a BTreeMap<BufferId, i64>,
    /// The outermost loops of nests that run asynchronously (`wgmma`).
    asynchronous: &'a [VarId],
    /// The staging array of each loop whose transposing fetches go through registers.
    staging: &'a BTreeMap<VarId, BufferId>,
}

impl Cx<'_> {
    fn simp(&self, e: &Expr) -> Expr {
        simplify(e, &|v| {
            self.ranges.get(&v).map(|&x| Interval::new(0, x - 1))
        })
    }

    /// Replaces every pipelined loop of `body` by its prologue and pipelined loop.
    fn rewrite(
        &self,
        body: Vec<KStmt>,
        loops: &[Pipelined],
        found: &mut BTreeMap<VarId, i64>,
    ) -> Result<Vec<KStmt>> {
        let mut out = Vec::with_capacity(body.len());
        for s in body {
            match s {
                KStmt::For {
                    var,
                    extent,
                    kind,
                    body,
                } => {
                    let body = self.rewrite(body, loops, found)?;
                    match loops.iter().find(|l| l.var == var) {
                        Some(l) => {
                            let (stmts, staged) =
                                self.pipeline(var, extent, kind, body, &l.plan)?;
                            let used = found.entry(var).or_insert(0);
                            *used = (*used).max(staged);
                            out.extend(stmts);
                        }
                        None => out.push(KStmt::For {
                            var,
                            extent,
                            kind,
                            body,
                        }),
                    }
                }
                KStmt::If { cond, then } => out.push(KStmt::If {
                    cond,
                    then: self.rewrite(then, loops, found)?,
                }),
                other => out.push(other),
            }
        }
        Ok(out)
    }

    /// The prologue and the pipelined loop of loop `var`, and the elements of its staging
    /// array used (0 where nothing is staged in registers).
    fn pipeline(
        &self,
        var: VarId,
        extent: i64,
        kind: ForKind,
        body: Vec<KStmt>,
        plan: &Plan,
    ) -> Result<(Vec<KStmt>, i64)> {
        let name = self.p.var_name(var).to_string();
        let stages = plan.stages;
        // 1. Fetch statements, then compute statements (comments go with the statement
        //    after them); the loop's own barriers are dropped.
        let (mut fetch, mut compute) = (Vec::new(), Vec::new());
        let mut comments = Vec::new();
        for s in body {
            match s {
                KStmt::Sync => {}
                KStmt::Comment(_) => comments.push(s),
                s => {
                    let writes = writes_of(&s);
                    let is_fetch = !writes.is_disjoint(&plan.buffers);
                    if is_fetch && (!compute.is_empty() || !writes.is_subset(&plan.buffers)) {
                        return Err(LowerError::Pipeline {
                            name,
                            reason: "the loop body is not fetches followed by compute".into(),
                        });
                    }
                    let to = if is_fetch { &mut fetch } else { &mut compute };
                    to.append(&mut comments);
                    to.push(s);
                }
            }
        }
        compute.append(&mut comments);
        if fetch.is_empty() || compute.is_empty() {
            return Err(LowerError::Pipeline {
                name,
                reason: "the loop body has no fetch or no compute statement".into(),
            });
        }
        // Asynchronous compute (`wgmma`) leaves one group in flight while the next stage
        // computes, so the fetch runs one iteration less ahead (see the module doc).
        let asynchronous = runs_any(&compute, self.asynchronous);
        // 2. Transposing vector fetches staged in registers (where the plan says so, they
        //    fit and the compute is synchronous), then asynchronous copies where the fetch
        //    is a plain copy.
        let (fetch, land, staged) = match self.staging.get(&var) {
            Some(&regs) if !asynchronous => self.stage_in_registers(fetch, regs),
            _ => (fetch, Vec::new(), 0),
        };
        let fetch = self.asyncify(fetch);
        let in_flight = i64::from(asynchronous && stages >= 4);
        let distance = stages - 1 - in_flight;
        // 3. Prologue: the fetches of iterations 0 .. distance - 1, one group each.
        let mut out = Vec::new();
        for j in 0..distance {
            out.extend(self.fetch_at(&fetch, var, &Expr::Int(j), stages));
            out.extend(self.fetch_at(&land, var, &Expr::Int(j), stages));
            out.push(KStmt::CommitGroup);
        }
        // 4. The loop: wait for this iteration's group, synchronize, issue the fetch of
        //    iteration k + S - 1 (while there is one), compute iteration k.
        //    Asynchronous compute goes before the fetch.
        let ahead = Expr::add(Expr::Var(var), Expr::Int(distance));
        let mut inner = vec![KStmt::WaitGroup(distance - 1), KStmt::Sync];
        let ahead_exists = Expr::lt(Expr::Var(var), Expr::Int(extent - distance));
        let issue = [
            KStmt::If {
                cond: ahead_exists.clone(),
                then: self.fetch_at(&fetch, var, &ahead, stages),
            },
            KStmt::CommitGroup,
        ];
        if !asynchronous {
            inner.extend(issue.clone());
        }
        let stage = stage_offset(&Expr::Var(var), stages);
        let compute = compute.into_iter().map(|s| self.offset_reads(s, &stage));
        inner.extend(fold_constant_guards(compute.collect()));
        // The staged vectors land in the copy iteration `k - 1` read.
        if !land.is_empty() {
            inner.push(KStmt::If {
                cond: ahead_exists,
                then: self.fetch_at(&land, var, &ahead, stages),
            });
        }
        if asynchronous {
            inner.extend(issue);
            inner.push(KStmt::Mma(Mma {
                op: MmaOp::WgmmaWait(in_flight),
                vars: Vec::new(),
            }));
        }
        out.push(KStmt::For {
            var,
            extent,
            kind,
            body: inner,
        });
        out.push(KStmt::Sync);
        Ok((out, staged))
    }

    /// Splits the fetch statements of a loop that stages its transposing vector fetches in
    /// registers (`regs`, see the module doc): every such copy is loaded into its slot of
    /// `regs` in the first list and stored from it in the second, under the same loops
    /// (unrolled in both) and guards; every other statement stays in the first list only.
    /// With the elements used, or the fetch unchanged (0) where the copies would need more
    /// than [`MAX_STAGED_ELEMENTS`] or there are none.
    fn stage_in_registers(
        &self,
        fetch: Vec<KStmt>,
        regs: BufferId,
    ) -> (Vec<KStmt>, Vec<KStmt>, i64) {
        let mut next = 0;
        let (issue, land) = self.split_staged(fetch.clone(), regs, &mut Vec::new(), &mut next);
        if next == 0 || next > MAX_STAGED_ELEMENTS {
            return (fetch, Vec::new(), 0);
        }
        (issue, land, next)
    }

    /// [`Self::stage_in_registers`] on `body`, inside the fetch loops `outer` (variable,
    /// extent), the staging array's next free element `next`.
    fn split_staged(
        &self,
        body: Vec<KStmt>,
        regs: BufferId,
        outer: &mut Vec<(VarId, i64)>,
        next: &mut i64,
    ) -> (Vec<KStmt>, Vec<KStmt>) {
        let (mut issue, mut land) = (Vec::new(), Vec::new());
        for s in body {
            match s {
                KStmt::For {
                    var,
                    extent,
                    kind: ForKind::Vectorized,
                    body,
                } if self.transposing_copy(&body, var, extent) => {
                    // Its vectors: one a combination of the fetch loops around it,
                    // row-major, after (and aligned like) the vectors of the copies
                    // before it.
                    let base = (*next + extent - 1) / extent * extent;
                    let slot = outer.iter().fold(Expr::Int(0), |acc, (v, e)| {
                        Expr::add(Expr::mul(acc, Expr::Int(*e)), Expr::Var(*v))
                    });
                    let slots: i64 = outer.iter().map(|(_, e)| e).product();
                    *next = base + slots * extent;
                    let at = self.simp(&Expr::add(
                        Expr::add(Expr::Int(base), Expr::mul(slot, Expr::Int(extent))),
                        Expr::Var(var),
                    ));
                    let to_regs = |s: KStmt| match s {
                        KStmt::Store { value, .. } => KStmt::Store {
                            buffer: regs,
                            indices: vec![at.clone()],
                            value,
                        },
                        other => other,
                    };
                    let from_regs = |s: KStmt| match s {
                        KStmt::Store {
                            buffer, indices, ..
                        } => KStmt::Store {
                            buffer,
                            indices,
                            value: Expr::Load(regs, vec![at.clone()]),
                        },
                        other => other,
                    };
                    let vector = |body: Vec<KStmt>| KStmt::For {
                        var,
                        extent,
                        kind: ForKind::Vectorized,
                        body,
                    };
                    issue.push(vector(
                        body.iter()
                            .cloned()
                            .map(|c| map_stmt(c, &to_regs))
                            .collect(),
                    ));
                    land.push(vector(
                        body.into_iter().map(|c| map_stmt(c, &from_regs)).collect(),
                    ));
                }
                KStmt::For {
                    var,
                    extent,
                    kind,
                    body,
                } => {
                    outer.push((var, extent));
                    let (i, l) = self.split_staged(body, regs, outer, next);
                    outer.pop();
                    // Loops around a staged copy are unrolled: its slot is then a constant.
                    let kind = if l.is_empty() {
                        kind
                    } else {
                        ForKind::Unrolled
                    };
                    issue.push(KStmt::For {
                        var,
                        extent,
                        kind,
                        body: i,
                    });
                    if !l.is_empty() {
                        land.push(KStmt::For {
                            var,
                            extent,
                            kind,
                            body: l,
                        });
                    }
                }
                KStmt::If { cond, then } => {
                    let (i, l) = self.split_staged(then, regs, outer, next);
                    issue.push(KStmt::If {
                        cond: cond.clone(),
                        then: i,
                    });
                    if !l.is_empty() {
                        land.push(KStmt::If { cond, then: l });
                    }
                }
                other => issue.push(other),
            }
        }
        (issue, land)
    }

    /// Whether a vectorized fetch loop copies one f32 vector of global memory to scattered
    /// elements of a fetched buffer (a transposing fetch).
    fn transposing_copy(&self, body: &[KStmt], lane: VarId, lanes: i64) -> bool {
        self.fetch_vector(body, lane, lanes)
            .is_some_and(|c| c.scatter && self.p.buffer(c.src).dtype == DType::F32)
    }

    /// The vector copy a vectorized fetch loop performs from global memory into a fetched
    /// buffer, contiguous or scattered.
    fn fetch_vector<'b>(
        &self,
        body: &'b [KStmt],
        lane: VarId,
        lanes: i64,
    ) -> Option<super::vector_copy::VectorCopy<'b>> {
        let copy = super::vector_copy::vector_copy(self.p, body, lane, lanes, self.ranges).ok()?;
        (self.stage_size.contains_key(&copy.dst) && self.p.buffer(copy.src).scope == Scope::Global)
            .then_some(copy)
    }

    /// The fetch statements for iteration `j`: `var` is `j` and the fetched buffers are
    /// written at copy `j mod S`.
    fn fetch_at(&self, fetch: &[KStmt], var: VarId, j: &Expr, stages: i64) -> Vec<KStmt> {
        let stage = stage_offset(j, stages);
        let sub =
            |e: &Expr| -> Expr { self.simp(&e.substitute(&|v| (v == var).then(|| j.clone()))) };
        // The iteration is substituted first: `j` may itself use `var`.
        let dst_at = |buf: BufferId, i: &Expr| -> Expr {
            let i = i.substitute(&|v| (v == var).then(|| j.clone()));
            self.simp(&self.at_stage(buf, &i, &stage))
        };
        let stmts = fetch
            .iter()
            .map(|s| {
                map_stmt(s.clone(), &|s| match s {
                    KStmt::Store {
                        buffer,
                        indices,
                        value,
                    } => KStmt::Store {
                        indices: indices.iter().map(|i| dst_at(buffer, i)).collect(),
                        buffer,
                        value: sub(&value),
                    },
                    KStmt::CpAsync {
                        dst,
                        dst_index,
                        src,
                        src_index,
                        lanes,
                        valid,
                    } => KStmt::CpAsync {
                        dst_index: dst_at(dst, &dst_index),
                        dst,
                        src,
                        src_index: sub(&src_index),
                        lanes,
                        // A condition that always holds is no condition.
                        valid: valid
                            .as_ref()
                            .map(sub)
                            .filter(|c| c.as_int().is_none_or(|v| v == 0)),
                    },
                    KStmt::If { cond, then } => KStmt::If {
                        cond: sub(&cond),
                        then,
                    },
                    other => other,
                })
            })
            .collect();
        fold_constant_guards(stmts)
    }

    /// A flat index of `buf` moved to the copy `stage` (an expression of the iteration),
    /// for fetched buffers.
    fn at_stage(&self, buf: BufferId, index: &Expr, stage: &Expr) -> Expr {
        match self.stage_size.get(&buf) {
            Some(&size) => Expr::add(index.clone(), Expr::mul(stage.clone(), Expr::Int(size))),
            None => index.clone(),
        }
    }

    /// A compute statement reading the fetched buffers at copy `stage`.
    fn offset_reads(&self, s: KStmt, stage: &Expr) -> KStmt {
        let fix = |e: &Expr| -> Expr {
            let e = e.rewrite(&mut |x| match x {
                Expr::Load(b, idx) if self.stage_size.contains_key(&b) => {
                    let i = self.at_stage(b, &idx[0], stage);
                    Expr::Load(b, vec![i])
                }
                other => other,
            });
            self.simp(&e)
        };
        map_stmt(s, &|s| match s {
            KStmt::Store {
                buffer,
                indices,
                value,
            } => KStmt::Store {
                buffer,
                indices: indices.iter().map(&fix).collect(),
                value: fix(&value),
            },
            KStmt::If { cond, then } => KStmt::If {
                cond: fix(&cond),
                then,
            },
            other => other,
        })
    }

    /// Fetch stores that copy a global element or vector become `cp.async`.
    fn asyncify(&self, body: Vec<KStmt>) -> Vec<KStmt> {
        body.into_iter()
            .map(|s| match s {
                KStmt::For {
                    var,
                    extent,
                    kind: ForKind::Vectorized,
                    body,
                } => match self.vector_copy(&body, var, extent) {
                    Some(copy) => copy,
                    // Lanes under guards of their own (an imperfect tile): one copy each.
                    None => KStmt::For {
                        var,
                        extent,
                        kind: ForKind::Vectorized,
                        body: self.asyncify(body),
                    },
                },
                KStmt::For {
                    var,
                    extent,
                    kind,
                    body,
                } => KStmt::For {
                    var,
                    extent,
                    kind,
                    body: self.asyncify(body),
                },
                KStmt::If { cond, then } => KStmt::If {
                    cond,
                    then: self.asyncify(then),
                },
                KStmt::Store {
                    buffer,
                    indices,
                    value,
                } => match self.copy_source(buffer, &value) {
                    Some((src, src_index, valid)) => KStmt::CpAsync {
                        dst: buffer,
                        dst_index: indices[0].clone(),
                        src,
                        src_index,
                        lanes: 1,
                        valid,
                    },
                    None => KStmt::Store {
                        buffer,
                        indices,
                        value,
                    },
                },
                other => other,
            })
            .collect()
    }

    /// A vectorized loop whose one store copies `lanes` contiguous global elements to
    /// contiguous shared ones, as one `cp.async` (under the loop's lane-invariant guard;
    /// zero-filled under a guard uniform over the vector). A scattered store (a transposed
    /// fetch) cannot be one copy: its lanes are copied one by one.
    fn vector_copy(&self, body: &[KStmt], lane: VarId, lanes: i64) -> Option<KStmt> {
        let copy = self.fetch_vector(body, lane, lanes)?;
        if copy.scatter {
            return None;
        }
        let at0 = |e: &Expr| super::vector_copy::at_lane(e, lane, 0, self.ranges);
        let copy_stmt = KStmt::CpAsync {
            dst: copy.dst,
            dst_index: at0(copy.dst_index),
            src: copy.src,
            src_index: at0(copy.src_index),
            lanes,
            valid: copy.valid.as_ref().map(at0),
        };
        Some(match copy.guard {
            Some(cond) => KStmt::If {
                cond: at0(cond),
                then: vec![copy_stmt],
            },
            None => copy_stmt,
        })
    }

    /// The global float32 element a store into a fetched buffer copies, and the condition
    /// under which it is not zero padding: `load` or `select(c, load, 0)`.
    fn copy_source(&self, dst: BufferId, value: &Expr) -> Option<(BufferId, Expr, Option<Expr>)> {
        if !self.stage_size.contains_key(&dst) || self.p.buffer(dst).dtype != DType::F32 {
            return None;
        }
        let (load, valid) = super::vector_copy::zero_filled(value);
        match load {
            Expr::Load(src, idx)
                if self.p.buffer(*src).scope == Scope::Global
                    && self.p.buffer(*src).dtype == DType::F32
                    && idx.len() == 1 =>
            {
                Some((*src, idx[0].clone(), valid))
            }
            _ => None,
        }
    }
}

/// Guards the simplifier decided (at a known iteration): an `if` that always holds
/// becomes its body, one that never does disappears.
fn fold_constant_guards(body: Vec<KStmt>) -> Vec<KStmt> {
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s {
            KStmt::If { cond, then } => match cond.as_int() {
                Some(0) => {}
                Some(_) => out.extend(fold_constant_guards(then)),
                None => out.push(KStmt::If {
                    cond,
                    then: fold_constant_guards(then),
                }),
            },
            KStmt::For {
                var,
                extent,
                kind,
                body,
            } => out.push(KStmt::For {
                var,
                extent,
                kind,
                body: fold_constant_guards(body),
            }),
            other => out.push(other),
        }
    }
    out
}

/// `j mod stages`.
fn stage_offset(j: &Expr, stages: i64) -> Expr {
    Expr::bin(BinOp::FloorMod, j.clone(), Expr::Int(stages))
}

/// The buffers a statement stores into.
fn writes_of(s: &KStmt) -> BTreeSet<BufferId> {
    let mut acc = super::kernel::Accesses::default();
    s.accesses(&mut acc);
    acc.writes
}

/// Applies `f` to every statement, children first.
fn map_stmt(s: KStmt, f: &dyn Fn(KStmt) -> KStmt) -> KStmt {
    let s = match s {
        KStmt::For {
            var,
            extent,
            kind,
            body,
        } => KStmt::For {
            var,
            extent,
            kind,
            body: body.into_iter().map(|c| map_stmt(c, f)).collect(),
        },
        KStmt::If { cond, then } => KStmt::If {
            cond,
            then: then.into_iter().map(|c| map_stmt(c, f)).collect(),
        },
        other => other,
    };
    f(s)
}

/// Whether statements run a loop of `vars`.
fn runs_any(body: &[KStmt], vars: &[VarId]) -> bool {
    let runs = |s: &KStmt| matches!(s, KStmt::For { var, .. } if vars.contains(var));
    body.iter().any(|s| s.contains(&runs))
}
