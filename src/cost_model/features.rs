//! Program features: what the cost model sees of one candidate, computed from its lowered
//! kernels (no compile, no device). Every feature is named in [`FEATURE_NAMES`], in
//! vector order; `tessel model features WORKLOAD --schedule FILE` prints them.
//!
//! Changing the list, the order or the meaning of a feature bumps
//! [`FEATURE_SET_VERSION`]: a stored model of another version is never used.

use crate::lower::{Kernel, Lowered};

/// The version of the feature set; models store the version they were trained on.
pub const FEATURE_SET_VERSION: u32 = 1;

/// What the features need to know of the device: derived from the target's arch alone,
/// so that records of any device of one arch featurize the same way in training and in
/// tuning.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    /// Streaming multiprocessors (CUDA) or cores (CPU).
    pub processors: i64,
    /// Resident threads per SM (CUDA); 1 on the CPU.
    pub max_threads_per_processor: i64,
    /// Shared memory per SM in bytes (CUDA); 0 on the CPU.
    pub shared_bytes_per_processor: i64,
    /// 32-bit registers per SM (CUDA); 0 on the CPU.
    pub registers_per_processor: i64,
}

impl DeviceSpec {
    /// The spec of a CUDA arch (`sm_90a`, `sm_80`, ...): Hopper and Ampere figures, and
    /// a conservative default for others.
    pub fn cuda(arch: &str) -> DeviceSpec {
        let sm: u32 = arch
            .trim_start_matches("sm_")
            .trim_end_matches(|c: char| c.is_ascii_alphabetic())
            .parse()
            .unwrap_or(0);
        let (processors, shared) = match sm {
            90.. => (132, 228 * 1024),
            80 => (108, 164 * 1024),
            86 | 89 => (84, 100 * 1024),
            _ => (80, 96 * 1024),
        };
        DeviceSpec {
            processors,
            max_threads_per_processor: 2048,
            shared_bytes_per_processor: shared,
            registers_per_processor: 65536,
        }
    }

    /// The spec of a CPU with `cores` cores.
    pub fn cpu(cores: i64) -> DeviceSpec {
        DeviceSpec {
            processors: cores.max(1),
            max_threads_per_processor: 1,
            shared_bytes_per_processor: 0,
            registers_per_processor: 0,
        }
    }
}

/// The feature names, in vector order.
pub const FEATURE_NAMES: &[&str] = &[
    "kernels",
    "log_blocks",
    "log_threads_per_block",
    "log_shared_bytes",
    "waves",
];

/// `log2(1 + x)`: the scale of every count feature.
fn log1p2(x: f64) -> f32 {
    (1.0 + x.max(0.0)).log2() as f32
}

/// The features of one lowered candidate, `FEATURE_NAMES.len()` of them.
pub fn featurize(l: &Lowered, dev: &DeviceSpec) -> Vec<f32> {
    let main = l
        .kernels
        .iter()
        .max_by_key(|k| k.grid.iter().product::<i64>() * k.threads());
    let blocks = main.map_or(1, |k: &Kernel| k.grid.iter().product::<i64>());
    let threads = main.map_or(1, |k| k.threads());
    let shared = main.map_or(0, |k| k.shared_bytes(&l.program));
    let waves = blocks as f64 / dev.processors.max(1) as f64;
    vec![
        l.kernels.len() as f32,
        log1p2(blocks as f64),
        log1p2(threads as f64),
        log1p2(shared as f64),
        waves as f32,
    ]
}
