//! Buffer compaction and index flattening, and the vector-access check.
//!
//! A shared or local buffer is allocated for the region its accesses cover below their
//! common loop (the allocation point): loops above it and the thread indices that do not
//! share the buffer (blockIdx for shared; blockIdx and threadIdx for local) stay symbolic,
//! the rest are relaxed over their range, so each index becomes `base + [lo, hi]` and the
//! buffer shrinks to the extents `hi - lo + 1`. Where a symbolic variable sits under a
//! floordiv or floormod beside relaxed ones (a thread's rows of the fused n*p*q axis of an
//! implicit-GEMM conv), [`offset_within`](crate::ir::offset::offset_within) bounds the
//! index through those operators; a dimension neither can bound keeps its full extent.
//! A local buffer under virtual threads (a thread's accumulator with a vthread level,
//! whose copies lie a thread row apart) is stored once per virtual thread, each copy
//! compacted with the vthread variables symbolic, where that takes less than one box over
//! all of them (TVM's virtual-thread injection does the same). Parameters and global
//! workspaces keep their full shape.

use super::kernel::{Alloc, ForKind, KStmt, Kernel};
use super::{Backend, LowerError, Result};
use crate::ir::interval::Interval;
use crate::ir::offset::index_box;
use crate::ir::simplify::{range_of, simplify};
use crate::ir::{BinOp, BufferId, DType, Expr, LoopKind, Program, Scope, ThreadTag, VarId};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

struct Access {
    buffer: BufferId,
    indices: Vec<Expr>,
    path: Vec<VarId>,
}

fn collect_expr(e: &Expr, path: &[VarId], out: &mut Vec<Access>) {
    e.visit(&mut |x| {
        if let Expr::Load(b, idx) = x {
            out.push(Access {
                buffer: *b,
                indices: idx.clone(),
                path: path.to_vec(),
            });
        }
    });
}

fn collect(body: &[KStmt], path: &mut Vec<VarId>, out: &mut Vec<Access>) {
    for s in body {
        match s {
            KStmt::For { var, body, .. } => {
                path.push(*var);
                collect(body, path, out);
                path.pop();
            }
            KStmt::If { cond, then } => {
                collect_expr(cond, path, out);
                collect(then, path, out);
            }
            KStmt::Store {
                buffer,
                indices,
                value,
            } => {
                out.push(Access {
                    buffer: *buffer,
                    indices: indices.clone(),
                    path: path.clone(),
                });
                indices.iter().for_each(|i| collect_expr(i, path, out));
                collect_expr(value, path, out);
            }
            KStmt::CpAsync {
                dst,
                dst_index,
                src,
                src_index,
                valid,
                ..
            } => {
                for (buffer, index) in [(dst, dst_index), (src, src_index)] {
                    out.push(Access {
                        buffer: *buffer,
                        indices: vec![index.clone()],
                        path: path.clone(),
                    });
                    collect_expr(index, path, out);
                }
                if let Some(v) = valid {
                    collect_expr(v, path, out);
                }
            }
            // A counter of a global workspace (kept whole), indexed by blockIdx alone.
            KStmt::Arrive { counter, index, .. } => {
                out.push(Access {
                    buffer: *counter,
                    indices: vec![index.clone()],
                    path: path.clone(),
                });
                collect_expr(index, path, out);
            }
            // Tensor-core instructions and warp shuffles are made after compaction
            // (`tensorize.rs`, `warp_reduce.rs`).
            KStmt::Sync
            | KStmt::Comment(_)
            | KStmt::CommitGroup
            | KStmt::WaitGroup(_)
            | KStmt::Mma(_)
            | KStmt::WarpReduce { .. } => {}
        }
    }
}

/// How one buffer's indices map to its flat storage.
struct Layout {
    /// Subtracted from each index.
    offset: Vec<Expr>,
    strides: Vec<i64>,
    /// A buffer stored once per virtual thread: that copy's number (over the vthread
    /// loop variables) and the size of one copy.
    copy: Option<Copy>,
}

/// A virtual-thread copy's number and the size of one copy.
type Copy = (Expr, i64);

