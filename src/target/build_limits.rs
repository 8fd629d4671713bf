//! What a compiled CUDA kernel may use, checked right after NVRTC and before it runs:
//! register spills, stack frames and registers per block. The search derives the limits from its
//! space and the device ([`crate::search::postproc::build_limits`]); the measurement
//! worker checks each build against them.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What a compiled kernel may use (CUDA): spills, stack frame and registers per block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildLimits {
    /// Bytes of spill stores plus spill loads, summed over what ptxas reports.
    pub max_spill_bytes: u32,
    /// Bytes of a kernel's stack frame (`None`: not checked). A frame without spills is
    /// a local array the compiler could not keep in registers, e.g. an accumulator tile
    /// indexed by a loop it did not unroll: every update goes through local memory.
    #[serde(default)]
    pub max_stack_bytes: Option<u32>,
    /// Registers of a whole block: `registers per thread * threads` must fit.
    pub max_registers_per_block: u32,
}

/// Why a build broke its [`BuildLimits`].
#[derive(Clone, Debug, PartialEq, Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildRejection {
    /// More spill traffic than allowed.
    #[error("{bytes} bytes of register spills, more than {limit}")]
    RegisterSpills {
        /// Spill stores plus spill loads.
        bytes: u32,
        /// [`BuildLimits::max_spill_bytes`].
        limit: u32,
    },
    /// A local array left in local memory.
    #[error("a {bytes}-byte stack frame (local arrays not kept in registers), more than {limit}")]
    StackFrame {
        /// The largest stack frame of the unit's kernels.
        bytes: u32,
        /// [`BuildLimits::max_stack_bytes`].
        limit: u32,
    },
    /// A block needs more registers than the device has per block.
    #[error("{registers} registers x {threads} threads exceed the {limit} of a block")]
    Registers {
        /// Registers per thread.
        registers: u32,
        /// Threads of the largest block.
        threads: i64,
        /// [`BuildLimits::max_registers_per_block`].
        limit: u32,
    },
}

impl BuildLimits {
    /// Checks a build that uses `registers` per thread (unknown: not checked),
    /// `spill_bytes` of spill stores and loads and a stack frame of `stack_bytes`, whose
    /// largest thread block has `threads` threads.
    pub fn check(
        &self,
        registers: Option<u32>,
        spill_bytes: u32,
        stack_bytes: u32,
        threads: i64,
    ) -> Result<(), BuildRejection> {
        if spill_bytes > self.max_spill_bytes {
            return Err(BuildRejection::RegisterSpills {
                bytes: spill_bytes,
                limit: self.max_spill_bytes,
            });
        }
        if let Some(limit) = self.max_stack_bytes.filter(|&l| stack_bytes > l) {
            return Err(BuildRejection::StackFrame {
                bytes: stack_bytes,
                limit,
            });
        }
        if let Some(r) = registers {
            if i64::from(r) * threads > i64::from(self.max_registers_per_block) {
                return Err(BuildRejection::Registers {
                    registers: r,
                    threads,
                    limit: self.max_registers_per_block,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_limits_reject_spills_stack_frames_then_registers_per_block() {
        let limits = BuildLimits {
            max_spill_bytes: 8,
            max_stack_bytes: Some(0),
            max_registers_per_block: 65536,
        };
        assert_eq!(limits.check(Some(128), 8, 0, 512), Ok(()));
        assert_eq!(
            limits.check(Some(128), 12, 0, 512),
            Err(BuildRejection::RegisterSpills {
                bytes: 12,
                limit: 8
            })
        );
        assert_eq!(
            limits.check(Some(128), 0, 0, 1024),
            Err(BuildRejection::Registers {
                registers: 128,
                threads: 1024,
                limit: 65536
            })
        );
        assert_eq!(
            limits.check(Some(32), 0, 96, 128),
            Err(BuildRejection::StackFrame {
                bytes: 96,
                limit: 0
            })
        );
        let unchecked = BuildLimits {
            max_stack_bytes: None,
            ..limits.clone()
        };
        assert_eq!(unchecked.check(Some(32), 0, 96, 128), Ok(()));
        // A CPU build reports nothing and passes.
        assert_eq!(limits.check(None, 0, 0, 1024), Ok(()));
    }
}
