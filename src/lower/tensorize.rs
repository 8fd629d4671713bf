//! Tensorized loop nests become tensor-core instructions (the last CUDA pass).
//!
//! A loop annotated `tensorize` (checked by `ir::tensorize`) was lowered like any other
//! nest, so compaction, barriers and software pipelining saw its ordinary loads and
//! stores. Here the nest is replaced by one [`KStmt::Mma`]: each access of its store is
//! read as a tile (the flat index at the nest's origin and the step of each loop), and
//! what the instruction needs is proven or the kernel is refused naming the loop:
//!
//! * fragment tiles run along their buffer's rows (the column loop steps by 1, the row
//!   loop by the buffer's row length), start on a whole tile of the buffer, and every
//!   tile of one fragment buffer has the same shape and row length, so a lane finds its
//!   registers of a tile from the tile's position alone ([`FragmentLayout`]);
//! * `ldmatrix` sources are shared, their rows 16-byte aligned;
//! * the warp is whole: the kernel's `threadIdx.x` is the 32 lanes of a warp and no
//!   condition around the instruction depends on the lane.

use super::kernel::{KStmt, Kernel, Mma, MmaOp, MmaOperand, Tile, ACC_SHAPE};
use super::swizzle::{Swizzle, ATOM_ROWS};
use super::{LowerError, Result};
use crate::ir::interval::Interval;
use crate::ir::simplify::simplify;
use crate::ir::tensorize::{step, Intrin, MMA_K_BYTES};
use crate::ir::{BinOp, BufferId, DType, Expr, Program, Scope, VarId};
use std::collections::BTreeMap;

/// How a warp's lanes hold a fragment buffer: the buffer is `rows x row_length` elements
/// in tiles of `tile_rows x tile_cols`, numbered row-major, and each lane holds
/// `registers` 32-bit registers of every tile, tile after tile.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FragmentLayout {
    pub row_length: i64,
    pub tile_rows: i64,
    pub tile_cols: i64,
    pub registers: i64,
}

impl FragmentLayout {
    fn of_accumulator(row_length: i64) -> Self {
        FragmentLayout {
            row_length,
            tile_rows: ACC_SHAPE.0,
            tile_cols: ACC_SHAPE.1,
            registers: 4,
        }
    }
    fn of_operand(o: MmaOperand, tf32: bool, row_length: i64) -> Self {
        let (tile_rows, tile_cols) = o.shape(tf32);
        FragmentLayout {
            row_length,
            tile_rows,
            tile_cols,
            // 16-bit elements two to a register (256 / 32 / 2 = 4 for A, 2 for B), TF32
            // one (128 / 32 = 4 for A, 64 / 32 = 2 for B).
            registers: match o {
                MmaOperand::A => 4,
                MmaOperand::B => 2,
            },
        }
    }
    fn of(role: Role, row_length: i64) -> Self {
        match role {
            Role::Accumulator => FragmentLayout::of_accumulator(row_length),
            Role::Operand(o, tf32) => FragmentLayout::of_operand(o, tf32, row_length),
        }
    }
    /// Registers one lane declares for a fragment buffer of `size` elements.
    pub fn lane_registers(&self, size: i64) -> i64 {
        size / (self.tile_rows * self.tile_cols) * self.registers
    }
}

/// The fragment layouts of a lowered kernel's fragment buffers, from its instructions.
pub fn fragment_layouts(k: &Kernel) -> BTreeMap<BufferId, FragmentLayout> {
    let mut out = BTreeMap::new();
    visit(&k.body, &mut |m| {
        for (t, role) in fragment_tiles(&m.op) {
            out.insert(t.buffer, FragmentLayout::of(role, t.row_stride));
        }
    });
    out
}

/// Calls `f` on every tensor-core instruction of a kernel body.
pub fn visit_mma(body: &[KStmt], f: &mut impl FnMut(&Mma)) {
    visit(body, f)
}

fn visit(body: &[KStmt], f: &mut impl FnMut(&Mma)) {
    for s in body {
        match s {
            KStmt::For { body, .. } | KStmt::If { then: body, .. } => visit(body, f),
            KStmt::Mma(m) => f(m),
            _ => {}
        }
    }
}

/// What a fragment tile is to its instruction, which fixes its layout.
#[derive(Copy, Clone)]
enum Role {
    Accumulator,
    /// Operand A or B, on TF32 or not.
    Operand(MmaOperand, bool),
}

