//! The CUDA side of measurement (NVRTC build, launch, timing, cuBLAS peer).
//!
//! STAND-IN, replaced wholesale by the CUDA backend: it has the real runner's signatures
//! so the worker compiles against them, and every call fails with "CUDA runner not built".

use super::{Failure, FailureKind, ParamSpec, Peer, TimingConfig};
use crate::codegen::Source;

fn not_built() -> Failure {
    Failure::new(FailureKind::Launch, "CUDA runner not built")
}

/// A compiled CUDA module image.
#[derive(Clone, Debug)]
pub struct Cubin {
    /// The SASS image.
    pub image: Vec<u8>,
}

/// Compiles CUDA C for `arch` with NVRTC.
pub fn compile(_code: &str, _arch: &str) -> Result<Cubin, Failure> {
    Err(not_built())
}

/// Runs kernels on the first CUDA device.
#[derive(Debug)]
pub struct CudaRunner {
    _private: (),
}

impl CudaRunner {
    /// Opens the device.
    pub fn new() -> Result<CudaRunner, Failure> {
        Err(not_built())
    }

    /// Allocates device buffers and uploads the inputs.
    pub fn prepare(
        &mut self,
        _params: &[ParamSpec],
        _inputs: &[Vec<f32>],
        _workspaces: &[(String, i64, usize)],
    ) -> Result<(), Failure> {
        Err(not_built())
    }

    /// Loads compiled kernels; the handle names them in `run_once` and `time`.
    pub fn load(&mut self, _cubins: &[Cubin], _src: &Source) -> Result<usize, Failure> {
        Err(not_built())
    }

    /// Poisons the outputs, launches the kernels, returns the outputs.
    pub fn run_once(&mut self, _handle: usize) -> Result<Vec<Vec<f32>>, Failure> {
        Err(not_built())
    }

    /// Times the kernels with CUDA events.
    pub fn time(&mut self, _handle: usize, _cfg: &TimingConfig) -> Result<Vec<f64>, Failure> {
        Err(not_built())
    }

    /// Times the peer library routine on the same inputs; returns its output too.
    pub fn time_peer(
        &mut self,
        _peer: &Peer,
        _cfg: &TimingConfig,
    ) -> Result<(Vec<f64>, Vec<f32>), Failure> {
        Err(not_built())
    }
}
