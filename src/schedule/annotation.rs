//! `bind`, `vectorize`, `unroll`, `parallel`, `annotate`, `storage_align`, `storage_swizzle`,
//! `tensorize`:
//! changing how a loop runs or how a buffer is laid out, never what is computed.
//!
//! Invariant: a loop whose iterations accumulate into one element (it appears in the
//! binding of a reduction iteration variable) is never made parallel, vectorized or bound
//! to a thread.

use super::error::{Result, ScheduleError};
use super::util::kind_str;
use crate::ir::{
    AnnValue, BlockId, IterKind, LoopId, LoopKind, Node, Program, StorageAlign, ThreadTag,
};

/// The first block under `l` whose reduction bindings use `l`'s variable.
fn reduction_block_using(p: &Program, l: LoopId) -> Option<BlockId> {
    let v = p.lp(l).var;
    p.blocks_under(Node::Loop(l)).into_iter().find(|b| {
        let blk = p.block(*b);
        blk.iter_vars
            .iter()
            .zip(&blk.bindings)
            .any(|(iv, e)| iv.kind == IterKind::Reduce && e.uses_var(v))
    })
}

fn require_serial(p: &Program, l: LoopId, primitive: &'static str) -> Result<()> {
    if p.lp(l).kind != LoopKind::Serial {
        return Err(ScheduleError::NotSerial {
            name: p.loop_name(l).into(),
            kind: kind_str(p.lp(l).kind),
            primitive,
        });
    }
    Ok(())
}

/// Binds a loop to a thread index.
pub fn bind(p: &mut Program, l: LoopId, thread: &str) -> Result<()> {
    // 1. A known tag, a serial loop that carries no reduction.
    let tag = ThreadTag::parse(thread)
        .ok_or_else(|| ScheduleError::UnknownThread { tag: thread.into() })?;
    require_serial(p, l, "bind")?;
    if let Some(b) = reduction_block_using(p, l) {
        return Err(ScheduleError::BindReduction {
            name: p.loop_name(l).into(),
            tag: tag.to_string(),
            block: p.block(b).name.clone(),
        });
    }
    // 2. Loops bound to the same tag in the same nest agree on the extent.
    let extent = p.lp(l).extent;
    let related = p
        .ancestors(Node::Loop(l))
        .into_iter()
        .chain(p.loops_under(l));
    for o in related {
        if p.lp(o).kind == LoopKind::Thread(tag) && p.lp(o).extent != extent {
            return Err(ScheduleError::ThreadExtentMismatch {
                name: p.loop_name(l).into(),
                extent,
                tag: tag.to_string(),
                other: p.loop_name(o).into(),
                other_extent: p.lp(o).extent,
            });
        }
    }
    p.lp_mut(l).kind = LoopKind::Thread(tag);
    Ok(())
}

/// Marks an innermost loop as vectorized.
pub fn vectorize(p: &mut Program, l: LoopId) -> Result<()> {
    require_serial(p, l, "vectorize")?;
    if !matches!(p.lp(l).body.as_slice(), [Node::Block(_)]) {
        return Err(ScheduleError::NotInnermost {
            name: p.loop_name(l).into(),
            primitive: "vectorize",
        });
    }
    if let Some(b) = reduction_block_using(p, l) {
        return Err(ScheduleError::LoopCarriesReduction {
            name: p.loop_name(l).into(),
            block: p.block(b).name.clone(),
            primitive: "vectorize",
        });
    }
    p.lp_mut(l).kind = LoopKind::Vectorized;
    Ok(())
}

/// Marks a loop as unrolled.
pub fn unroll(p: &mut Program, l: LoopId) -> Result<()> {
    require_serial(p, l, "unroll")?;
    p.lp_mut(l).kind = LoopKind::Unrolled;
    Ok(())
}

/// Marks a loop as parallel (CPU threads).
pub fn parallel(p: &mut Program, l: LoopId) -> Result<()> {
    require_serial(p, l, "parallel")?;
    if let Some(b) = reduction_block_using(p, l) {
        return Err(ScheduleError::LoopCarriesReduction {
            name: p.loop_name(l).into(),
            block: p.block(b).name.clone(),
            primitive: "parallel",
        });
    }
    p.lp_mut(l).kind = LoopKind::Parallel;
    Ok(())
}

/// What an annotation is attached to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AnnTarget {
    Loop(LoopId),
    Block(BlockId),
}