/// The fragment tiles an instruction touches, each with its role.
fn fragment_tiles(op: &MmaOp) -> Vec<(&Tile, Role)> {
    let acc = Role::Accumulator;
    match op {
        MmaOp::Fill { acc: t } | MmaOp::Store { acc: t, .. } => vec![(t, acc)],
        MmaOp::Load {
            operand,
            frag: t,
            tf32,
            ..
        } => vec![(t, Role::Operand(*operand, *tf32))],
        MmaOp::Sync {
            acc: c,
            a: x,
            b: y,
            tf32,
        } => vec![
            (c, acc),
            (x, Role::Operand(MmaOperand::A, *tf32)),
            (y, Role::Operand(MmaOperand::B, *tf32)),
        ],
        // wgmma reads its operands from shared memory.
        MmaOp::Wgmma { acc: c, .. } => vec![(c, acc)],
        MmaOp::WgmmaFence | MmaOp::WgmmaCommit | MmaOp::WgmmaWait(_) => vec![],
    }
}

/// Replaces the tensorized nests of kernel `k` (`nests`: the variable of each nest's
/// outermost loop and its intrinsic) by tensor-core instructions.
pub(super) fn apply(
    p: &Program,
    k: &mut Kernel,
    nests: &[(VarId, Intrin)],
    ranges: &BTreeMap<VarId, i64>,
) -> Result<()> {
    if nests.is_empty() {
        // Fragments without instructions have no lane layout to print.
        return match k.allocs.iter().find(|a| a.scope == Scope::Fragment) {
            Some(a) => Err(LowerError::Tensorize(format!(
                "fragment {} is not used by any tensorized loop",
                p.buffer(a.buffer).name
            ))),
            None => Ok(()),
        };
    }
    let lane = k.lane();
    if k.block[0] != 32 {
        return Err(refuse(
            p,
            nests[0].0,
            format!(
                "a warp's instruction needs threadIdx.x to be the 32 lanes of a warp, the kernel launches {} threads in x",
                k.block[0]
            ),
        ));
    }
    let warps = k.thread_vars.iter().find_map(|(v, tag)| {
        (*tag == crate::ir::ThreadTag::ThreadIdx(crate::ir::Dim3::Y)).then_some((*v, k.block[1]))
    });
    let t = Tensorizer {
        p,
        nests,
        ranges,
        lane,
        warps,
        swizzles: super::swizzle::of_kernel(p, k).into_iter().collect(),
    };
    let body = std::mem::take(&mut k.body);
    k.body = bracket_wgmma(t.stmts(body, false)?);
    // Every fragment buffer: one layout, whole tiles, only touched by instructions.
    let mut layouts: BTreeMap<BufferId, FragmentLayout> = BTreeMap::new();
    let mut bad = None;
    visit(&k.body, &mut |m| {
        for (tile, role) in fragment_tiles(&m.op) {
            let l = FragmentLayout::of(role, tile.row_stride);
            if let Some(old) = layouts.insert(tile.buffer, l) {
                if old != l && bad.is_none() {
                    bad = Some((m.vars[0], tile.buffer, "tiles of two shapes or row lengths"));
                }
            }
        }
    });
    if let Some((v, b, what)) = bad {
        return Err(refuse(
            p,
            v,
            format!("fragment {} is used in {what}", p.buffer(b).name),
        ));
    }
    for a in k.allocs.iter().filter(|a| a.scope == Scope::Fragment) {
        let name = &p.buffer(a.buffer).name;
        let Some(l) = layouts.get(&a.buffer) else {
            return Err(LowerError::Tensorize(format!(
                "fragment {name} is not used by any tensorized loop"
            )));
        };
        if l.row_length % l.tile_cols != 0 || a.size % (l.row_length * l.tile_rows) != 0 {
            return Err(LowerError::Tensorize(format!(
                "fragment {name} ({} elements, rows of {}) is not whole {} x {} tiles",
                a.size, l.row_length, l.tile_rows, l.tile_cols
            )));
        }
    }
    if let Some(b) = fragment_access(p, &k.body) {
        return Err(LowerError::Tensorize(format!(
            "fragment {} is accessed outside a tensorized loop",
            p.buffer(b).name
        )));
    }
    Ok(())
}

