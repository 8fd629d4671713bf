//! The CUDA target: the device query (through cudarc's driver API), the architecture name
//! NVRTC compiles for, the limits candidates must fit, and the database fingerprint.
//!
//! cudarc panics when libcuda cannot be loaded, so everything here probes the library
//! first ([`cuda_driver_available`]) and turns its absence into an error.

use super::TargetFingerprint;
use cudarc::driver::sys::{self, CUdevice_attribute as Attr};
use cudarc::driver::CudaContext;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, OnceLock};
use thiserror::Error;

/// Why the CUDA target cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TargetError {
    #[error("no CUDA driver found: use --target cpu")]
    NoDriver,
    #[error("CUDA device query failed while {during}: {error}")]
    Query { during: &'static str, error: String },
}

/// The result of target queries.
pub type Result<T> = std::result::Result<T, TargetError>;

/// Whether libcuda can be loaded, checked without cudarc's loader (which panics when the
/// library is missing). The answer is computed once per process.
pub fn cuda_driver_available() -> std::result::Result<(), String> {
    static PROBE: OnceLock<bool> = OnceLock::new();
    // SAFETY: loads the driver library with the candidate names cudarc itself uses and only
    // reports whether one loads.
    if *PROBE.get_or_init(|| unsafe { sys::is_culib_present() }) {
        Ok(())
    } else {
        Err(TargetError::NoDriver.to_string())
    }
}