/// Sets an annotation (e.g. `pragma_auto_unroll_max_step`) on a loop or block.
pub fn annotate(p: &mut Program, target: AnnTarget, key: &str, value: AnnValue) -> Result<()> {
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return Err(ScheduleError::InvalidArgument {
            what: "annotation key",
            reason: format!("{key:?} is not a name"),
        });
    }
    let pipeline = key == crate::ir::pipeline::STAGE_KEY;
    match target {
        AnnTarget::Loop(l) => {
            p.lp_mut(l).annotations.insert(key.into(), value);
            // A software pipeline is checked where it is set (and again when lowered).
            if pipeline {
                crate::ir::pipeline::plan(p, l)?;
            }
        }
        AnnTarget::Block(b) => {
            if pipeline {
                return Err(ScheduleError::InvalidArgument {
                    what: "annotation",
                    reason: format!("{key} annotates a loop, not block {}", p.block(b).name),
                });
            }
            p.block_mut(b).annotations.insert(key.into(), value);
        }
    };
    Ok(())
}

/// Pads the stride of `axis` of the buffer written by `block` so that
/// `stride % factor == offset`.
pub fn storage_align(
    p: &mut Program,
    b: BlockId,
    buffer_index: i64,
    axis: i64,
    factor: i64,
    offset: i64,
) -> Result<()> {
    let buf = super::util::written_buffer(p, b, buffer_index)?;
    let rank = p.buffer(buf).shape.len() as i64;
    if axis < 0 || axis >= rank {
        return Err(ScheduleError::InvalidArgument {
            what: "storage_align axis",
            reason: format!("axis {axis} of {}-d buffer {}", rank, p.buffer(buf).name),
        });
    }
    if factor <= 0 || offset < 0 || offset >= factor {
        return Err(ScheduleError::InvalidArgument {
            what: "storage_align",
            reason: format!(
                "need factor > 0 and 0 <= offset < factor, got factor={factor}, offset={offset}"
            ),
        });
    }
    if !p.allocs.contains(&buf) {
        return Err(ScheduleError::InvalidArgument {
            what: "storage_align",
            reason: format!(
                "{} is a parameter; only allocated buffers can be aligned",
                p.buffer(buf).name
            ),
        });
    }
    if p.buffer(buf).swizzle {
        return Err(ScheduleError::InvalidArgument {
            what: "storage_align",
            reason: format!(
                "{} is swizzled (storage_swizzle); a swizzled buffer is not padded",
                p.buffer(buf).name
            ),
        });
    }
    let a = StorageAlign {
        axis: axis as usize,
        factor,
        offset,
    };
    let align = &mut p.buffer_mut(buf).align;
    align.retain(|x| x.axis != a.axis);
    align.push(a);
    Ok(())
}

/// Stores the shared buffer written by `b` with the 128-byte swizzle (`lower::swizzle`):
/// in panels of rows of 128 bytes whose 16-byte chunks are permuted by the row, the
/// layout Hopper's `wgmma` reads its shared operands in, and one where the eight rows an
/// `ldmatrix` reads lie in distinct banks without padding. The buffer's dtype must divide
/// 16 bytes; whether its tile is whole panels is checked by the lowering, which knows the
/// compacted extents.
pub fn storage_swizzle(p: &mut Program, b: BlockId, buffer_index: i64) -> Result<()> {
    let buf = super::util::written_buffer(p, b, buffer_index)?;
    let buffer = p.buffer(buf);
    let fail = |reason: String| {
        Err(ScheduleError::InvalidArgument {
            what: "storage_swizzle",
            reason,
        })
    };
    if !p.allocs.contains(&buf) || buffer.scope != crate::ir::Scope::Shared {
        return fail(format!(
            "{} is {}; only allocated shared buffers can be swizzled",
            buffer.name,
            buffer.scope.name()
        ));
    }
    if buffer.shape.len() < 2 || 16 % buffer.dtype.bytes() != 0 {
        return fail(format!(
            "{} must have at least two axes and elements that divide 16 bytes",
            buffer.name
        ));
    }
    if !buffer.align.is_empty() {
        return fail(format!(
            "{} is padded by storage_align; a swizzled buffer is not padded",
            buffer.name
        ));
    }
    p.buffer_mut(buf).swizzle = true;
    Ok(())
}

/// Marks the loop nest rooted at `l` to be replaced by a tensor-core intrinsic
/// (`ir::tensorize`: the nest must match the intrinsic's description, else the error
/// names the loop that does not).
pub fn tensorize(p: &mut Program, l: LoopId, intrin: &str) -> Result<()> {
    use crate::ir::tensorize::{check, Intrin, TensorizeError, KEY};
    let i = Intrin::parse(intrin).ok_or_else(|| TensorizeError::Unknown {
        loop_name: p.loop_name(l).into(),
        name: intrin.into(),
    })?;
    check(p, l, i)?;
    p.lp_mut(l)
        .annotations
        .insert(KEY.into(), AnnValue::Str(i.name().into()));
    Ok(())
}