/// Puts a `wgmma.fence` before and a `wgmma.commit_group` after each outermost statement
/// that runs only `wgmma`s (an unrolled loop of them, say), so that one fence and one
/// group cover the run, and the wait for the group after it: before the first later
/// statement of the body that could touch what the run uses (a barrier, after which a
/// stage is refilled; an accumulator's fill or store; a nested statement holding any), or
/// else at the end of the body. The wait stays in the iteration that issued the group:
/// `ptxas` serializes `wgmma`s whose wait it finds only across a loop's back edge (its
/// warning C7514), which costs a third of the throughput. A wait the pipeline placed
/// (`WgmmaWait(1)` last in a pipelined loop's body: one group left in flight while the next
/// stage computes) is that run's wait; after the loop, a wait for all of them.
fn bracket_wgmma(body: Vec<KStmt>) -> Vec<KStmt> {
    let mark = |op| {
        KStmt::Mma(Mma {
            op,
            vars: Vec::new(),
        })
    };
    let mut out = Vec::with_capacity(body.len());
    // Groups issued here and not waited for; groups a wait of this body leaves in flight
    // on purpose (for the next iteration); groups a nested loop left in flight.
    let (mut unwaited, mut carried, mut left) = (false, false, false);
    for s in body {
        if only_wgmma(&s) {
            out.push(mark(MmaOp::WgmmaFence));
            out.push(s);
            out.push(mark(MmaOp::WgmmaCommit));
            unwaited = true;
            continue;
        }
        if let KStmt::Mma(Mma {
            op: MmaOp::WgmmaWait(n),
            ..
        }) = &s
        {
            (unwaited, carried, left) = (false, *n > 0, false);
            out.push(s);
            continue;
        }
        if (unwaited || carried || left) && touches_wgmma_state(&s) {
            out.push(mark(MmaOp::WgmmaWait(0)));
            (unwaited, carried, left) = (false, false, false);
        }
        let leaves_in_flight = leaves_groups_in_flight(&s);
        out.push(match s {
            KStmt::For {
                var,
                extent,
                kind,
                body,
            } => KStmt::For {
                var,
                extent,
                kind,
                body: bracket_wgmma(body),
            },
            KStmt::If { cond, then } => KStmt::If {
                cond,
                then: bracket_wgmma(then),
            },
            other => other,
        });
        left |= leaves_in_flight;
    }
    if unwaited || left {
        out.push(mark(MmaOp::WgmmaWait(0)));
    }
    out
}

/// Whether a statement holds a wait that leaves `wgmma` groups in flight.
fn leaves_groups_in_flight(s: &KStmt) -> bool {
    s.contains(&|x| matches!(x, KStmt::Mma(m) if matches!(m.op, MmaOp::WgmmaWait(n) if n > 0)))
}

/// Whether a statement may touch what `wgmma`s in flight use: a barrier, a tensor-core
/// instruction, or a statement holding one.
fn touches_wgmma_state(s: &KStmt) -> bool {
    s.contains(&|x| matches!(x, KStmt::Sync | KStmt::Mma(_)))
}

/// Whether a statement runs `wgmma`s and nothing else.
fn only_wgmma(s: &KStmt) -> bool {
    match s {
        KStmt::Mma(m) => matches!(m.op, MmaOp::Wgmma { .. }),
        KStmt::For { body, .. } => {
            body.iter().any(|s| !matches!(s, KStmt::Comment(_)))
                && body
                    .iter()
                    .all(|s| matches!(s, KStmt::Comment(_)) || only_wgmma(s))
        }
        _ => false,
    }
}

fn refuse(p: &Program, var: VarId, reason: String) -> LowerError {
    LowerError::Tensorize(format!("loop {}: {reason}", p.var_name(var)))
}

/// A fragment buffer a store or load outside the instructions touches.
fn fragment_access(p: &Program, body: &[KStmt]) -> Option<BufferId> {
    let frag = |b: BufferId| p.buffer(b).scope == Scope::Fragment;
    let in_expr = |e: &Expr| {
        let mut hit = None;
        e.visit(&mut |x| {
            if let Expr::Load(b, _) = x {
                if frag(*b) {
                    hit = Some(*b);
                }
            }
        });
        hit
    };
    for s in body {
        let hit = match s {
            KStmt::For { body, .. } => fragment_access(p, body),
            KStmt::If { cond, then } => in_expr(cond).or_else(|| fragment_access(p, then)),
            KStmt::Store {
                buffer,
                indices,
                value,
            } => (frag(*buffer).then_some(*buffer))
                .or_else(|| indices.iter().find_map(in_expr))
                .or_else(|| in_expr(value)),
            _ => None,
        };
        if hit.is_some() {
            return hit;
        }
    }
    None
}

