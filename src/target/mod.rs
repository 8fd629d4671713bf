//! Targets: what a kernel runs on, queried from the machine, and the fingerprint that
//! names it in the database.

pub mod cpu;

use serde::{Deserialize, Serialize};

/// What identifies a target in the database: records measured on one fingerprint are
/// reused only on an equal one (or, said so, on one of the same `arch`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TargetFingerprint {
    /// `cpu` or `cuda`.
    pub kind: String,
    /// The instruction set the kernels are built for (`x86_64-avx2`, `sm_90a`).
    pub arch: String,
    /// The device's name as the machine reports it.
    pub device: String,
    /// The compiler (and driver) versions the kernels are built with.
    pub toolchain: String,
}
