//! `cache_read` and `cache_write`: staging a buffer through a copy in another scope.
//!
//! Invariant: the new copy block covers the whole buffer where it is inserted (at the
//! root scope, right after the source is produced); `compute_at` then shrinks it to the
//! region one loop iteration needs. Only the given block is redirected to the copy;
//! `read_cache` redirects a further reader of the same source (three passes over a row
//! reading one staged copy of it).

use super::error::{Result, ScheduleError};
use super::util::*;
use crate::ir::{BlockId, Buffer, BufferId, BufferKind, Expr, LoopId, Node, Program, Scope};

fn parse_scope(scope: &str) -> Result<Scope> {
    Scope::parse(scope).ok_or_else(|| ScheduleError::UnknownScope {
        scope: scope.into(),
    })
}

/// The deepest loop enclosing all of `nodes` (`None`: the root).
fn common_ancestor(p: &Program, nodes: &[Node]) -> Option<LoopId> {
    let chains: Vec<Vec<LoopId>> = nodes.iter().map(|n| p.ancestors(*n)).collect();
    let first = chains.first()?;
    let mut lca = None;
    for (i, l) in first.iter().enumerate() {
        if chains.iter().all(|c| c.get(i) == Some(l)) {
            lca = Some(*l);
        } else {
            break;
        }
    }
    lca
}

/// A copy block `dst[v] = src[v]` over the whole shape, in its own loop nest.
fn copy_block(p: &mut Program, name: &str, src: BufferId, dst: BufferId) -> Node {
    let shape = p.buffer(src).shape.clone();
    copy_nest(p, name, src, dst, &shape, None)
}

fn new_cache_buffer(p: &mut Program, src: BufferId, scope: Scope) -> BufferId {
    let s = p.buffer(src).clone();
    let name = p.fresh_buffer_name(&format!("{}_{}", s.name, scope.name()));
    let id = p.new_buffer(Buffer {
        name,
        shape: s.shape,
        dtype: s.dtype,
        scope,
        kind: BufferKind::Intermediate,
        align: Vec::new(),
        swizzle: false,
    });
    p.allocs.push(id);
    id
}

fn replace_loads(e: &Expr, from: BufferId, to: BufferId) -> Expr {
    e.rewrite(&mut |x| match x {
        Expr::Load(b, idx) if b == from => Expr::Load(to, idx),
        other => other,
    })
}

/// Makes `block` read its `read_index`-th buffer through a new copy in `scope`. Returns
/// the copy block.
pub fn cache_read(
    p: &mut Program,
    block: BlockId,
    read_index: i64,
    scope: &str,
) -> Result<BlockId> {
    // 1. Check the arguments.
    let scope = parse_scope(scope)?;
    let reads = p.block_reads(block);
    let name = p.block(block).name.clone();
    let Some((src, _)) = usize::try_from(read_index)
        .ok()
        .and_then(|i| reads.get(i))
        .cloned()
    else {
        return Err(ScheduleError::IndexOutOfRange {
            block: name,
            what: "read buffers",
            index: read_index,
            count: reads.len(),
        });
    };
    if src == p.block(block).body.buffer {
        return Err(ScheduleError::Unsupported {
            primitive: "cache_read",
            block: name,
            reason: "it reads the buffer it writes".into(),
        });
    }
    // 2. The copy buffer and block; redirect the block's loads.
    let dst = new_cache_buffer(p, src, scope);
    let bname = p.fresh_block_name(&p.buffer(dst).name.clone());
    let top = copy_block(p, &bname, src, dst);
    let value = replace_loads(&p.block(block).body.value, src, dst);
    p.block_mut(block).body.value = value;
    // 3. Insert after the source's producers, in the scope shared with the block.
    let writers: Vec<Node> = p
        .writers(src)
        .into_iter()
        .filter(|w| *w != block)
        .map(Node::Block)
        .collect();
    if writers.is_empty() {
        p.root.insert(0, top);
    } else {
        let mut all = writers.clone();
        all.push(Node::Block(block));
        let lca = common_ancestor(p, &all);
        let after = writers
            .iter()
            .filter_map(|w| child_containing(p, lca, *w))
            .max()
            .map_or(0, |i| i + 1);
        p.body_mut(lca).insert(after, top);
    }
    match top {
        Node::Loop(l) => Ok(*p.blocks_under(Node::Loop(l)).first().expect("copy block")),
        Node::Block(b) => Ok(b),
    }
}