/// The box `accesses` cover with `fixed` variables symbolic and the rest relaxed: per
/// dimension the offset subtracted from the index and the extent kept (the whole of
/// `shape` where no box is found or the box is not smaller), and which dimensions are kept
/// whole. A compacted dimension holds every access over the whole range of its loops and
/// threads, guards ignored (the box is their union); a whole one only those whose range
/// lies in the shape (see [`within`]).
fn boxed(
    accesses: &[&Access],
    fixed: &BTreeSet<VarId>,
    shape: &[i64],
    range: &dyn Fn(VarId) -> Option<Interval>,
) -> Region {
    let rank = shape.len();
    let mut dims: Vec<Option<(Expr, i64, i64)>> = vec![None; rank];
    let mut fallback = vec![false; rank];
    for a in accesses {
        for (d, e) in a.indices.iter().enumerate() {
            let Some((base, r_min, r_max)) = index_box(e, &|v| fixed.contains(&v), range) else {
                fallback[d] = true;
                continue;
            };
            dims[d] = Some(match dims[d].take() {
                None => (base, r_min, r_max),
                Some((b0, lo, hi)) if b0 == base => (b0, lo.min(r_min), hi.max(r_max)),
                Some(other) => {
                    fallback[d] = true;
                    other
                }
            });
        }
    }
    let mut offset = Vec::new();
    let mut extents = Vec::new();
    let mut kept = Vec::new();
    for d in 0..rank {
        match (&dims[d], fallback[d]) {
            (Some((base, lo, hi)), false) if hi - lo < shape[d] => {
                offset.push(simplify(&Expr::add(base.clone(), Expr::Int(*lo)), range));
                extents.push(hi - lo + 1);
                kept.push(false);
            }
            _ => {
                offset.push(Expr::Int(0));
                extents.push(shape[d]);
                kept.push(true);
            }
        }
    }
    Region {
        offset,
        extents,
        kept,
    }
}

/// A buffer's allocation as [`boxed`] finds it: per dimension the offset subtracted from
/// the index, the extent, and whether the dimension is kept whole.
struct Region {
    offset: Vec<Expr>,
    extents: Vec<i64>,
    kept: Vec<bool>,
}

/// The box of each virtual-thread copy of a local buffer (`boxed` with the vthread loop
/// variables fixed) and the copy's number and size, where the copies side by side take
/// less than `whole` (the extents of the one box over all of them); the dimensions kept
/// whole, as [`boxed`] says.
fn per_copy(
    p: &Program,
    accesses: &[&Access],
    fixed: &BTreeSet<VarId>,
    b: &crate::ir::Buffer,
    whole: &[i64],
    ranges: &BTreeMap<VarId, i64>,
) -> Option<(Region, Copy)> {
    let vts = vthread_vars(p, accesses);
    if vts.is_empty() {
        return None;
    }
    let range = |v: VarId| ranges.get(&v).map(|&x| Interval::new(0, x - 1));
    let mut per_copy = fixed.clone();
    per_copy.extend(vts.iter().copied());
    let region = boxed(accesses, &per_copy, &b.shape, &range);
    let (_, size) = strides(&region.extents, &b.align);
    let (_, all) = strides(whole, &b.align);
    let digits: Vec<(Expr, i64)> = vts
        .iter()
        .map(|v| ranges.get(v).map(|&n| (Expr::Var(*v), n)))
        .collect::<Option<_>>()?;
    let count: i64 = digits.iter().map(|(_, n)| n).product();
    if size.checked_mul(count)? >= all {
        return None;
    }
    Some((region, (Expr::row_major(digits), size)))
}

/// The virtual-thread loop variables that every access of a buffer is under and some
/// access's index uses (outermost first); empty when an access lies outside one of them.
fn vthread_vars(p: &Program, accesses: &[&Access]) -> Vec<VarId> {
    let vthreads: BTreeSet<VarId> = p
        .loops
        .iter()
        .filter(|l| matches!(l.kind, LoopKind::Thread(ThreadTag::VThread(_))))
        .map(|l| l.var)
        .collect();
    let Some(first) = accesses.first() else {
        return Vec::new();
    };
    first
        .path
        .iter()
        .copied()
        .filter(|v| vthreads.contains(v))
        .filter(|v| accesses.iter().all(|a| a.path.contains(v)))
        .filter(|v| {
            accesses
                .iter()
                .any(|a| a.indices.iter().any(|e| e.uses_var(*v)))
        })
        .collect()
}

