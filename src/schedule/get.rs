//! `get_block`, `get_loops`, `get_consumers`, `get_producers`: looking things up.

use super::error::{Result, ScheduleError};
use crate::ir::{BlockId, LoopId, Node, Program};

/// The live block called `name`.
pub fn get_block(p: &Program, name: &str) -> Result<BlockId> {
    let found = p.find_block(name);
    match found.as_slice() {
        [b] => Ok(*b),
        [] => Err(ScheduleError::BlockNotFound {
            name: name.into(),
            available: p
                .blocks_in_order()
                .iter()
                .map(|b| p.block(*b).name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        }),
        many => Err(ScheduleError::AmbiguousBlock {
            name: name.into(),
            count: many.len(),
        }),
    }
}

/// The loops around a block, outermost first.
pub fn get_loops(p: &Program, b: BlockId) -> Vec<LoopId> {
    p.ancestors(Node::Block(b))
}

/// Blocks that read what `b` writes.
pub fn get_consumers(p: &Program, b: BlockId) -> Vec<BlockId> {
    let buf = p.block(b).body.buffer;
    p.readers(buf).into_iter().filter(|c| *c != b).collect()
}

/// Blocks that write what `b` reads.
pub fn get_producers(p: &Program, b: BlockId) -> Vec<BlockId> {
    let mut out = Vec::new();
    for (buf, _) in p.block_reads(b) {
        for w in p.writers(buf) {
            if w != b && !out.contains(&w) {
                out.push(w);
            }
        }
    }
    out
}
