//! Access sets for race detection.
//!
//! Shared memory: between two barriers (an epoch) each element remembers the thread
//! that wrote it and up to two distinct threads that read it. Two distinct readers are
//! enough: whichever thread writes next, at least one of them differs from it when any
//! reader other than the writer exists. Elements carry the epoch they were last touched
//! in, so a barrier only bumps a counter.
//!
//! Global memory: each written element remembers its last writer (block, thread, epoch)
//! and value; a different value written by another block, or by another thread of the
//! same block in the same epoch, is a conflict. Equal values are not (duplicated
//! writes of one result are benign).

use std::fmt;

const NONE: u32 = u32::MAX;

/// What two threads did to one shared element without a barrier between them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RaceKind {
    WriteWrite,
    ReadWrite,
}

impl fmt::Display for RaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RaceKind::WriteWrite => "write-write",
            RaceKind::ReadWrite => "read-write",
        })
    }
}

#[derive(Copy, Clone)]
struct Cell {
    epoch: u32,
    writer: u32,
    reader1: u32,
    reader2: u32,
}

const EMPTY: Cell = Cell {
    epoch: 0,
    writer: NONE,
    reader1: NONE,
    reader2: NONE,
};

/// The shared-memory access sets of one thread block.
pub(super) struct SharedTrack {
    epoch: u32,
    cells: Vec<Vec<Cell>>,
}

impl SharedTrack {
    /// Tracking for shared allocs of the given sizes.
    pub fn new(sizes: &[usize]) -> SharedTrack {
        SharedTrack {
            epoch: 1,
            cells: sizes.iter().map(|&n| vec![EMPTY; n]).collect(),
        }
    }

    /// A barrier (or a fresh block): forget every access.
    pub fn barrier(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            for c in self.cells.iter_mut().flatten() {
                *c = EMPTY;
            }
            self.epoch = 1;
        }
    }

    fn cell(&mut self, slot: usize, off: usize) -> Option<&mut Cell> {
        let epoch = self.epoch;
        let c = self.cells.get_mut(slot)?.get_mut(off)?;
        if c.epoch != epoch {
            *c = Cell { epoch, ..EMPTY };
        }
        Some(c)
    }

    /// Records a read by `thread`; returns the other thread and the kind on a race.
    pub fn read(&mut self, slot: usize, off: usize, thread: u32) -> Option<(u32, RaceKind)> {
        let c = self.cell(slot, off)?;
        if c.writer != NONE && c.writer != thread {
            return Some((c.writer, RaceKind::ReadWrite));
        }
        if c.reader1 == NONE {
            c.reader1 = thread;
        } else if c.reader1 != thread && c.reader2 == NONE {
            c.reader2 = thread;
        }
        None
    }

    /// Records a write by `thread`; returns the other thread and the kind on a race.
    pub fn write(&mut self, slot: usize, off: usize, thread: u32) -> Option<(u32, RaceKind)> {
        let c = self.cell(slot, off)?;
        if c.writer != NONE && c.writer != thread {
            return Some((c.writer, RaceKind::WriteWrite));
        }
        for r in [c.reader1, c.reader2] {
            if r != NONE && r != thread {
                return Some((r, RaceKind::ReadWrite));
            }
        }
        c.writer = thread;
        None
    }
}

#[derive(Copy, Clone)]
struct Last {
    block: u32,
    thread: u32,
    epoch: u64,
    value: u32,
}

/// The last writer of each element of the global buffers a kernel writes.
pub(super) struct GlobalTrack {
    /// By global slot; empty for buffers the kernel does not write.
    last: Vec<Vec<Last>>,
}

/// Who wrote a global element before a conflicting write: block and thread.
pub(super) type Writer = (u32, u32);

impl GlobalTrack {
    /// Tracking for the global buffers of the given sizes (0 for untracked ones).
    pub fn new(sizes: &[usize]) -> GlobalTrack {
        let none = Last {
            block: NONE,
            thread: NONE,
            epoch: 0,
            value: 0,
        };
        GlobalTrack {
            last: sizes.iter().map(|&n| vec![none; n]).collect(),
        }
    }

    /// Records a write of `value`; returns the earlier writer it conflicts with.
    /// `epoch` is unique per block and barrier interval.
    pub fn write(
        &mut self,
        slot: usize,
        off: usize,
        block: u32,
        thread: u32,
        epoch: u64,
        value: f32,
    ) -> Option<Writer> {
        let l = self.last.get_mut(slot)?.get_mut(off)?;
        let unordered =
            l.block != NONE && (l.block != block || (l.thread != thread && l.epoch == epoch));
        if unordered && l.value != value.to_bits() {
            return Some((l.block, l.thread));
        }
        *l = Last {
            block,
            thread,
            epoch,
            value: value.to_bits(),
        };
        None
    }
}