/// Redirects `block`'s loads of the buffer that the copy block `cache` (made by
/// `cache_read`) copies to the copy. The copy must run before `block` and must not sit
/// under a loop beside other blocks that `block` is not under (moved there, it covers
/// that loop's readers only); `compute_at` of the copy later covers every reader under
/// its target, or refuses.
pub fn read_cache(p: &mut Program, block: BlockId, cache: BlockId) -> Result<()> {
    let name = p.block(block).name.clone();
    let cname = p.block(cache).name.clone();
    let refuse = |reason: String| ScheduleError::Unsupported {
        primitive: "read_cache",
        block: name.clone(),
        reason,
    };
    let dst = p.block(cache).body.buffer;
    let src = match (p.block_reads(cache).as_slice(), &p.block(cache).body.value) {
        ([(src, _)], Expr::Load(..)) if p.buffer(dst).kind == BufferKind::Intermediate => *src,
        _ => return Err(refuse(format!("{cname} is not a copy made by cache_read"))),
    };
    if block == cache || !p.block_reads(block).iter().any(|(b, _)| *b == src) {
        return Err(refuse(format!(
            "it does not read {}, which {cname} copies",
            p.buffer(src).name
        )));
    }
    let order = p.blocks_in_order();
    let at = |b: BlockId| order.iter().position(|x| *x == b);
    if at(cache) >= at(block) {
        return Err(refuse(format!("{cname} does not run before it")));
    }
    // Loops of the copy's own nest are its to leave; a loop that holds other blocks and
    // not `block` is one the copy was moved under, covering that loop's readers only.
    if let Some(l) = p.ancestors(Node::Block(cache)).into_iter().find(|l| {
        !p.is_ancestor(*l, Node::Block(block)) && p.blocks_under(Node::Loop(*l)) != [cache]
    }) {
        return Err(refuse(format!(
            "{cname} is under loop {}, which it is not",
            p.loop_name(l)
        )));
    }
    let value = replace_loads(&p.block(block).body.value, src, dst);
    p.block_mut(block).body.value = value;
    Ok(())
}

/// Makes `block` write into a new buffer in `scope`, copied back by a new block right
/// after it. Returns the copy-back block.
pub fn cache_write(
    p: &mut Program,
    block: BlockId,
    write_index: i64,
    scope: &str,
) -> Result<BlockId> {
    // 1. Check the arguments: the block must be the only writer of its buffer.
    let scope = parse_scope(scope)?;
    let name = p.block(block).name.clone();
    if write_index != 0 {
        return Err(ScheduleError::IndexOutOfRange {
            block: name,
            what: "written buffers",
            index: write_index,
            count: 1,
        });
    }
    let src = p.block(block).body.buffer;
    let writers = p.writers(src);
    if writers != [block] {
        return Err(ScheduleError::NotSingleWriter {
            buffer: p.buffer(src).name.clone(),
            writers: block_names(p, &writers),
            primitive: "cache_write",
        });
    }
    // 2. Redirect the block's stores and its reads of its own output to the cache.
    let dst = new_cache_buffer(p, src, scope);
    let blk = p.block_mut(block);
    blk.body.buffer = dst;
    blk.body.value = replace_loads(&blk.body.value, src, dst);
    if let Some(init) = &mut blk.init {
        init.buffer = dst;
        init.value = replace_loads(&init.value, src, dst);
    }
    // 3. The copy-back block, right after the block in the scope shared with the readers.
    let bname = p.fresh_block_name(&p.buffer(dst).name.clone());
    let top = copy_block(p, &bname, dst, src);
    let mut all: Vec<Node> = p.readers(src).into_iter().map(Node::Block).collect();
    let lca = if all.is_empty() {
        None
    } else {
        all.push(Node::Block(block));
        common_ancestor(p, &all)
    };
    let after = child_containing(p, lca, Node::Block(block)).map_or(0, |i| i + 1);
    p.body_mut(lca).insert(after, top);
    match top {
        Node::Loop(l) => Ok(*p.blocks_under(Node::Loop(l)).first().expect("copy block")),
        Node::Block(b) => Ok(b),
    }
}