struct Tensorizer<'a> {
    p: &'a Program,
    nests: &'a [(VarId, Intrin)],
    ranges: &'a BTreeMap<VarId, i64>,
    lane: Option<VarId>,
    /// `threadIdx.y` and its extent: the warps of a block (a warpgroup is four of them).
    warps: Option<(VarId, i64)>,
    swizzles: BTreeMap<BufferId, Swizzle>,
}

impl Tensorizer<'_> {
    fn stmts(&self, body: Vec<KStmt>, lane_guarded: bool) -> Result<Vec<KStmt>> {
        body.into_iter()
            .map(|s| self.stmt(s, lane_guarded))
            .collect()
    }

    fn stmt(&self, s: KStmt, lane_guarded: bool) -> Result<KStmt> {
        Ok(match s {
            KStmt::For {
                var,
                extent,
                kind,
                body,
            } => match self.nests.iter().find(|(v, _)| *v == var) {
                Some((_, intrin)) => {
                    if lane_guarded {
                        return Err(refuse(
                            self.p,
                            var,
                            "a condition around it depends on the lane, so part of a warp would run a warp's instruction".into(),
                        ));
                    }
                    let for_loop = KStmt::For {
                        var,
                        extent,
                        kind,
                        body,
                    };
                    KStmt::Mma(self.instruction(&for_loop, *intrin)?)
                }
                None => KStmt::For {
                    var,
                    extent,
                    kind,
                    body: self.stmts(body, lane_guarded)?,
                },
            },
            KStmt::If { cond, then } => {
                let by_lane = self.lane.is_some_and(|l| cond.uses_var(l));
                KStmt::If {
                    then: self.stmts(then, lane_guarded || by_lane)?,
                    cond,
                }
            }
            other => other,
        })
    }

    fn range(&self) -> impl Fn(VarId) -> Option<Interval> + '_ {
        |v| self.ranges.get(&v).map(|&x| Interval::new(0, x - 1))
    }

    /// The instruction that replaces nest `s`.
    fn instruction(&self, s: &KStmt, intrin: Intrin) -> Result<Mma> {
        let (vars, guard, store) = nest(s);
        let outer = vars[0];
        let fail = |reason: String| refuse(self.p, outer, reason);
        let n = intrin.extents().len();
        let Some(KStmt::Store {
            buffer,
            indices,
            value,
        }) = store
        else {
            return Err(fail("the tensorized nest does not end in one store".into()));
        };
        if vars.len() != n {
            return Err(fail(format!(
                "the tensorized nest has {} loops, {} has {n}",
                vars.len(),
                intrin.name()
            )));
        }
        if guard.is_some() && intrin != Intrin::MmaStore {
            return Err(fail("the tensorized store is guarded".into()));
        }
        let (r, c) = (vars[0], vars[1]);
        let tile = |buf: BufferId, idx: &Expr, row: VarId, col: VarId| -> Result<(Tile, bool)> {
            let at0 = simplify(
                &idx.substitute(&|v| vars.contains(&v).then_some(Expr::Int(0))),
                &self.range(),
            );
            let (sr, sc) = (step(idx, row), step(idx, col));
            let name = &self.p.buffer(buf).name;
            let (row_stride, transposed) = match (sr, sc) {
                (Some(sr), Some(1)) if sr > 0 => (sr, false),
                (Some(1), Some(sc)) if sc > 0 => (sc, true),
                _ => {
                    return Err(fail(format!(
                        "{name} is not read or written as a tile with consecutive rows or columns (steps {sr:?}, {sc:?})"
                    )))
                }
            };
            Ok((
                Tile {
                    buffer: buf,
                    base: at0,
                    row_stride,
                },
                transposed,
            ))
        };
        let frag = |buf: BufferId, idx: &Expr, row: VarId, col: VarId, shape: (i64, i64)| {
            let (t, transposed) = tile(buf, idx, row, col)?;
            if transposed && shape.1 > 1 {
                return Err(fail(format!(
                    "fragment {} is addressed column-major",
                    self.p.buffer(buf).name
                )));
            }
            self.whole_tile(&t, shape).map_err(&fail)?;
            Ok(t)
        };
        let not_matched = || fail(format!("the store no longer matches {}", intrin.name()));
        let op = match intrin {
            Intrin::MmaFill => MmaOp::Fill {
                acc: frag(buffer, &indices[0], r, c, ACC_SHAPE)?,
            },
            Intrin::MmaLoadA | Intrin::MmaLoadB => {
                let operand = if intrin == Intrin::MmaLoadA {
                    MmaOperand::A
                } else {
                    MmaOperand::B
                };
                let tf32 = self.p.buffer(buffer).dtype == DType::F32;
                let f = frag(buffer, &indices[0], r, c, operand.shape(tf32))?;
                let (src, sidx) = load_of(&value).ok_or_else(not_matched)?;
                let (s, transposed) = tile(src, &sidx, r, c)?;
                self.ldmatrix_rows(&s).map_err(&fail)?;
                // `ldmatrix .trans` moves 16-bit elements: a TF32 tile is read with k
                // along the source's rows (A as `[m, k]`, B as `[n, k]`).
                if tf32 && (operand == MmaOperand::A) == transposed {
                    return Err(fail(format!(
                        "ldmatrix cannot transpose 32-bit elements: store the shared copy {} with k as its last axis (transform_layout)",
                        self.p.buffer(src).name
                    )));
                }
                MmaOp::Load {
                    operand,
                    frag: f,
                    src: s,
                    transposed,
                    tf32,
                }
            }
            Intrin::MmaSync => {
                let k = vars[2];
                let acc = frag(buffer, &indices[0], r, c, ACC_SHAPE)?;
                let (a, b) = factors(&value, r).ok_or_else(not_matched)?;
                let tf32 = self.p.buffer(a.0).dtype == DType::F32;
                MmaOp::Sync {
                    acc,
                    a: frag(a.0, &a.1, r, k, MmaOperand::A.shape(tf32))?,
                    b: frag(b.0, &b.1, k, c, MmaOperand::B.shape(tf32))?,
                    tf32,
                }
            }
            Intrin::WgmmaSync => {
                let k = vars[2];
                let acc = frag(buffer, &indices[0], r, c, ACC_SHAPE)?;
                let (a, b) = factors(&value, r).ok_or_else(not_matched)?;
                let (a, a_trans) = tile(a.0, &a.1, r, k)?;
                let (b, b_trans) = tile(b.0, &b.1, k, c)?;
                // TF32 operands have no transposed form: both are read k-major.
                if self.p.buffer(a.buffer).dtype == DType::F32 {
                    for (t, k_major, what) in [(&a, !a_trans, "A"), (&b, b_trans, "B")] {
                        if !k_major {
                            return Err(fail(format!(
                                "wgmma reads tf32 operands k-major only, and operand {what} ({}) is stored with k as its rows (transform_layout its shared copy)",
                                self.p.buffer(t.buffer).name
                            )));
                        }
                    }
                }
                let n = self.ranges.get(&c).copied().unwrap_or(0);
                // A's rows step by its row stride, or by 1 where it is stored M-major.
                let step_m = if a_trans { 1 } else { a.row_stride };
                let group_a = self.warpgroup(&a, &b, step_m).map_err(&fail)?;
                // K-major operands: A as stored, B transposed; the others are MN-major.
                self.descriptor(&a, &group_a, !a_trans, 64).map_err(&fail)?;
                self.descriptor(&b, &b.base, b_trans, n).map_err(&fail)?;
                MmaOp::Wgmma {
                    acc,
                    a,
                    b,
                    n,
                    a_trans,
                    b_trans,
                    group_a,
                }
            }
            Intrin::MmaStore => {
                let (d, transposed) = tile(buffer, &indices[0], r, c)?;
                if transposed {
                    return Err(fail(format!(
                        "the destination {} is written column-major",
                        self.p.buffer(buffer).name
                    )));
                }
                // The accumulator element the stored value is a function of.
                let (acc, aidx) = value
                    .loads()
                    .into_iter()
                    .find(|(b, i)| self.p.buffer(*b).scope == Scope::Fragment && i.len() == 1)
                    .ok_or_else(not_matched)?;
                MmaOp::Store {
                    dst: d,
                    acc: frag(acc, &aidx[0], r, c, ACC_SHAPE)?,
                    value: value.clone(),
                    valid: guard,
                }
            }
        };
        // Every lane of the warp gives the same tiles: the instruction is the warp's.
        if let Some(t) = op
            .tiles()
            .into_iter()
            .find(|t| self.lane.is_some_and(|l| t.base.uses_var(l)))
        {
            return Err(fail(format!(
                "the tile of {} depends on threadIdx.x, the lane: a warp's instruction needs the same tile in every lane",
                self.p.buffer(t.buffer).name
            )));
        }
        Ok(Mma { op, vars })
    }

    /// A fragment tile starts on a whole tile of its buffer: its row is a multiple of the
    /// tile's rows, its column of the tile's columns, for every value of the variables.
    fn whole_tile(&self, t: &Tile, (rows, cols): (i64, i64)) -> std::result::Result<(), String> {
        let s = Expr::Int(t.row_stride);
        // Loops of one iteration are at 0 (the simplifier keeps their variables).
        let base = t
            .base
            .substitute(&|v| (self.ranges.get(&v) == Some(&1)).then_some(Expr::Int(0)));
        let row = Expr::bin(BinOp::FloorDiv, base.clone(), s.clone());
        let col = Expr::bin(BinOp::FloorMod, base, s);
        let zero = |e: Expr, m: i64| {
            simplify(&Expr::bin(BinOp::FloorMod, e, Expr::Int(m)), &self.range()) == Expr::Int(0)
        };
        if t.row_stride % cols != 0 || !zero(row, rows) || !zero(col, cols) {
            return Err(format!(
                "fragment {} is not addressed in whole {rows} x {cols} tiles (rows of {}, tile at {})",
                self.p.buffer(t.buffer).name,
                t.row_stride,
                crate::ir::printer::expr_str(self.p, &t.base)
            ));
        }
        Ok(())
    }

    /// The four warps of a `wgmma`'s warpgroup (`threadIdx.y` `4g .. 4g+3`) have A tiles
    /// 16 rows apart (`step_m`: the flat step of A's row index) and the same B tile. The
    /// base of the first warp's A tile, where the descriptor points.
    fn warpgroup(&self, a: &Tile, b: &Tile, step_m: i64) -> std::result::Result<Expr, String> {
        let Some((ty, warps)) = self.warps.filter(|(_, w)| w % 4 == 0) else {
            return Err(format!(
                "wgmma is issued by warpgroups of four warps: threadIdx.y must count the warps, a multiple of 4 (it is {})",
                self.warps.map_or(1, |w| w.1)
            ));
        };
        let first = |e: &Expr| {
            e.substitute(&|v| {
                (v == ty).then(|| {
                    let group = Expr::bin(BinOp::FloorDiv, Expr::Var(ty), Expr::Int(4));
                    Expr::mul(group, Expr::Int(4))
                })
            })
        };
        for t in 0..warps {
            let at = |e: &Expr| e.substitute(&|v| (v == ty).then_some(Expr::Int(t)));
            let apart = |e: &Expr| simplify(&Expr::sub(at(e), at(&first(e))), &self.range());
            let want = (t % 4) * 16 * step_m;
            if apart(&a.base) != Expr::Int(want) {
                return Err(format!(
                    "the A tile of warp {t} is not 16 rows below the previous warp's of its warpgroup: bind the warps of a warpgroup to consecutive 16-row slices (threadIdx.y's innermost factor 4 along the rows)"
                ));
            }
            if apart(&b.base) != Expr::Int(0) {
                return Err(format!(
                    "warp {t} reads another B tile than the first warp of its warpgroup: the four warps of a warpgroup must share B"
                ));
            }
        }
        Ok(simplify(&first(&a.base), &self.range()))
    }

    /// A `wgmma` operand is a tile of a swizzled shared buffer whose rows are the tile's
    /// rows, starting on a whole atom of eight rows; `k_major`: its rows run along k, and
    /// its k step (32 bytes) lies in one 128-byte panel; otherwise its `mn` columns are whole
    /// panels.
    fn descriptor(
        &self,
        t: &Tile,
        base: &Expr,
        k_major: bool,
        mn: i64,
    ) -> std::result::Result<(), String> {
        let b = self.p.buffer(t.buffer);
        let Some(s) = self.swizzles.get(&t.buffer) else {
            return Err(format!(
                "wgmma reads shared operands in the 128-byte swizzled layout: {} is {} and not swizzled (storage_swizzle)",
                b.name,
                b.scope.name()
            ));
        };
        let zero = |e: Expr| simplify(&e, &self.range()) == Expr::Int(0);
        let modulo = |e: Expr, m: i64| Expr::bin(BinOp::FloorMod, e, Expr::Int(m));
        let row = Expr::bin(BinOp::FloorDiv, base.clone(), Expr::Int(s.row));
        let k_step = MMA_K_BYTES / b.dtype.bytes() as i64;
        let col_ok = match k_major {
            true => zero(modulo(base.clone(), k_step)),
            false => mn % s.panel == 0 && zero(modulo(base.clone(), s.panel)),
        };
        if t.row_stride != s.row || !zero(modulo(row, ATOM_ROWS)) || !col_ok {
            return Err(format!(
                "{}'s tile (rows of {}, at {}) is not on whole {ATOM_ROWS}-row atoms of its swizzled rows of {} with {}",
                b.name,
                t.row_stride,
                crate::ir::printer::expr_str(self.p, base),
                s.row,
                match k_major {
                    true => format!("its {k_step} columns of k inside one 128-byte panel"),
                    false => format!("its {mn} columns whole panels of {}", s.panel),
                }
            ));
        }
        Ok(())
    }

    /// `ldmatrix` reads rows of 16 bytes from shared memory, each 16-byte aligned.
    fn ldmatrix_rows(&self, t: &Tile) -> std::result::Result<(), String> {
        let b = self.p.buffer(t.buffer);
        let per16 = 16 / b.dtype.bytes() as i64;
        let aligned = simplify(
            &Expr::bin(BinOp::FloorMod, t.base.clone(), Expr::Int(per16)),
            &self.range(),
        ) == Expr::Int(0);
        if b.scope != Scope::Shared {
            return Err(format!(
                "ldmatrix reads shared memory, {} is {}",
                b.name,
                b.scope.name()
            ));
        }
        if t.row_stride % per16 != 0 || !aligned {
            return Err(format!(
                "ldmatrix needs 16-byte aligned rows of {}: rows of {} elements, tile at {}",
                b.name,
                t.row_stride,
                crate::ir::printer::expr_str(self.p, &t.base)
            ));
        }
        Ok(())
    }
}

