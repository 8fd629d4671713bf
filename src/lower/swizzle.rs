//! The 128-byte swizzle of shared buffers (`storage_swizzle`).
//!
//! A swizzled buffer, compacted to rows of `row` elements (its innermost extent), is
//! stored in panels of `panel` columns, `panel` elements making 128 bytes: panel `j` holds
//! columns `j * panel ..` of every row, one 128-byte row after another, and within a row
//! the 16-byte chunk `c` is stored at chunk `c ^ (r % 8)`. Eight consecutive rows of a
//! panel are one 1024-byte atom. This is the layout Hopper's `wgmma` reads its shared
//! operands in with the 128-byte swizzle mode (the PTX ISA's canonical K-major and
//! MN-major layouts: the hardware applies the XOR to address bits 4-6 from bits 7-9, so
//! atoms start on 1024-byte boundaries), and a layout in which the eight 16-byte rows an
//! `ldmatrix` reads fall in distinct banks without padding.
//!
//! The mapping is a permutation of the buffer's elements that keeps each 16-byte chunk
//! whole, so the lowered kernel keeps logical flat indices (the interpreter runs them as
//! they are) and the CUDA printer applies [`physical`] to every access of the buffer;
//! software pipelining stacks its stages as further rows.

use super::kernel::Kernel;
use super::{LowerError, Result};
use crate::ir::{BufferId, DType, Program, Scope};

/// Bytes of a swizzled row, and of the chunks permuted within it.
pub const ROW_BYTES: i64 = 128;
pub const CHUNK_BYTES: i64 = 16;
/// Rows of one swizzle atom (1024 bytes).
pub const ATOM_ROWS: i64 = 8;

/// How a swizzled allocation is laid out: rows of `row` elements, `rows` of them (all
/// pipeline stages), in panels of `panel` elements (128 bytes).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Swizzle {
    pub row: i64,
    pub rows: i64,
    pub panel: i64,
}

impl Swizzle {
    /// The swizzle of allocation `size` elements of rows of `row` elements of `dtype`.
    pub fn new(dtype: DType, row: i64, size: i64) -> Self {
        Swizzle {
            row,
            rows: size / row,
            panel: ROW_BYTES / dtype.bytes() as i64,
        }
    }

    fn chunk(&self) -> i64 {
        self.panel * CHUNK_BYTES / ROW_BYTES
    }

    /// Where logical flat element `f` is stored.
    pub fn physical(&self, f: i64) -> i64 {
        let (r, c) = (f / self.row, f % self.row);
        let chunk = self.chunk();
        let swizzled = ((c % self.panel) / chunk) ^ (r % ATOM_ROWS);
        (c / self.panel) * self.rows * self.panel + r * self.panel + swizzled * chunk + c % chunk
    }

    /// Where element `f` would be without the chunk permutation: the address a `wgmma`
    /// descriptor names (the hardware permutes the chunks itself).
    pub fn unpermuted(&self, f: i64) -> i64 {
        let (r, c) = (f / self.row, f % self.row);
        (c / self.panel) * self.rows * self.panel + r * self.panel + c % self.panel
    }

    /// Bytes from one panel to the next.
    pub fn panel_bytes(&self, dtype: DType) -> i64 {
        self.rows * self.panel * dtype.bytes() as i64
    }
}

/// The swizzle of each swizzled shared allocation of a lowered kernel.
pub fn of_kernel(p: &Program, k: &Kernel) -> Vec<(BufferId, Swizzle)> {
    k.allocs
        .iter()
        .filter_map(|a| {
            let row = a.swizzle_row?;
            Some((
                a.buffer,
                Swizzle::new(p.buffer(a.buffer).dtype, row, a.size),
            ))
        })
        .collect()
}

/// The row length of a swizzled buffer compacted to `extents`, or why it cannot be
/// swizzled: its rows must be whole 128-byte panels and its rows whole atoms of eight.
pub(super) fn row_of(p: &Program, buffer: BufferId, extents: &[i64]) -> Result<i64> {
    let b = p.buffer(buffer);
    let panel = ROW_BYTES / b.dtype.bytes() as i64;
    let row = *extents.last().unwrap_or(&1);
    let rows: i64 = extents[..extents.len().saturating_sub(1)].iter().product();
    if b.scope != Scope::Shared || row % panel != 0 || rows % ATOM_ROWS != 0 {
        return Err(LowerError::Swizzle(format!(
            "{} ({:?} after compaction) needs rows of a multiple of {panel} elements ({ROW_BYTES} bytes) and a multiple of {ATOM_ROWS} rows",
            b.name, extents
        )));
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_swizzle_permutes_whole_chunks_within_each_allocation() {
        // f16 rows of 128 elements (two panels), 16 rows.
        let s = Swizzle::new(DType::F16, 128, 128 * 16);
        let mut seen = vec![false; 128 * 16];
        for f in 0..128 * 16 {
            let x = s.physical(f) as usize;
            assert!(!seen[x], "element {f} lands where another did");
            seen[x] = true;
            if f % 8 != 0 {
                assert_eq!(
                    s.physical(f),
                    s.physical(f - 1) + 1,
                    "a chunk is split at {f}"
                );
            }
        }
        // Row 1, chunk 0 of panel 0 goes to chunk 1; column 64 starts panel 1.
        assert_eq!(s.physical(128), 64 + 8);
        assert_eq!(s.physical(64), 16 * 64);
        assert_eq!(s.unpermuted(128 + 64 + 3), 16 * 64 + 64 + 3);
        assert_eq!(s.panel_bytes(DType::F16), 16 * 128);
    }

    #[test]
    fn a_step_of_whole_atoms_moves_by_whole_panel_rows() {
        // What the CUDA printer relies on to swizzle a thread's offset once: adding j whole
        // atoms (8 rows) to a logical index adds 8 * j rows of a panel to its place.
        let s = Swizzle::new(DType::BF16, 192, 192 * 48);
        for f in 0..192 * 8 {
            for j in 0..5 {
                assert_eq!(
                    s.physical(f + j * 8 * 192),
                    s.physical(f) + j * 8 * s.panel,
                    "f = {f}, j = {j}"
                );
            }
        }
    }

    #[test]
    fn the_eight_rows_of_an_ldmatrix_fall_in_distinct_banks() {
        // Rows of 64 f16 (128 bytes): chunk 0 of rows 0..8 are eight different 16-byte
        // bank groups of one 128-byte line.
        let s = Swizzle::new(DType::F16, 64, 64 * 8);
        let mut groups: Vec<i64> = (0..8)
            .map(|r| (s.physical(r * 64) * 2 % 128) / 16)
            .collect();
        groups.sort();
        assert_eq!(groups, (0..8).collect::<Vec<_>>());
    }
}
