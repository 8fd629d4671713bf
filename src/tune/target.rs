//! Where to tune: the target's device, limits, search space and database key.

use super::TuneError;
use crate::database::{TargetKey, TargetKind};
use crate::measure::Device;
use crate::search::{SearchSpace, TargetLimits};
use crate::target::cuda::CudaLimits;
use crate::target::TargetFingerprint;

/// Where to tune.
#[derive(Clone, Debug, PartialEq)]
pub enum TuneTarget {
    /// The host CPU with the system C compiler.
    Cpu,
    /// A CUDA device: its arch, limits and fingerprint.
    Cuda {
        arch: String,
        limits: CudaLimits,
        fingerprint: TargetFingerprint,
    },
}

impl TuneTarget {
    /// The host CPU (queries the compiler and `/proc/cpuinfo`).
    pub fn cpu() -> TuneTarget {
        TuneTarget::Cpu
    }

    /// CUDA device 0, queried through the driver.
    pub fn cuda() -> Result<TuneTarget, TuneError> {
        crate::target::cuda::cuda_driver_available().map_err(TuneError::Target)?;
        crate::measure::cuda::nvrtc_available().map_err(TuneError::Target)?;
        let info = crate::target::cuda::CudaDeviceInfo::query(0)
            .map_err(|e| TuneError::Target(e.to_string()))?;
        Ok(TuneTarget::Cuda {
            arch: info.arch(),
            limits: CudaLimits::for_device(&info),
            fingerprint: info.fingerprint(),
        })
    }

    /// The database key of this target (queries the C compiler and CPU for the CPU).
    pub fn key(&self) -> Result<TargetKey, TuneError> {
        let fp = match self {
            TuneTarget::Cuda { fingerprint, .. } => fingerprint.clone(),
            TuneTarget::Cpu => {
                let tc = crate::measure::cpu::CpuToolchain::detect()
                    .map_err(|f| TuneError::Target(f.message))?;
                crate::target::cpu::CpuInfo::query(&tc.cc)
                    .map_err(TuneError::Target)?
                    .fingerprint(&tc.flags, crate::measure::cpu::threads())
            }
        };
        Ok(target_key(&fp))
    }

    /// The kind of target (what its records are filed under, with the arch).
    pub(crate) fn kind(&self) -> TargetKind {
        match self {
            TuneTarget::Cpu => TargetKind::Cpu,
            TuneTarget::Cuda { .. } => TargetKind::Cuda,
        }
    }

    pub(crate) fn device(&self) -> Device {
        match self {
            TuneTarget::Cpu => Device::Cpu,
            TuneTarget::Cuda { arch, .. } => Device::Cuda { arch: arch.clone() },
        }
    }

    pub(crate) fn limits(&self) -> TargetLimits {
        match self {
            TuneTarget::Cpu => TargetLimits::Cpu,
            TuneTarget::Cuda { limits, .. } => TargetLimits::Cuda(limits.clone()),
        }
    }

    /// The embedded search space of this target.
    pub fn default_space(&self) -> Result<SearchSpace, TuneError> {
        match self {
            TuneTarget::Cpu => self.adapt_space(SearchSpace::cpu_default()),
            TuneTarget::Cuda { .. } => self.adapt_space(SearchSpace::cuda_default()),
        }
    }

    /// A space made for this target's machine: on the CPU, register tiles sized for the
    /// vector ISA kernels are built for (queried from `/proc/cpuinfo`, narrowed by
    /// `TESSEL_CPU_ISA`); on CUDA, the wgmma sketch only where the device has it
    /// (`sm_90a`).
    pub fn adapt_space(&self, space: SearchSpace) -> Result<SearchSpace, TuneError> {
        Ok(match self {
            TuneTarget::Cpu => {
                let isa = crate::target::cpu::VectorIsa::host().map_err(TuneError::Target)?;
                space.with_vector_unit(isa.f32_lanes(), isa.vector_registers())
            }
            TuneTarget::Cuda { arch, .. } => space.with_wgmma(arch == "sm_90a"),
        })
    }

    /// Whether proposing the next batch may overlap with measuring this one. On a GPU it
    /// may: the device times, the host proposes. On the CPU it may not: the kernels being
    /// timed use every core, and a proposer on one of them would slow what is measured.
    pub fn overlaps_by_default(&self) -> bool {
        matches!(self, TuneTarget::Cuda { .. })
    }
}

/// The database key of a device fingerprint.
pub fn target_key(fp: &TargetFingerprint) -> TargetKey {
    TargetKey {
        kind: TargetKind::parse(&fp.kind).unwrap_or(TargetKind::Cpu),
        arch: fp.arch.clone(),
        device: fp.device.clone(),
        toolchain: fp.toolchain.clone(),
    }
}
