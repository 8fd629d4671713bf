//! Barrier insertion: `__syncthreads()` between a write of a shared buffer and a later
//! read of it (the reading thread may not be the writer), and at the end of a loop body
//! that reads a shared buffer it also writes (so the next iteration's write waits for
//! this iteration's reads). Barriers go at the statement-list level, never inside a guard
//! that only part of the threads pass.

use super::kernel::{KStmt, Kernel};
use super::{LowerError, Result};
use crate::ir::{BufferId, Expr, Program, Scope};
use std::collections::BTreeSet;

#[derive(Default)]
struct Rw {
    reads: BTreeSet<BufferId>,
    writes: BTreeSet<BufferId>,
}

fn expr_reads(p: &Program, e: &Expr, rw: &mut Rw) {
    e.visit(&mut |x| {
        if let Expr::Load(b, _) = x {
            if p.buffer(*b).scope == Scope::Shared {
                rw.reads.insert(*b);
            }
        }
    });
}

fn stmt_rw(p: &Program, s: &KStmt, rw: &mut Rw) {
    match s {
        KStmt::For { body, .. } => body.iter().for_each(|c| stmt_rw(p, c, rw)),
        KStmt::If { cond, then } => {
            expr_reads(p, cond, rw);
            then.iter().for_each(|c| stmt_rw(p, c, rw));
        }
        KStmt::Store {
            buffer,
            indices,
            value,
        } => {
            if p.buffer(*buffer).scope == Scope::Shared {
                rw.writes.insert(*buffer);
            }
            indices.iter().for_each(|i| expr_reads(p, i, rw));
            expr_reads(p, value, rw);
        }
        KStmt::CpAsync {
            dst,
            dst_index,
            src_index,
            valid,
            ..
        } => {
            if p.buffer(*dst).scope == Scope::Shared {
                rw.writes.insert(*dst);
            }
            expr_reads(p, dst_index, rw);
            expr_reads(p, src_index, rw);
            if let Some(v) = valid {
                expr_reads(p, v, rw);
            }
        }
        // Tensor-core instructions are made after barriers are placed (`tensorize.rs`).
        KStmt::Sync
        | KStmt::Comment(_)
        | KStmt::CommitGroup
        | KStmt::WaitGroup(_)
        | KStmt::Mma(_) => {}
    }
}

fn contains_sync(body: &[KStmt]) -> bool {
    body.iter().any(|s| match s {
        KStmt::Sync => true,
        KStmt::For { body, .. } => contains_sync(body),
        KStmt::If { then, .. } => contains_sync(then),
        _ => false,
    })
}

fn process(p: &Program, body: &mut Vec<KStmt>, is_loop_body: bool) -> Result<()> {
    for s in body.iter_mut() {
        match s {
            KStmt::For { body: inner, .. } => process(p, inner, true)?,
            KStmt::If { cond, then } => {
                process(p, then, false)?;
                if contains_sync(then) {
                    return Err(LowerError::DivergentBarrier {
                        name: crate::ir::printer::expr_str(p, cond),
                    });
                }
            }
            _ => {}
        }
    }
    let mut pending: BTreeSet<BufferId> = BTreeSet::new();
    let mut out = Vec::with_capacity(body.len());
    let mut all = Rw::default();
    for s in body.drain(..) {
        let mut rw = Rw::default();
        stmt_rw(p, &s, &mut rw);
        if !rw.reads.is_disjoint(&pending) {
            out.push(KStmt::Sync);
            pending.clear();
        }
        if matches!(s, KStmt::Sync) {
            pending.clear();
        }
        pending.extend(rw.writes.iter().copied());
        all.reads.extend(rw.reads);
        all.writes.extend(rw.writes);
        out.push(s);
    }
    if is_loop_body
        && !all.reads.is_disjoint(&all.writes)
        && !matches!(out.last(), Some(KStmt::Sync))
    {
        out.push(KStmt::Sync);
    }
    *body = out;
    Ok(())
}

/// Inserts the barriers a kernel needs.
pub(super) fn insert_barriers(p: &Program, k: &mut Kernel) -> Result<()> {
    process(p, &mut k.body, false)
}