fn strides(extents: &[i64], align: &[crate::ir::StorageAlign]) -> (Vec<i64>, i64) {
    let n = extents.len();
    let mut st = vec![1i64; n];
    for d in (0..n.saturating_sub(1)).rev() {
        let mut s = st[d + 1] * extents[d + 1];
        if let Some(a) = align.iter().find(|a| a.axis == d) {
            while s % a.factor != a.offset % a.factor {
                s += 1;
            }
        }
        st[d] = s;
    }
    let size = if n == 0 { 1 } else { st[0] * extents[0] };
    (st, size.max(1))
}

/// Whether an access lies inside a dimension kept whole at every iteration of its loops
/// and threads: its index's range over all of them is within the extent.
fn within(index: &Expr, extent: i64, range: &dyn Fn(VarId) -> Option<Interval>) -> bool {
    let r = range_of(index, range);
    r.is_bounded() && r.min >= 0 && r.max < extent
}

/// An access of a compacted buffer proven to lie inside its allocation at every iteration
/// of its loops and threads, whatever guards it is under: the buffer and its flat index.
pub(super) type Proven = (BufferId, Expr);

/// Compacts the kernel's shared and local buffers and flattens every access. Returns the
/// accesses proven inside their allocations.
pub(super) fn compact(
    p: &Program,
    k: &mut Kernel,
    backend: Backend,
    ranges: &BTreeMap<VarId, i64>,
) -> Result<Vec<Proven>> {
    let mut kept_whole: BTreeMap<BufferId, Vec<bool>> = BTreeMap::new();
    let mut accesses = Vec::new();
    collect(&k.body, &mut Vec::new(), &mut accesses);
    let mut layouts: BTreeMap<BufferId, Layout> = BTreeMap::new();
    let buffers: BTreeSet<BufferId> = accesses.iter().map(|a| a.buffer).collect();
    let range = |v: VarId| ranges.get(&v).map(|&x| Interval::new(0, x - 1));
    for buf in buffers {
        let b = p.buffer(buf);
        let compacted = p.allocs.contains(&buf) && b.scope != Scope::Global;
        if !compacted {
            let (st, _) = strides(&b.shape, &[]);
            layouts.insert(
                buf,
                Layout {
                    offset: vec![Expr::Int(0); b.shape.len()],
                    strides: st,
                    copy: None,
                },
            );
            continue;
        }
        let acc: Vec<&Access> = accesses.iter().filter(|a| a.buffer == buf).collect();
        // The allocation point: the loops common to all accesses.
        let mut lca: Vec<VarId> = acc[0].path.clone();
        for a in &acc[1..] {
            let n = lca.iter().zip(&a.path).take_while(|(x, y)| x == y).count();
            lca.truncate(n);
        }
        let mut fixed: BTreeSet<VarId> = lca.iter().copied().collect();
        for (v, tag) in &k.thread_vars {
            // A local buffer is one thread's; a fragment is one warp's, shared by the lanes
            // (threadIdx.x) of the warp. A thread index of one value (a block of one row
            // on threadIdx.y) is 0 for every thread: relaxed over that one value, so an
            // access that has it and one that does not fall in one box.
            let single = ranges.get(v) == Some(&1) && tag.is_thread_idx();
            let keep = tag.is_block_idx()
                || (b.scope == Scope::Local && tag.is_thread_idx())
                || (b.scope == Scope::Fragment
                    && tag.is_thread_idx()
                    && *tag != crate::ir::ThreadTag::ThreadIdx(crate::ir::Dim3::X));
            if keep && !single {
                fixed.insert(*v);
            }
        }
        let plain = boxed(&acc, &fixed, &b.shape, &range);
        // A thread's virtual-thread copies of a local buffer (an accumulator whose tile
        // has a vthread level) lie a thread row apart: one box per copy, the copies side
        // by side, where that is smaller than the one box over them all.
        let copies = match (backend, b.scope) {
            (Backend::Cuda, Scope::Local) => per_copy(p, &acc, &fixed, b, &plain.extents, ranges),
            _ => None,
        };
        let (region, copy) = match copies {
            Some((region, copy)) => (region, Some(copy)),
            None => (plain, None),
        };
        let Region {
            offset,
            extents,
            kept,
        } = region;
        kept_whole.insert(buf, kept);
        let (st, mut size) = strides(&extents, &b.align);
        if let Some((index, copy_size)) = &copy {
            let count = range_of(index, &range).max + 1;
            size = copy_size * count;
        }
        let at = match backend {
            Backend::Cuda => None,
            Backend::Cpu => lca.last().copied(),
        };
        let swizzle_row = match b.swizzle {
            true => Some(super::swizzle::row_of(p, buf, &extents)?),
            false => None,
        };
        k.allocs.push(Alloc {
            buffer: buf,
            scope: b.scope,
            size,
            at,
            swizzle_row,
        });
        layouts.insert(
            buf,
            Layout {
                offset,
                strides: st,
                copy,
            },
        );
    }
    // The proof below and the rewrite flatten the same accesses, and a kernel repeats
    // accesses (a reduction's load and store of its accumulator): each distinct one is
    // flattened and simplified once.
    let memo: RefCell<Flattened> = RefCell::default();
    let flat = |buf: BufferId, idx: &[Expr]| -> Vec<Expr> {
        let known = memo.borrow().get(&buf).and_then(|done| {
            done.iter()
                .find(|(i, _)| i.as_slice() == idx)
                .map(|(_, f)| f.clone())
        });
        let f = known.unwrap_or_else(|| {
            let f = flatten(&layouts[&buf], idx, &range);
            let mut memo = memo.borrow_mut();
            memo.entry(buf).or_default().push((idx.to_vec(), f.clone()));
            f
        });
        vec![f]
    };
    let proven = accesses
        .iter()
        .filter(|a| {
            kept_whole.get(&a.buffer).is_some_and(|kept| {
                kept.iter()
                    .zip(&a.indices)
                    .zip(&p.buffer(a.buffer).shape)
                    .all(|((whole, e), n)| !whole || within(e, *n, &range))
            })
        })
        .map(|a| (a.buffer, flat(a.buffer, &a.indices).remove(0)))
        .collect();
    rewrite(&mut k.body, &flat);
    Ok(proven)
}

