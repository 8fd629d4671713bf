//! Target descriptions: what a device is (queried from it where there is one), the limits
//! the postprocessors check candidates against, and the fingerprint records are filed
//! under in the database.

pub mod build_limits;
pub mod cpu;
pub mod cuda;

use serde::{Deserialize, Serialize};

/// Identifies where a record was measured: records only compare within one fingerprint,
/// and a lookup may fall back to another device of the same `arch`, saying so.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TargetFingerprint {
    /// `cuda` or `cpu`.
    pub kind: String,
    /// `sm_90a` for CUDA; the CPU's architecture and SIMD level (`x86_64-avx2`) for the CPU.
    pub arch: String,
    /// The device's name as the driver or the OS reports it (`NVIDIA H100 80GB HBM3`).
    pub device: String,
    /// The compiler and runtime versions, e.g. `nvrtc 13.0, driver 13.0` or `gcc 12.2.0`.
    pub toolchain: String,
}

/// The fingerprint of this machine's CPU with the C toolchain tessel builds with.
pub fn cpu_fingerprint() -> Result<TargetFingerprint, String> {
    let tc = crate::measure::cpu::CpuToolchain::detect().map_err(|f| f.message)?;
    Ok(cpu::CpuInfo::query(&tc.cc)?.fingerprint(&tc.flags, crate::measure::cpu::threads()))
}

/// The fingerprint of CUDA device 0 (needs the driver and a GPU).
pub fn cuda_fingerprint() -> Result<TargetFingerprint, String> {
    cuda::cuda_driver_available()?;
    cuda::CudaDeviceInfo::query(0)
        .map(|d| d.fingerprint())
        .map_err(|e| e.to_string())
}
