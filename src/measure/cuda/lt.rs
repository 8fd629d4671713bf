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

    /// What cublasLt's algorithm `i` is, as its configuration states it: the algorithm's
    /// id, its block tile, its stages (the K tile by the stage count), its split-K
    /// factor with the reduction that sums the splits, and its block swizzle, e.g. `algo
    /// 21, tile 128x128, stages 32x3, split-K 1, swizzle 0`. An attribute the library
    /// does not answer is left out.
    pub fn describe(&self, i: usize) -> String {
        use lt::cublasLtMatmulAlgoConfigAttributes_t as A;
        let Some(algo) = self.algos.get(i) else {
            return String::new();
        };
        let get = |attr: A| -> Option<u32> {
            let mut value = 0u32;
            let mut written = 0usize;
            // SAFETY: `algo` is one the heuristic returned; every attribute read here is
            // a 32-bit integer and the buffer holds four bytes.
            let s = unsafe {
                lt::cublasLtMatmulAlgoConfigGetAttribute(
                    algo,
                    attr,
                    (&mut value as *mut u32).cast(),
                    size_of::<u32>(),
                    &mut written,
                )
            };
            (s == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS && written == size_of::<u32>())
                .then_some(value)
        };
        let mut parts = Vec::new();
        if let Some(id) = get(A::CUBLASLT_ALGO_CONFIG_ID) {
            parts.push(format!("algo {}", id as i32));
        }
        if let Some(tile) = get(A::CUBLASLT_ALGO_CONFIG_TILE_ID).and_then(tile_name) {
            parts.push(format!("tile {tile}"));
        }
        if let Some(stages) = get(A::CUBLASLT_ALGO_CONFIG_STAGES_ID).and_then(stages_name) {
            parts.push(format!("stages {stages}"));
        }
        if let Some(k) = get(A::CUBLASLT_ALGO_CONFIG_SPLITK_NUM) {
            let scheme = get(A::CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME).unwrap_or(0);
            parts.push(match (k, scheme) {
                (0 | 1, _) => "split-K 1".to_string(),
                (k, 1) => format!("split-K {k} (summed in place)"),
                (k, 2) => format!("split-K {k} (summed in a workspace of the compute type)"),
                (k, 4) => format!("split-K {k} (summed in a workspace of the output type)"),
                (k, _) => format!("split-K {k}"),
            });
        }
        if let Some(swizzle) = get(A::CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING) {
            parts.push(format!("swizzle {swizzle}"));
        }
        parts.join(", ")
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

/// A tile id's shape (`128x64`), or `None` for an undefined or unknown id.
fn tile_name(id: u32) -> Option<String> {
    use lt::cublasLtMatmulTile_t as T;
    if id == 0 || id >= T::CUBLASLT_MATMUL_TILE_END as u32 {
        return None;
    }
    // SAFETY: with the `cuda-13000` bindings the tile enum's discriminants run without
    // a gap from 0 to `CUBLASLT_MATMUL_TILE_END`, so every id below it is a variant.
    let tile: T = unsafe { std::mem::transmute::<u32, T>(id) };
    Some(variant_name(tile, "CUBLASLT_MATMUL_TILE_"))
}

/// A stages id's K tile and stage count (`32x3`), or `None` for an undefined or unknown id.
fn stages_name(id: u32) -> Option<String> {
    use lt::cublasLtMatmulStages_t as S;
    // The `cuda-13000` bindings number the stages 1..=28 and 31..=38.
    if !(1..=28).contains(&id) && !(31..S::CUBLASLT_MATMUL_STAGES_END as u32).contains(&id) {
        return None;
    }
    // SAFETY: every id admitted above is a discriminant of the enum.
    let stages: S = unsafe { std::mem::transmute::<u32, S>(id) };
    Some(variant_name(stages, "CUBLASLT_MATMUL_STAGES_"))
}

/// An enum variant's name without the prefix every variant shares (`128x64`).
fn variant_name(variant: impl std::fmt::Debug, prefix: &str) -> String {
    format!("{variant:?}")
        .trim_start_matches(prefix)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_and_stage_ids_read_as_their_shapes() {
        assert_eq!(tile_name(18).as_deref(), Some("128x64"));
        assert_eq!(tile_name(20).as_deref(), Some("128x128"));
        assert_eq!(tile_name(0), None);
        assert_eq!(tile_name(u32::MAX), None);
        assert_eq!(stages_name(9).as_deref(), Some("32x3"));
        assert_eq!(stages_name(31).as_deref(), Some("8x3"));
        assert_eq!(stages_name(29), None);
        assert_eq!(stages_name(0), None);
        assert_eq!(stages_name(1000), None);
    }
}