/// Per buffer: the indices of each access flattened so far, and its flat index.
type Flattened = BTreeMap<BufferId, Vec<(Vec<Expr>, Expr)>>;

/// The flat index of an access of a buffer stored with layout `l`, simplified.
fn flatten(l: &Layout, idx: &[Expr], range: &dyn Fn(VarId) -> Option<Interval>) -> Expr {
    let mut sum: Option<Expr> = None;
    for (d, e) in idx.iter().enumerate() {
        let local = Expr::sub(e.clone(), l.offset[d].clone());
        let term = if l.strides[d] == 1 {
            local
        } else {
            Expr::mul(local, Expr::Int(l.strides[d]))
        };
        sum = Some(match sum {
            None => term,
            Some(s) => Expr::add(s, term),
        });
    }
    let mut sum = sum.unwrap_or(Expr::Int(0));
    if let Some((index, size)) = &l.copy {
        sum = Expr::add(Expr::mul(index.clone(), Expr::Int(*size)), sum);
    }
    simplify(&sum, range)
}

fn rewrite_expr(e: &Expr, flat: &dyn Fn(BufferId, &[Expr]) -> Vec<Expr>) -> Expr {
    e.rewrite(&mut |x| match x {
        Expr::Load(b, idx) => Expr::Load(b, flat(b, &idx)),
        other => other,
    })
}

