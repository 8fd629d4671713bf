//! The order a cooperative fetch walks its copy: along the axis its source stores
//! contiguously.
//!
//! A copy into shared memory walks the staged buffer's axes in their order, the last
//! fastest, so that neighbouring threads read neighbouring words of a GEMM's `A[m, k]`.
//! A staged buffer that an elementwise stage computes from a global input (a conv's
//! data gathered as its GEMM operand, `X_im2col[m, kk]`, later inlined into the copy) may
//! store that input's contiguous axis in another axis: an NCHW conv's row of pixels is a
//! digit of `m`, and walking `kk` reads a window's three neighbours and then jumps a row
//! or a channel. [`contiguous_axis`] finds the axis of the copy along which a warp's 32
//! consecutive steps touch the fewest 32-byte sectors of the source, so that the fetch
//! walks it fastest.

use crate::ir::{BlockId, BufferKind, Expr, Program, VarId};
use crate::schedule::inline::compute_inline;

/// Threads of a warp: the consecutive steps one load instruction takes.
const WARP: i64 = 32;
/// Bytes of the memory sectors a load touches.
const SECTOR: i64 = 32;
/// Warps' worth of steps measured along each axis, at most (spread over its extent).
const SAMPLES: i64 = 16;
/// How many fewer sectors (a share) the other axis must touch than the last one does.
const MARGIN: f64 = 0.25;

