//! Code generation: kernel IR to CUDA C (one `extern "C" __global__` function per kernel,
//! launch configuration beside it) and to C for the CPU (OpenMP parallel loops, explicit
//! vector code for contiguous vectorized loops (`c_vector.rs`, with vector forms of max, min,
//! abs, selects on float comparisons, exp and tanh in `c_vector_math.rs`), `omp simd` for the rest). Both print the kernel IR statement by statement with the
//! program's own names, so a reader can follow the source next to the printed IR.

mod c_bases;
mod c_like;
mod c_vector;
mod c_vector_math;
pub mod cpu;
pub mod cuda;
mod cuda_mma;

use thiserror::Error;

/// Why a kernel cannot be printed for a backend.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CodegenError {
    #[error("{what} is not supported by the {backend} backend yet")]
    Unsupported { what: String, backend: &'static str },
}

/// The result of code generation.
pub type Result<T> = std::result::Result<T, CodegenError>;

/// Launch configuration of one kernel.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Launch {
    pub name: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Dynamic shared memory bytes (0 when the kernel's shared memory is static).
    pub dynamic_shared_bytes: u32,
    /// Static shared memory bytes.
    pub static_shared_bytes: u32,
    /// Parameter buffer names in call order.
    pub params: Vec<String>,
    /// The kernel waits at its start for the kernel launched before it
    /// (`griddepcontrol.wait`, on sm_90 and later), so it may be launched with programmatic
    /// stream serialization: its blocks are scheduled as the blocks before it exit, without
    /// the gap of a launch after it (CUDA's programmatic dependent launch; no kernel
    /// triggers its successor earlier, see `cuda::grid_dependency`). Without that attribute
    /// it is an ordinary launch.
    #[serde(default)]
    pub waits_for_previous: bool,
}

/// Generated source with the launch configuration of each kernel, in launch order.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Source {
    pub code: String,
    pub kernels: Vec<Launch>,
    /// Global workspace buffers the caller allocates.
    pub workspaces: Vec<Workspace>,
}

/// A global buffer of the kernels that the caller allocates.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Workspace {
    pub name: String,
    pub elements: i64,
    pub elem_bytes: usize,
    /// All zeros before every run (a serial split-K sum's counters, `int`s, which the
    /// kernels leave at zero); any other workspace may hold anything, and the runner
    /// poisons it before a checked run.
    pub zeroed: bool,
}

/// The global workspaces a lowered program needs.
fn workspaces(l: &crate::lower::Lowered) -> Vec<Workspace> {
    let p = &l.program;
    l.workspaces
        .iter()
        .map(|b| Workspace {
            name: p.buffer(*b).name.clone(),
            elements: p.buffer(*b).numel(),
            elem_bytes: p.buffer(*b).dtype.bytes(),
            zeroed: p.buffer(*b).dtype == crate::ir::DType::I32,
        })
        .collect()
}

/// Whether a block of `p` reads a value at TensorFloat-32's precision (`tf32(x)`), so that
/// the backends print the helper that computes it.
fn reads_tf32(p: &crate::ir::Program) -> bool {
    let mut found = false;
    for b in &p.blocks {
        for store in b.init.iter().chain([&b.body]) {
            store.value.visit(&mut |e| {
                found |= matches!(e, crate::ir::Expr::Un(crate::ir::UnOp::Tf32, _));
            });
        }
    }
    found
}