fn rewrite(body: &mut [KStmt], flat: &dyn Fn(BufferId, &[Expr]) -> Vec<Expr>) {
    for s in body {
        match s {
            KStmt::For { body, .. } => rewrite(body, flat),
            KStmt::If { cond, then } => {
                *cond = rewrite_expr(cond, flat);
                rewrite(then, flat);
            }
            KStmt::Store {
                buffer,
                indices,
                value,
            } => {
                let idx: Vec<Expr> = indices.iter().map(|i| rewrite_expr(i, flat)).collect();
                *indices = flat(*buffer, &idx);
                *value = rewrite_expr(value, flat);
            }
            KStmt::CpAsync {
                dst,
                dst_index,
                src,
                src_index,
                valid,
                ..
            } => {
                for (buffer, index) in [(dst, dst_index), (src, src_index)] {
                    let i = rewrite_expr(index, flat);
                    *index = flat(*buffer, &[i]).remove(0);
                }
                if let Some(v) = valid {
                    *v = rewrite_expr(v, flat);
                }
            }
            KStmt::Arrive { counter, index, .. } => {
                let i = rewrite_expr(index, flat);
                *index = flat(*counter, &[i]).remove(0);
            }
            // Tensor-core instructions and warp shuffles are made after compaction
            // (`tensorize.rs`, `warp_reduce.rs`).
            KStmt::Sync
            | KStmt::Comment(_)
            | KStmt::CommitGroup
            | KStmt::WaitGroup(_)
            | KStmt::Mma(_)
            | KStmt::WarpReduce { .. } => {}
        }
    }
}

/// Checks every vectorized loop of a CUDA kernel: 2 or 4 float32 lanes, one store (under
/// a lane-invariant guard at most) whose index and loads are contiguous in the lane and
/// aligned to the vector width, or lane-invariant loads; or a store that is not
/// contiguous whose value is one contiguous, aligned load ([`scattered`]). A loop whose
/// guard depends on the lane is accepted and printed as guarded scalar stores.
pub(super) fn check_vectors(p: &Program, k: &Kernel, ranges: &BTreeMap<VarId, i64>) -> Result<()> {
    fn walk(p: &Program, body: &[KStmt], ranges: &BTreeMap<VarId, i64>) -> Result<()> {
        for s in body {
            match s {
                KStmt::For {
                    var,
                    extent,
                    kind: ForKind::Vectorized,
                    body,
                } => {
                    vector_store(p, body, *var, *extent, ranges).map_err(|reason| {
                        LowerError::Vectorize {
                            name: p.var_name(*var).into(),
                            reason,
                        }
                    })?;
                }
                KStmt::For { body, .. } => walk(p, body, ranges)?,
                KStmt::If { then, .. } => walk(p, then, ranges)?,
                _ => {}
            }
        }
        Ok(())
    }
    walk(p, &k.body, ranges)
}

/// The one store of a vectorized loop body, under at most one guard that does not depend
/// on the lane.
pub(crate) struct VectorStore<'a> {
    pub guard: Option<&'a Expr>,
    pub buffer: BufferId,
    pub indices: &'a [Expr],
    pub value: &'a Expr,
}

/// The store of a vectorized loop body, when the body has the accepted shape.
pub(crate) fn vector_body(
    body: &[KStmt],
    var: VarId,
) -> std::result::Result<VectorStore<'_>, String> {
    fn real(b: &[KStmt]) -> Vec<&KStmt> {
        b.iter()
            .filter(|s| !matches!(s, KStmt::Comment(_)))
            .collect()
    }
    fn store<'a>(
        guard: Option<&'a Expr>,
        s: &'a KStmt,
    ) -> std::result::Result<VectorStore<'a>, String> {
        match s {
            KStmt::Store {
                buffer,
                indices,
                value,
            } => Ok(VectorStore {
                guard,
                buffer: *buffer,
                indices,
                value,
            }),
            _ => Err("its body is not a single store".to_string()),
        }
    }
    match real(body).as_slice() {
        [s @ KStmt::Store { .. }] => store(None, s),
        [KStmt::If { cond, then }] => {
            if cond.uses_var(var) {
                return Err("its guard depends on the lane (imperfect tile)".into());
            }
            match real(then).as_slice() {
                [s] => store(Some(cond), s),
                _ => Err("its body is not a single store".into()),
            }
        }
        _ => Err("its body is not a single store".into()),
    }
}