/// The iteration variable (by position) of `copy` along which a warp's steps touch
/// markedly fewer sectors of the global input it reads through the stages that compute its
/// source (inlined into it, on a copy of `p`) than along its last variable; `None` where
/// the last is that axis, where it reads its source directly, or where it reads no single
/// input.
pub(super) fn contiguous_axis(p: &Program, copy: BlockId) -> Option<usize> {
    // A copy of a global input reads it as stored: nothing to inline, nothing to copy.
    let [(source, _)] = p.block_reads(copy)[..] else {
        return None;
    };
    if p.buffer(source).kind == BufferKind::Input {
        return None;
    }
    let mut p = p.clone();
    // Inline the chain of stages between the copy and the input (a padding, a gather,
    // a zero-fill of a padded GEMM operand): at most a few.
    for _ in 0..8 {
        let reads = p.block_reads(copy);
        let [(buf, _)] = reads.as_slice() else {
            return None;
        };
        if p.buffer(*buf).kind == BufferKind::Input {
            break;
        }
        let [writer] = p.writers(*buf)[..] else {
            return None;
        };
        compute_inline(&mut p, writer).ok()?;
    }
    let reads = p.block_reads(copy);
    let [(buf, idx)] = reads.as_slice() else {
        return None;
    };
    let buffer = p.buffer(*buf);
    if buffer.kind != BufferKind::Input {
        return None;
    }
    let bytes = buffer.dtype.bytes() as i64;
    let vars: Vec<(VarId, i64)> = p
        .block(copy)
        .iter_vars
        .iter()
        .map(|iv| (iv.var, iv.extent))
        .collect();
    let sectors =
        |(v, extent): (VarId, i64)| sectors_per_warp(idx, &buffer.shape, bytes, v, extent);
    let last = vars.iter().rposition(|(_, e)| *e > 1)?;
    let last_sectors = sectors(vars[last]);
    let (best, fewest) = vars
        .iter()
        .enumerate()
        .filter(|(_, (_, e))| *e > 1)
        .map(|(i, v)| (i, sectors(*v)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    (best != last && fewest < last_sectors * (1.0 - MARGIN)).then_some(best)
}

/// The 32-byte sectors a warp's 32 consecutive steps of `v` (every other variable 0)
/// touch in a row-major buffer of `shape` read at `idx`, elements of `bytes`: the mean
/// over up to [`SAMPLES`] runs spread over `v`'s extent.
fn sectors_per_warp(idx: &[Expr], shape: &[i64], bytes: i64, v: VarId, extent: i64) -> f64 {
    let address = |t: i64| {
        idx.iter().zip(shape).fold(0i64, |acc, (e, dim)| {
            acc.wrapping_mul(*dim)
                .wrapping_add(e.eval_int(&|u| if u == v { t } else { 0 }))
        })
    };
    let warps = (extent + WARP - 1) / WARP;
    let runs = warps.clamp(1, SAMPLES);
    let stride = warps / runs * WARP;
    let total: usize = (0..runs)
        .map(|r| {
            let from = r * stride;
            let mut touched: Vec<i64> = (from..(from + WARP).min(extent))
                .map(|t| (address(t) * bytes).div_euclid(SECTOR))
                .collect();
            touched.sort_unstable();
            touched.dedup();
            touched.len()
        })
        .sum();
    total as f64 / runs as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Schedule;

    /// `spec`'s conv as its GEMM (`im2col`), the copy of its gathered data staged in
    /// shared memory, and the axis [`contiguous_axis`] finds for that copy.
    fn gathered_axis(spec: &str) -> Option<usize> {
        let p = crate::workload::preset(spec).unwrap().to_program();
        let mut sch = Schedule::new(p, 0);
        let main = sch
            .get_block("conv2d_nchw")
            .or_else(|_| sch.get_block("conv2d_nhwc"));
        let main = main.unwrap();
        let made = sch.im2col(main).unwrap();
        let p = sch.program();
        let mb = sch.block_id(main).unwrap();
        let data = p.find_block(&made.data)[0];
        let gathered = p.block_write(data).0;
        let idx = p
            .block_reads(mb)
            .iter()
            .position(|(b, _)| *b == gathered)
            .unwrap();
        let copy = sch.cache_read(main, idx as i64, "shared").unwrap();
        let copy = sch.block_id(copy).unwrap();
        contiguous_axis(sch.program(), copy)
    }

    #[test]
    fn an_nchw_gather_is_walked_along_its_pixels() {
        // X_im2col[m, kk]: a row's pixels are m's fastest digit, a window's columns kk's.
        let nchw = "conv2d_nchw:n=2,c=8,h=10,w=12,k=16,r=3,s=3,stride=1,pad=1";
        assert_eq!(gathered_axis(nchw), Some(0));
        let pointwise = "conv2d_nchw:n=1,c=16,h=7,w=9,k=8,r=1,s=1";
        assert_eq!(gathered_axis(pointwise), Some(0));
    }

    #[test]
    fn an_nhwc_gather_and_a_gemm_operand_keep_their_order() {
        // Channels last: the channel is kk's fastest digit, as the fetch walks it already.
        let nhwc = "conv2d_nhwc:n=2,c=8,h=10,w=12,k=16,r=3,s=3,stride=1,pad=1";
        assert_eq!(gathered_axis(nhwc), None);
        // A GEMM's operand is a global input the copy reads as it is stored.
        let p = crate::workload::preset("matmul:64x48x32")
            .unwrap()
            .to_program();
        let mut sch = Schedule::new(p, 0);
        let main = sch.get_block("C").unwrap();
        let copy = sch.cache_read(main, 0, "shared").unwrap();
        let copy = sch.block_id(copy).unwrap();
        assert_eq!(contiguous_axis(sch.program(), copy), None);
    }

    /// The plain sketch of an NCHW conv: the samples that take the GEMM view and gather
    /// its data in the fetch walk the pixels fastest (the copy's loops fused `ax1, ax0`),
    /// and each of them computes the reference with a GPU's semantics; without
    /// `walk_contiguous` none does. With `walk_unroll` (off by default) their steps are
    /// unrolled by a decision drawn both ways, without it they carry none. With
    /// `walk_aligned` the walked copy's rows are padded to 16 bytes past the banks, without
    /// it to one element.
    #[test]
    fn the_plain_sketch_walks_an_nchw_gather_along_its_pixels() {
        use super::super::{apply_sketch, SketchKind};
        use crate::search::space::SearchSpace;
        // K = 36 and 144 pixels: rows of whole 16-byte vectors, so no padding kernel writes
        // the gathered data (the fetch gathers them).
        let spec = "conv2d_nchw:n=1,c=4,h=12,w=12,k=8,r=3,s=3,stride=1,pad=1";
        let p = crate::workload::preset(spec).unwrap().to_program();
        // The walked samples: whose fetch's steps carry no unroll decision, were left
        // rolled by it, were unrolled.
        let walked = |space: &SearchSpace| {
            let mut walked = [0; 3];
            for seed in 0..48 {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(space, &mut sch, seed, SketchKind::Plain)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                let trace = sch.trace().to_string();
                if !(trace.contains("reorder(ax1, ax0)") && trace.contains("ax1_ax0_fused = fuse("))
                {
                    continue;
                }
                assert!(trace.contains("im2col("), "seed {seed}: {trace}");
                // The walked copy's rows (padded after its loops are reordered), as
                // `walk_aligned` says.
                let offset = if space.walk_aligned { 4 } else { 1 };
                let walk = trace.find("reorder(ax1, ax0)").unwrap();
                let padding = trace[walk..]
                    .lines()
                    .find(|l| l.starts_with("storage_align("));
                let padded = format!("factor=32, offset={offset})");
                assert!(
                    padding.is_some_and(|l| l.ends_with(&padded)),
                    "seed {seed}: {trace}"
                );
                let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                let err = crate::interp::check_lowered(&p, &lowered, seed)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                assert!(err < 1e-4, "seed {seed}: relative error {err}");
                let steps = crate::lower::auto_unrolled(sch.program(), &lowered, "ax1_ax0_fused_0");
                walked[match steps {
                    None => 0,
                    Some(false) => 1,
                    Some(true) => 2,
                }] += 1;
            }
            walked
        };
        let mut space = SearchSpace::cuda_default();
        assert!(space.walk_contiguous && space.walk_unroll.is_empty());
        let [plain, rolled, unrolled] = walked(&space);
        assert!(
            plain >= 2 && rolled + unrolled == 0,
            "{plain} {rolled} {unrolled}"
        );
        space.walk_aligned = false;
        assert_eq!(walked(&space)[0], plain);
        space.walk_aligned = true;
        // Both ways of `walk_unroll`'s decision are drawn.
        space.walk_unroll = vec![0, 32];
        let [plain, rolled, unrolled] = walked(&space);
        assert!(
            plain == 0 && rolled >= 1 && unrolled >= 1,
            "{plain} {rolled} {unrolled}"
        );
        space.walk_contiguous = false;
        assert_eq!(walked(&space), [0, 0, 0]);
    }
}
