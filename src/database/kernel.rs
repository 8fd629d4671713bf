//! The one-call lookup: the best record for a workload on a target, turned into a kernel
//! ready to launch (source, launch configuration, CUBIN where NVRTC is present, and the
//! trace it came from).

use super::{canonical_program, Database, DatabaseError, Lookup, Result, TargetKey, TargetKind};
use crate::codegen::Source;
use crate::ir::Program;
use crate::measure::{session, Device};
use crate::schedule::replay;
use crate::target::TargetFingerprint;
use crate::workload::Workload;

/// A kernel looked up in the database, ready to launch.
#[derive(Debug)]
pub struct ReadyKernel {
    /// The record it came from, and whether it was measured on this exact target.
    pub lookup: Lookup,
    /// The scheduled program (on the canonical workload: parameters `t0, t1, ...` in the
    /// workload's order, inputs then outputs).
    pub program: Program,
    /// CUDA C or C, with each kernel's launch configuration.
    pub source: Source,
    /// The compiled CUDA kernel, when the target is CUDA and NVRTC is present.
    pub cubin: Option<Vec<u8>>,
}

/// The database key of a target fingerprint.
pub fn target_key(fp: &TargetFingerprint) -> Result<TargetKey> {
    let kind = TargetKind::parse(&fp.kind).ok_or_else(|| {
        DatabaseError::InvalidRecord(format!("unknown target kind {:?}", fp.kind))
    })?;
    Ok(TargetKey {
        kind,
        arch: fp.arch.clone(),
        device: fp.device.clone(),
        toolchain: fp.toolchain.clone(),
    })
}

impl Database {
    /// The best record for `workload` on `target`, replayed and code-generated. `None`
    /// when there is no successful record for the target (or its arch).
    pub fn kernel(&self, workload: &Workload, target: &TargetKey) -> Result<Option<ReadyKernel>> {
        let Some(lookup) = self.best(workload, target)? else {
            return Ok(None);
        };
        let invalid = |what: String| {
            DatabaseError::InvalidRecord(format!("record {}: {what}", lookup.record.id))
        };
        let base = canonical_program(workload).map_err(|e| invalid(e.to_string()))?;
        let sch = replay(&lookup.record.trace, base, 0).map_err(|e| invalid(e.to_string()))?;
        let device = match target.kind {
            TargetKind::Cpu => Device::Cpu,
            TargetKind::Cuda => Device::Cuda {
                arch: target.arch.clone(),
            },
        };
        let program = sch.into_program();
        let source = session::source_for(&program, &device).map_err(|f| invalid(f.message))?;
        let cubin = match &device {
            Device::Cuda { arch } if crate::measure::cuda::nvrtc_available().is_ok() => Some(
                crate::measure::cuda::compile(&source.code, arch)
                    .map_err(|f| invalid(f.message))?
                    .bytes,
            ),
            _ => None,
        };
        Ok(Some(ReadyKernel {
            lookup,
            program,
            source,
            cubin,
        }))
    }
}
