//! The GEMM peer as a user gets it at its best: cublasLt in strict fp32 (no TF32), with a
//! 32 MiB workspace, asked for its heuristic's top candidates; the runner times each and
//! keeps the fastest (PyTorch's cuBLAS path also runs through cublasLt with a workspace).
//! f16 and bf16 operands are multiplied the same way, accumulated in f32
//! (`CUBLAS_COMPUTE_32F`, as PyTorch does for half matmuls; cublasLt may use its tensor
//! cores there). A workload that multiplies at TensorFloat-32's precision (`math=tf32`)
//! gets `CUBLAS_COMPUTE_32F_FAST_TF32`, what PyTorch's `allow_tf32` selects.
//!
//! Row-major `C[m, n] = op(A) @ op(B)` is column-major `C^T = op(B)^T @ op(A)^T`, so
//! cublasLt's first operand is the B buffer and its second the A buffer; a stored
//! transpose (the `nt`/`tn` layouts) is cublasLt's `T` operation on that operand. A
//! dense layer's `relu(. + bias)` is cublasLt's `RELU_BIAS` epilogue, its bias running
//! along the rows of `C^T` (length n).

use crate::ir::DType;
use crate::measure::GemmPeer;
use cudarc::cublaslt::sys as lt;
use cudarc::driver::sys::CUdeviceptr;
use std::ffi::c_void;
use std::mem::size_of;

/// The workspace cublasLt may use (PyTorch's default on Hopper).
pub const WORKSPACE_BYTES: usize = 32 << 20;

/// How many of the heuristic's candidates are timed.
pub const CANDIDATES: usize = 8;

/// A planned cublasLt GEMM: descriptors, layouts, the heuristic's algorithms and the
/// device pointers it runs on. Owns and destroys its cublasLt objects.
pub struct LtGemm {
    handle: lt::cublasLtHandle_t,
    desc: lt::cublasLtMatmulDesc_t,
    /// Layouts of cublasLt's A (the B buffer), B (the A buffer) and C/D.
    layouts: [lt::cublasLtMatrixLayout_t; 3],
    algos: Vec<lt::cublasLtMatmulAlgo_t>,
    /// The A and B buffers, in cublasLt's operand order, and the output.
    operands: [CUdeviceptr; 3],
    workspace: CUdeviceptr,
}

// SAFETY: cublasLt handles and descriptors may be used from any thread, one at a time;
// the runner owns the plan and uses it through `&mut self`.
unsafe impl Send for LtGemm {}

/// Whether libcublasLt can be loaded (checked without cudarc's panicking loader).
pub fn available() -> bool {
    // SAFETY: only tries to load the library.
    unsafe { lt::is_culib_present() }
}

fn check(what: &str, s: lt::cublasStatus_t) -> Result<(), String> {
    if s == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(format!("cublasLt {what}: {s:?}"))
    }
}

impl LtGemm {
    /// Plans `g` on device pointers `a`, `b`, `c` (and the bias, for a dense layer), with
    /// a `workspace` of [`WORKSPACE_BYTES`]. The context must be current.
    pub fn plan(
        g: &GemmPeer,
        a: CUdeviceptr,
        b: CUdeviceptr,
        c: CUdeviceptr,
        bias: Option<CUdeviceptr>,
        workspace: CUdeviceptr,
    ) -> Result<LtGemm, String> {
        let mut plan = LtGemm {
            handle: std::ptr::null_mut(),
            desc: std::ptr::null_mut(),
            layouts: [std::ptr::null_mut(); 3],
            algos: Vec::new(),
            operands: [b, a, c],
            workspace,
        };
        // SAFETY: every out-pointer is valid; each object is destroyed once, by Drop,
        // also when a later step fails.
        unsafe {
            check("create", lt::cublasLtCreate(&mut plan.handle))?;
            check(
                "matmul descriptor",
                lt::cublasLtMatmulDescCreate(
                    &mut plan.desc,
                    match g.tf32 {
                        true => lt::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
                        false => lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    },
                    lt::cudaDataType::CUDA_R_32F,
                ),
            )?;
            plan.set_desc(
                lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                &i32::from(g.trans_b),
            )?;
            plan.set_desc(
                lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
                &i32::from(g.trans_a),
            )?;
            if let Some(bias) = bias {
                plan.set_desc(
                    lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
                    &lt::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS,
                )?;
                plan.set_desc(
                    lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    &bias,
                )?;
            }
            let (m, n, k) = (g.m as u64, g.n as u64, g.k as u64);
            // Column-major shapes (rows, cols) of the stored buffers.
            let first = if g.trans_b { (k, n) } else { (n, k) };
            let second = if g.trans_a { (m, k) } else { (k, m) };
            let storage = match g.dtype {
                DType::F32 => lt::cudaDataType::CUDA_R_32F,
                DType::F16 => lt::cudaDataType::CUDA_R_16F,
                DType::BF16 => lt::cudaDataType::CUDA_R_16BF,
                other => return Err(format!("no cublasLt GEMM of {other}")),
            };
            for (i, (rows, cols)) in [first, second, (n, m)].into_iter().enumerate() {
                check(
                    "matrix layout",
                    lt::cublasLtMatrixLayoutCreate(
                        &mut plan.layouts[i],
                        storage,
                        rows,
                        cols,
                        rows as i64,
                    ),
                )?;
                if g.batch > 1 {
                    plan.set_layout(
                        i,
                        lt::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                        &(g.batch as i32),
                    )?;
                    plan.set_layout(
                        i,
                        lt::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                        &((rows * cols) as i64),
                    )?;
                }
            }
            plan.algos = plan.heuristic()?;
        }
        if plan.algos.is_empty() {
            return Err("cublasLt has no algorithm for this GEMM".into());
        }
        Ok(plan)
    }