/// Whether a flat index is `aligned_base + lane`.
pub(crate) fn contiguous(
    idx: &Expr,
    var: VarId,
    lanes: i64,
    ranges: &BTreeMap<VarId, i64>,
) -> std::result::Result<(), String> {
    let range = |v: VarId| ranges.get(&v).map(|&x| Interval::new(0, x - 1));
    let next = idx.substitute(&|v| (v == var).then(|| Expr::add(Expr::Var(var), Expr::Int(1))));
    let step = simplify(&Expr::sub(next, idx.clone()), &range);
    if step != Expr::Int(1) {
        return Err("its accesses are not contiguous in the lane".into());
    }
    let base = idx.substitute(&|v| (v == var).then_some(Expr::Int(0)));
    let m = simplify(&Expr::bin(BinOp::FloorMod, base, Expr::Int(lanes)), &range);
    if m != Expr::Int(0) {
        return Err(format!(
            "its accesses are not provably aligned to {lanes} elements"
        ));
    }
    Ok(())
}

fn vector_store(
    p: &Program,
    body: &[KStmt],
    var: VarId,
    lanes: i64,
    ranges: &BTreeMap<VarId, i64>,
) -> std::result::Result<(), String> {
    // A guard that depends on the lane (an imperfect tile) makes the lanes diverge: the
    // loop is emitted as an unrolled scalar loop, one guarded store per lane.
    let real: Vec<&KStmt> = body
        .iter()
        .filter(|s| !matches!(s, KStmt::Comment(_)))
        .collect();
    if let [KStmt::If { cond, then }] = real.as_slice() {
        let single = then
            .iter()
            .filter(|s| !matches!(s, KStmt::Comment(_)))
            .count()
            == 1;
        if cond.uses_var(var) && single {
            return Ok(());
        }
    }
    let VectorStore {
        buffer,
        indices,
        value,
        ..
    } = vector_body(body, var)?;
    // Half-precision lanes are emitted as an unrolled loop of element copies (there is
    // no half vector type without `cuda_fp16.h`).
    if p.buffer(buffer).dtype.is_half() {
        return Ok(());
    }
    if p.buffer(buffer).dtype != DType::F32 {
        return Err(format!(
            "only float32 vectors are supported, {} is {}",
            p.buffer(buffer).name,
            p.buffer(buffer).dtype
        ));
    }
    if lanes != 2 && lanes != 4 {
        return Err(format!("{lanes} lanes (float2 and float4 are supported)"));
    }
    if contiguous(&indices[0], var, lanes, ranges).is_err() {
        return scattered(p, value, var, lanes, ranges);
    }
    let mut err = Ok(());
    value.visit(&mut |e| {
        if let Expr::Load(b, idx) = e {
            if idx[0].uses_var(var) && err.is_ok() {
                if p.buffer(*b).dtype != DType::F32 {
                    err = Err(format!("{} is not float32", p.buffer(*b).name));
                } else {
                    err = contiguous(&idx[0], var, lanes, ranges);
                }
            }
        }
    });
    err
}

/// A vectorized loop whose store is not contiguous (the transposed store of a
/// reduction-major fetch) is accepted when its value is one load, zero-filled at most,
/// that is contiguous and aligned: one vector load, then a store per lane
/// ([`super::vector_copy`]; under a zero-fill guard that is not uniform over the vector,
/// a scalar loop).
fn scattered(
    p: &Program,
    value: &Expr,
    var: VarId,
    lanes: i64,
    ranges: &BTreeMap<VarId, i64>,
) -> std::result::Result<(), String> {
    let Expr::Load(b, idx) = super::vector_copy::zero_filled(value).0 else {
        return Err("its store is not contiguous in the lane and its value is not one load".into());
    };
    if p.buffer(*b).dtype != DType::F32 {
        return Err(format!("{} is not float32", p.buffer(*b).name));
    }
    contiguous(&idx[0], var, lanes, ranges)
}