/// The buffer and flat index of a load, possibly widened.
fn load_of(e: &Expr) -> Option<(BufferId, Expr)> {
    match e.factor_load()? {
        (_, b, [i]) => Some((b, i.clone())),
        _ => None,
    }
}

/// The operands of an accumulation `acc + f(a[..]) * f(b[..])` (each load possibly
/// widened), A being the one indexed by the row variable `r`: each its buffer and flat
/// index.
fn factors(value: &Expr, r: VarId) -> Option<((BufferId, Expr), (BufferId, Expr))> {
    let Expr::Bin(BinOp::Add, x, y) = value else {
        return None;
    };
    let product = match (&**x, &**y) {
        (Expr::Load(..), p) | (p, Expr::Load(..)) => p,
        _ => return None,
    };
    let Expr::Bin(BinOp::Mul, x, y) = product else {
        return None;
    };
    let (x, y) = (load_of(x)?, load_of(y)?);
    Some(if x.1.uses_var(r) { (x, y) } else { (y, x) })
}

/// The loop variables of a nest (outermost first), the guard around its store if any, and
/// the store (comments skipped).
fn nest(s: &KStmt) -> (Vec<VarId>, Option<Expr>, Option<KStmt>) {
    let mut vars = Vec::new();
    let mut guard = None;
    let mut at = s;
    loop {
        match at {
            KStmt::For { var, body, .. } => {
                vars.push(*var);
                match only(body) {
                    Some(x) => at = x,
                    None => return (vars, guard, None),
                }
            }
            KStmt::If { cond, then } if guard.is_none() => {
                guard = Some(cond.clone());
                match only(then) {
                    Some(x) => at = x,
                    None => return (vars, guard, None),
                }
            }
            KStmt::Store { .. } => return (vars, guard, Some(at.clone())),
            _ => return (vars, guard, None),
        }
    }
}

/// The one statement of a body that is not a comment.
fn only(body: &[KStmt]) -> Option<&KStmt> {
    let mut real = body.iter().filter(|s| !matches!(s, KStmt::Comment(_)));
    let first = real.next()?;
    real.next().is_none().then_some(first)
}
