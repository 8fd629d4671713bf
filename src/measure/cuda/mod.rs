//! The CUDA side of measurement: NVRTC build (works without a GPU), launch, timing with
//! CUDA events, and the cublasLt peer.

mod build;
mod lt;
mod run;

pub use build::{
    compile, compile_ptx, nvrtc_available, nvrtc_version, parse_ptxas_report, Cubin, KernelReport,
};
pub use run::{CudaRunner, ProgramHandle};