    /// The heuristic's candidates, best first.
    ///
    /// # Safety
    /// The descriptors and layouts are live.
    unsafe fn heuristic(&self) -> Result<Vec<lt::cublasLtMatmulAlgo_t>, String> {
        let mut pref = std::ptr::null_mut();
        check("preference", lt::cublasLtMatmulPreferenceCreate(&mut pref))?;
        let bytes = WORKSPACE_BYTES as u64;
        let set = check(
            "workspace preference",
            lt::cublasLtMatmulPreferenceSetAttribute(
                pref,
                lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&bytes as *const u64).cast(),
                size_of::<u64>(),
            ),
        );
        let mut results =
            vec![std::mem::zeroed::<lt::cublasLtMatmulHeuristicResult_t>(); CANDIDATES];
        let mut found = 0;
        let asked = set.and_then(|()| {
            check(
                "heuristic",
                lt::cublasLtMatmulAlgoGetHeuristic(
                    self.handle,
                    self.desc,
                    self.layouts[0],
                    self.layouts[1],
                    self.layouts[2],
                    self.layouts[2],
                    pref,
                    CANDIDATES as i32,
                    results.as_mut_ptr(),
                    &mut found,
                ),
            )
        });
        lt::cublasLtMatmulPreferenceDestroy(pref);
        asked?;
        Ok(results
            .into_iter()
            .take(found.max(0) as usize)
            .filter(|r| {
                r.state == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS
                    && r.workspaceSize <= WORKSPACE_BYTES
            })
            .map(|r| r.algo)
            .collect())
    }

    unsafe fn set_desc<T>(
        &self,
        attr: lt::cublasLtMatmulDescAttributes_t,
        value: &T,
    ) -> Result<(), String> {
        check(
            "matmul attribute",
            lt::cublasLtMatmulDescSetAttribute(
                self.desc,
                attr,
                (value as *const T).cast(),
                size_of::<T>(),
            ),
        )
    }

    unsafe fn set_layout<T>(
        &self,
        i: usize,
        attr: lt::cublasLtMatrixLayoutAttribute_t,
        value: &T,
    ) -> Result<(), String> {
        check(
            "layout attribute",
            lt::cublasLtMatrixLayoutSetAttribute(
                self.layouts[i],
                attr,
                (value as *const T).cast(),
                size_of::<T>(),
            ),
        )
    }

    /// How many algorithms the heuristic offered.
    pub fn candidates(&self) -> usize {
        self.algos.len()
    }

    /// Enqueues one run with algorithm `i` on `stream`, without waiting.
    pub fn enqueue(&self, i: usize, stream: lt::cudaStream_t) -> Result<(), String> {
        let algo = self.algos.get(i).ok_or("no such cublasLt algorithm")?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let [first, second, out] = self.operands;
        // SAFETY: the plan's layouts describe the buffers the runner checked; the
        // workspace holds WORKSPACE_BYTES, at least what the algorithm asked for.
        unsafe {
            check(
                "matmul",
                lt::cublasLtMatmul(
                    self.handle,
                    self.desc,
                    (&alpha as *const f32).cast::<c_void>(),
                    first as *const c_void,
                    self.layouts[0],
                    second as *const c_void,
                    self.layouts[1],
                    (&beta as *const f32).cast::<c_void>(),
                    out as *const c_void,
                    self.layouts[2],
                    out as *mut c_void,
                    self.layouts[2],
                    algo,
                    self.workspace as *mut c_void,
                    WORKSPACE_BYTES,
                    stream,
                ),
            )
        }
    }
}

impl Drop for LtGemm {
    fn drop(&mut self) {
        // SAFETY: each object was created by this plan (or is null) and is destroyed once;
        // an error here only leaks.
        unsafe {
            for l in self.layouts {
                if !l.is_null() {
                    lt::cublasLtMatrixLayoutDestroy(l);
                }
            }
            if !self.desc.is_null() {
                lt::cublasLtMatmulDescDestroy(self.desc);
            }
            if !self.handle.is_null() {
                lt::cublasLtDestroy(self.handle);
            }
        }
    }
}