/// The CUDA driver's version as (major, minor), e.g. (13, 0).
pub fn driver_version() -> Result<(u32, u32)> {
    cuda_driver_available().map_err(|_| TargetError::NoDriver)?;
    let mut v = 0;
    // SAFETY: the driver is present; the out-pointer is valid. cuDriverGetVersion needs no
    // cuInit.
    unsafe { sys::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(|e| TargetError::Query {
            during: "reading the driver version",
            error: e.to_string(),
        })?;
    Ok(((v / 1000) as u32, ((v % 1000) / 10) as u32))
}

/// How many CUDA devices the driver shows this process.
pub fn device_count() -> Result<usize> {
    cuda_driver_available().map_err(|_| TargetError::NoDriver)?;
    let n = CudaContext::device_count().map_err(|e| TargetError::Query {
        during: "counting the devices",
        error: e.to_string(),
    })?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// What tessel needs to know about one CUDA device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaDeviceInfo {
    pub name: String,
    /// (major, minor), e.g. (9, 0) for the H100.
    pub compute_capability: (u32, u32),
    pub sm_count: u32,
    pub max_threads_per_block: u32,
    /// Shared memory a block gets without opting in (48 KB).
    pub max_shared_per_block: u32,
    /// Shared memory a block may get with `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub max_shared_per_block_optin: u32,
    pub regs_per_block: u32,
    pub l2_bytes: u32,
    pub warp_size: u32,
    /// (major, minor) of the CUDA driver.
    pub driver_version: (u32, u32),
    /// (major, minor) of NVRTC, `None` where NVRTC is not installed.
    pub nvrtc_version: Option<(u32, u32)>,
}

impl CudaDeviceInfo {
    /// Queries device `ordinal` (creating, or sharing, its primary context).
    pub fn query(ordinal: usize) -> Result<CudaDeviceInfo> {
        cuda_driver_available().map_err(|_| TargetError::NoDriver)?;
        let ctx = CudaContext::new(ordinal).map_err(|e| TargetError::Query {
            during: "creating a context",
            error: e.to_string(),
        })?;
        Self::from_context(&ctx)
    }

    /// Queries the device of an existing context.
    pub fn from_context(ctx: &Arc<CudaContext>) -> Result<CudaDeviceInfo> {
        let q = |during: &'static str| {
            move |e: cudarc::driver::DriverError| TargetError::Query {
                during,
                error: e.to_string(),
            }
        };
        let attr = |a: Attr| -> Result<u32> {
            ctx.attribute(a)
                .map(|v| v.max(0) as u32)
                .map_err(q("reading a device attribute"))
        };
        let (major, minor) = ctx
            .compute_capability()
            .map_err(q("reading the compute capability"))?;
        Ok(CudaDeviceInfo {
            name: ctx.name().map_err(q("reading the device name"))?,
            compute_capability: (major as u32, minor as u32),
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            max_threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_shared_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            max_shared_per_block_optin: attr(
                Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            regs_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            warp_size: attr(Attr::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            driver_version: driver_version()?,
            nvrtc_version: crate::measure::cuda::nvrtc_version().ok(),
        })
    }

    /// The architecture NVRTC compiles for: `sm_90a` on compute capability 9.0 (the `a`
    /// variant unlocks Hopper-only instructions; SASS built for it runs only on 9.0),
    /// `sm_XY` otherwise.
    pub fn arch(&self) -> String {
        arch_for(self.compute_capability)
    }

    /// The fingerprint records measured on this device are filed under.
    pub fn fingerprint(&self) -> TargetFingerprint {
        let nvrtc = match self.nvrtc_version {
            Some((major, minor)) => format!("nvrtc {major}.{minor}"),
            None => "nvrtc unavailable".to_string(),
        };
        let (dmaj, dmin) = self.driver_version;
        TargetFingerprint {
            kind: "cuda".to_string(),
            arch: self.arch(),
            device: self.name.clone(),
            toolchain: format!("{nvrtc}, driver {dmaj}.{dmin}"),
        }
    }
}

/// `sm_90a` for (9, 0), `sm_XY` for any other compute capability.
pub fn arch_for((major, minor): (u32, u32)) -> String {
    if (major, minor) == (9, 0) {
        "sm_90a".to_string()
    } else {
        format!("sm_{major}{minor}")
    }
}

/// The limits postprocessors check a candidate against before it is compiled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaLimits {
    pub max_threads_per_block: u32,
    /// Static `__shared__` memory per block (48 KB on every architecture since Volta);
    /// more needs dynamic shared memory and the opt-in attribute.
    pub max_shared_bytes_static: u32,
    /// Shared memory per block with the opt-in (227 KB on the H100).
    pub max_shared_bytes_optin: u32,
    /// Registers one thread may use (255 since Kepler).
    pub max_registers_per_thread: u32,
    /// Registers of a whole block (64 K): `threads * registers` must fit.
    pub max_registers_per_block: u32,
    pub warp_size: u32,
}

impl CudaLimits {
    /// The limits of a queried device.
    pub fn for_device(info: &CudaDeviceInfo) -> CudaLimits {
        CudaLimits {
            max_threads_per_block: info.max_threads_per_block,
            max_shared_bytes_static: info.max_shared_per_block.min(48 * 1024),
            max_shared_bytes_optin: info
                .max_shared_per_block_optin
                .max(info.max_shared_per_block),
            max_registers_per_thread: 255,
            max_registers_per_block: info.regs_per_block,
            warp_size: info.warp_size,
        }
    }

    /// The H100's (sm_90) limits, for building and rejecting candidates on a machine
    /// without a GPU.
    pub fn sm90_default() -> CudaLimits {
        CudaLimits {
            max_threads_per_block: 1024,
            max_shared_bytes_static: 48 * 1024,
            max_shared_bytes_optin: 227 * 1024,
            max_registers_per_thread: 255,
            max_registers_per_block: 64 * 1024,
            warp_size: 32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> CudaDeviceInfo {
        CudaDeviceInfo {
            name: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: (9, 0),
            sm_count: 132,
            max_threads_per_block: 1024,
            max_shared_per_block: 48 * 1024,
            max_shared_per_block_optin: 227 * 1024,
            regs_per_block: 65536,
            l2_bytes: 50 * 1024 * 1024,
            warp_size: 32,
            driver_version: (13, 0),
            nvrtc_version: Some((13, 0)),
        }
    }

    #[test]
    fn arch_uses_the_a_suffix_only_for_sm_90() {
        assert_eq!(arch_for((9, 0)), "sm_90a");
        assert_eq!(arch_for((8, 0)), "sm_80");
        assert_eq!(arch_for((8, 6)), "sm_86");
        assert_eq!(arch_for((10, 0)), "sm_100");
        assert_eq!(arch_for((12, 0)), "sm_120");
    }

    #[test]
    fn fingerprint_names_device_and_toolchain() {
        let fp = h100().fingerprint();
        assert_eq!(
            fp,
            TargetFingerprint {
                kind: "cuda".into(),
                arch: "sm_90a".into(),
                device: "NVIDIA H100 80GB HBM3".into(),
                toolchain: "nvrtc 13.0, driver 13.0".into(),
            }
        );
    }

    #[test]
    fn limits_of_the_h100_match_the_default() {
        assert_eq!(CudaLimits::for_device(&h100()), CudaLimits::sm90_default());
    }

    #[test]
    fn probing_the_driver_never_panics() {
        // On a machine without a GPU this is the error the CLI prints; with one, Ok.
        if let Err(e) = cuda_driver_available() {
            assert_eq!(e, "no CUDA driver found: use --target cpu");
        }
    }
}
