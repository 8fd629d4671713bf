//! Barrier insertion: `__syncthreads()` between a write of a shared buffer and a later
//! read of it (the reading thread may not be the writer), and at the end of a loop body
//! that reads a shared buffer it also writes (so the next iteration's write waits for
//! this iteration's reads). Barriers go at the statement-list level, never inside a guard
//! that only part of the threads pass.

use super::kernel::{Accesses, KStmt, Kernel};
use super::{LowerError, Result};
use crate::ir::{BufferId, Program, Scope};
use std::collections::BTreeSet;

/// The shared buffers a statement reads and writes.
fn shared_rw(p: &Program, s: &KStmt) -> Accesses {
    let mut acc = Accesses::default();
    s.accesses(&mut acc);
    let shared = |b: &BufferId| p.buffer(*b).scope == Scope::Shared;
    acc.reads.retain(shared);
    acc.writes.retain(shared);
    acc
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
    let mut all = Accesses::default();
    for s in body.drain(..) {
        let rw = shared_rw(p, &s);
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
