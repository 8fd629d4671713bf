//! Running, checking and timing kernels on the first CUDA device, and the cublasLt peer.
//!
//! One context (device 0's primary context), one stream, no cross-stream event tracking:
//! everything is ordered on that stream, so cudarc's per-buffer events are turned off and
//! nothing but the timing events sits between the kernels being timed.
//!
//! Errors: a launch the driver refuses (too many threads, registers, shared memory) is
//! `FailureKind::Launch` and the runner stays usable. Any error seen while waiting for
//! the device (illegal address and its kin) is `FailureKind::Runtime`: such errors are
//! sticky, the context is lost, and the runner refuses all further work. The caller must
//! start a fresh process. A kernel that does not finish within the kernel timeout is a
//! `FailureKind::Timeout` and poisons the runner the same way; the kernel may still be
//! running, so a poisoned runner leaks its resources on drop instead of waiting.

use super::build::Cubin;
use super::lt::{self, LtGemm};
use crate::codegen::{Launch, Source};
use crate::ir::DType;
use crate::measure::host_values::{
    decode, encode, POISON_BF16, POISON_F16, POISON_F32, POISON_I32,
};
use crate::measure::{Failure, FailureKind, GemmPeer, ParamSpec, Peer, TimingConfig};
use crate::target::cuda::{cuda_driver_available, CudaDeviceInfo};
use cudarc::driver::sys::{self, CUresult};
use cudarc::driver::{
    result, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
    DriverError, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A program loaded by [`CudaRunner::load`]: its kernels, launched in order.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProgramHandle(pub usize);

/// Runs programs on device 0. See the module documentation for the error contract.
pub struct CudaRunner {
    // Fields drop in declaration order: everything that uses the context comes first.
    peer: Option<Box<LtGemm>>,
    peer_workspace: Option<Box<DeviceBuffer>>,
    programs: Vec<Option<Program>>,
    params: Vec<DeviceBuffer>,
    workspaces: Vec<DeviceBuffer>,
    flush: Option<DeviceBuffer>,
    flush_round: u32,
    /// Page-locked host memory outputs are downloaded through (grown to the largest):
    /// a large conv's 190 MB output was copied into freshly allocated pageable memory
    /// for every candidate checked.
    staging: Option<Box<PinnedHostSlice<u8>>>,
    kernel_timeout: Duration,
    poisoned: Option<String>,
    info: CudaDeviceInfo,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
}

struct Program {
    kernels: Vec<(CudaFunction, Launch)>,
    _modules: Vec<Arc<CudaModule>>,
}

/// One device allocation. `dtype` is `None` for workspaces (raw bytes).
struct DeviceBuffer {
    name: String,
    dtype: Option<DType>,
    numel: usize,
    is_output: bool,
    /// A workspace that must hold zeros before every run (never poisoned).
    zeroed: bool,
    mem: CudaSlice<u8>,
    ptr: sys::CUdeviceptr,
}

/// What one timed run enqueues.
#[derive(Copy, Clone)]
enum Work {
    Kernels(ProgramHandle),
    /// The planned peer GEMM with its `i`-th algorithm.
    Peer(usize),
}

/// An error with what was being done when it happened.
struct CudaError {
    during: String,
    cause: Cause,
}

enum Cause {
    Driver(DriverError),
    /// The device did not finish within the kernel timeout.
    Timeout,
    /// Refused before reaching the device (a cuBLAS status, a missing buffer).
    Refused(String),
}

fn during(what: impl Into<String>) -> impl FnOnce(DriverError) -> CudaError {
    let during = what.into();
    move |error| CudaError {
        during,
        cause: Cause::Driver(error),
    }
}

/// Errors after which the context is unusable (the driver reports them again on every call).
fn is_sticky(e: CUresult) -> bool {
    matches!(
        e,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
            | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUresult::CUDA_ERROR_INVALID_PC
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_ASSERT
            | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
            | CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
            | CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
    )
}

impl CudaError {
    fn message(&self) -> String {
        match &self.cause {
            Cause::Driver(e) => format!("{}: {}", self.during, describe(e)),
            Cause::Timeout => format!("{}: no answer from the device", self.during),
            Cause::Refused(why) => format!("{}: {why}", self.during),
        }
    }
}

fn describe(e: &DriverError) -> String {
    match e.error_string() {
        Ok(s) => format!("{:?} ({})", e.0, s.to_string_lossy()),
        Err(_) => format!("{:?}", e.0),
    }
}

impl Drop for CudaRunner {
    fn drop(&mut self) {
        if self.poisoned.is_some() {
            // The context is broken, or a kernel still runs: releasing anything would only
            // fail or wait on it. Leak it all (the context included); the process is meant
            // to exit anyway.
            std::mem::forget(self.peer.take());
            std::mem::forget(self.peer_workspace.take());
            std::mem::forget(std::mem::take(&mut self.programs));
            std::mem::forget(std::mem::take(&mut self.params));
            std::mem::forget(std::mem::take(&mut self.workspaces));
            std::mem::forget(self.flush.take());
            std::mem::forget(self.staging.take());
            std::mem::forget(self.stream.clone());
            std::mem::forget(self.ctx.clone());
        }
    }
}

impl CudaRunner {
    /// Probes the driver, creates (shares) device 0's primary context and one stream.
    pub fn new() -> Result<CudaRunner, Failure> {
        let fail = |m: String| Failure::new(FailureKind::Launch, m);
        cuda_driver_available().map_err(fail)?;
        let ctx = CudaContext::new(0)
            .map_err(|e| fail(format!("creating a context on device 0: {}", describe(&e))))?;
        // SAFETY: this runner uses one stream; nothing here relies on cudarc's cross-stream
        // synchronisation, which disabling event tracking turns off for buffers made later.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx
            .new_stream()
            .map_err(|e| fail(format!("creating a stream: {}", describe(&e))))?;
        let info = CudaDeviceInfo::from_context(&ctx).map_err(|e| fail(e.to_string()))?;
        Ok(CudaRunner {
            peer: None,
            peer_workspace: None,
            programs: Vec::new(),
            params: Vec::new(),
            workspaces: Vec::new(),
            flush: None,
            flush_round: 0,
            staging: None,
            kernel_timeout: Duration::from_secs(60),
            poisoned: None,
            info,
            stream,
            ctx,
        })
    }

    /// The device this runner uses.
    pub fn device(&self) -> &CudaDeviceInfo {
        &self.info
    }

    /// Why the runner refuses work, if an earlier sticky error or timeout poisoned it.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// How long one wait for the device may take before it is a `Timeout` (default 60 s).
    pub fn set_kernel_timeout(&mut self, timeout: Duration) {
        self.kernel_timeout = timeout;
    }

    /// Uploads the inputs and allocates outputs, workspaces and the L2-flush buffer.
    ///
    /// `inputs` holds one vector per input parameter (`!is_output`), in parameter order,
    /// each of `numel()` values; F16, I32 and Bool parameters are converted from f32.
    /// Buffers of an earlier `prepare` are freed; loaded programs stay loaded.
    pub fn prepare(
        &mut self,
        params: &[ParamSpec],
        inputs: &[Vec<f32>],
        workspaces: &[crate::codegen::Workspace],
    ) -> Result<(), Failure> {
        self.enter()?;
        let fail = |m: String| Failure::new(FailureKind::Launch, m);
        let n_inputs = params.iter().filter(|p| !p.is_output).count();
        if inputs.len() != n_inputs {
            return Err(fail(format!(
                "{} input vectors for {n_inputs} input parameters",
                inputs.len()
            )));
        }
        self.params.clear();
        self.workspaces.clear();
        let mut inputs = inputs.iter();
        for p in params {
            let mut buf = self
                .alloc(&p.name, Some(p.dtype), p.numel(), p.dtype.bytes())
                .map_err(|e| self.fail(e))?;
            buf.is_output = p.is_output;
            if !p.is_output {
                let values = inputs.next().expect("counted above");
                if values.len() != p.numel() {
                    return Err(fail(format!(
                        "input {} has {} values, its shape {:?} needs {}",
                        p.name,
                        values.len(),
                        p.shape,
                        p.numel()
                    )));
                }
                let bytes = encode(p.dtype, values);
                // SAFETY: `buf` holds `numel * bytes()` bytes, exactly `bytes.len()`; the
                // copy from pageable memory is staged before the call returns.
                unsafe { result::memcpy_htod_async(buf.ptr, &bytes, self.stream.cu_stream()) }
                    .map_err(during(format!("uploading {}", p.name)))
                    .map_err(|e| self.fail(e))?;
            }
            self.params.push(buf);
        }
        for w in workspaces {
            let buf = self.alloc_workspace(w).map_err(|e| self.fail(e))?;
            self.workspaces.push(buf);
        }
        if self.flush.is_none() {
            // Twice the L2, at least 64 MiB: writing it evicts everything the kernel left.
            let bytes = (2 * self.info.l2_bytes as usize).max(64 << 20);
            self.flush = Some(
                self.alloc("l2 flush", None, bytes, 1)
                    .map_err(|e| self.fail(e))?,
            );
        }
        self.sync().map_err(|e| self.fail_at_sync(e))
    }

    /// Allocates each workspace (name, elements, bytes per element) that is missing or
    /// smaller than asked for; the others are kept.
    fn ensure_workspaces(
        &mut self,
        workspaces: &[crate::codegen::Workspace],
    ) -> Result<(), Failure> {
        for w in workspaces {
            let bytes = w.elements.max(0) as usize * w.elem_bytes;
            let have = self.workspaces.iter().position(|b| b.name == w.name);
            if let Some(i) = have {
                if self.workspaces[i].mem.len() >= bytes && self.workspaces[i].zeroed == w.zeroed {
                    continue;
                }
                self.workspaces.remove(i);
            }
            let buf = self.alloc_workspace(w).map_err(|e| self.fail(e))?;
            self.workspaces.push(buf);
        }
        Ok(())
    }

    /// A workspace's buffer; a zeroed one is zeroed here, and kept so by its kernels.
    fn alloc_workspace(&self, w: &crate::codegen::Workspace) -> Result<DeviceBuffer, CudaError> {
        let mut buf = self.alloc(&w.name, None, w.elements.max(0) as usize, w.elem_bytes)?;
        buf.zeroed = w.zeroed;
        if w.zeroed {
            // SAFETY: the memset writes the buffer's own bytes, on its stream.
            unsafe { result::memset_d8_async(buf.ptr, 0, buf.mem.len(), self.stream.cu_stream()) }
                .map_err(during(format!("zeroing {}", w.name)))?;
        }
        Ok(buf)
    }

    fn alloc(
        &self,
        name: &str,
        dtype: Option<DType>,
        numel: usize,
        elem_bytes: usize,
    ) -> Result<DeviceBuffer, CudaError> {
        // At least one element, so every parameter has a distinct, valid address.
        let bytes = (numel * elem_bytes).max(4);
        // SAFETY: the memory is uninitialised; inputs are uploaded and outputs poisoned
        // before any kernel reads them.
        let mem = unsafe { self.stream.alloc::<u8>(bytes) }
            .map_err(during(format!("allocating {bytes} bytes for {name}")))?;
        let ptr = mem.device_ptr(&self.stream).0;
        Ok(DeviceBuffer {
            name: name.to_string(),
            dtype,
            numel,
            is_output: false,
            zeroed: false,
            mem,
            ptr,
        })
    }

    /// Loads the CUBIN(s) of a `Source` and looks up each of its kernels by name (in any of
    /// the modules), opting in to dynamic shared memory where a kernel needs it. The
    /// global workspaces the source names are allocated if `prepare` did not (a candidate's
    /// schedule may add some, e.g. split-K's partial results).
    pub fn load(&mut self, cubins: &[Cubin], src: &Source) -> Result<ProgramHandle, Failure> {
        self.enter()?;
        self.ensure_workspaces(&src.workspaces)?;
        let mut modules = Vec::new();
        for cubin in cubins {
            let module = self
                .ctx
                .load_module(Ptx::from_binary(cubin.bytes.clone()))
                .map_err(during(format!("loading a {} CUBIN", cubin.arch)))
                .map_err(|e| self.fail(e))?;
            modules.push(module);
        }
        let mut kernels = Vec::new();
        for launch in &src.kernels {
            if launch.name.contains('\0') {
                return Err(Failure::new(
                    FailureKind::Launch,
                    format!("kernel name {:?} contains a NUL byte", launch.name),
                ));
            }
            let func = modules
                .iter()
                .find_map(|m| m.load_function(&launch.name).ok())
                .ok_or_else(|| {
                    Failure::new(
                        FailureKind::Launch,
                        format!("kernel {} is in none of the loaded modules", launch.name),
                    )
                })?;
            if launch.dynamic_shared_bytes > 0 {
                func.set_attribute(
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    launch.dynamic_shared_bytes as i32,
                )
                .map_err(during(format!(
                    "opting {} in to {} bytes of dynamic shared memory",
                    launch.name, launch.dynamic_shared_bytes
                )))
                .map_err(|e| self.fail(e))?;
            }
            kernels.push((func, launch.clone()));
        }
        self.programs.push(Some(Program {
            kernels,
            _modules: modules,
        }));
        Ok(ProgramHandle(self.programs.len() - 1))
    }

    /// The most registers per thread any kernel of a loaded program uses, as the driver
    /// reports it (the answer when the compiler's log is missing).
    pub fn registers(&self, handle: ProgramHandle) -> Option<u32> {
        let program = self.programs.get(handle.0)?.as_ref()?;
        program
            .kernels
            .iter()
            .filter_map(|(f, _)| f.num_regs().ok())
            .filter_map(|r| u32::try_from(r).ok())
            .max()
    }

    /// Unloads a program's modules; its handle becomes invalid.
    pub fn unload(&mut self, handle: ProgramHandle) {
        if let Some(slot) = self.programs.get_mut(handle.0) {
            *slot = None;
        }
    }

    /// Poisons every output with NaN, runs the program's kernels in order, waits, and
    /// returns the outputs (one vector per output parameter, in parameter order, as f32).
    pub fn run_once(&mut self, handle: ProgramHandle) -> Result<Vec<Vec<f32>>, Failure> {
        self.enter()?;
        self.program(handle)?;
        self.poison_outputs().map_err(|e| self.fail(e))?;
        self.enqueue(Work::Kernels(handle))
            .map_err(|e| self.fail(e))?;
        self.sync().map_err(|e| self.fail_at_sync(e))?;
        let mut outputs = Vec::new();
        for i in 0..self.params.len() {
            if self.params[i].is_output {
                outputs.push(self.download(i)?);
            }
        }
        Ok(outputs)
    }

    /// Times the program: warm-up for `warmup_seconds` (at least one run), then between
    /// `min_runs` and `max_runs` timed runs (stopping as [`TimingConfig::stops`] says), each
    /// measured with CUDA events around the kernels only. With `flush_cache`, the L2 is
    /// overwritten before each timed run, outside the events. Returns seconds per run.
    pub fn time(&mut self, handle: ProgramHandle, cfg: &TimingConfig) -> Result<Vec<f64>, Failure> {
        self.enter()?;
        self.program(handle)?;
        self.time_work(Work::Kernels(handle), cfg)
    }

    /// Times the GEMM peer on the prepared buffers in its precision (strict fp32, no TF32,
    /// for f32 unless the workload states `math=tf32`; f32 accumulation for f16 and bf16): cublasLt's
    /// heuristic candidates are each timed briefly, the fastest is timed exactly as
    /// [`CudaRunner::time`] times a program; returns its run times, its output `C`
    /// (poisoned before the run, like any output) and what the fastest algorithm is
    /// ([`LtGemm::describe`]).
    pub fn time_peer(
        &mut self,
        peer: &Peer,
        cfg: &TimingConfig,
    ) -> Result<(Vec<f64>, Vec<f32>, String), Failure> {
        self.enter()?;
        let Peer::Gemm(g) = peer;
        self.plan_peer(g)?;
        let candidates = self.peer.as_ref().map_or(0, |p| p.candidates());
        // A short timing per candidate; one the library refuses at launch is skipped.
        let probe = TimingConfig {
            warmup_seconds: cfg.warmup_seconds.min(0.01),
            min_runs: cfg.min_runs.clamp(1, 5),
            max_runs: cfg.min_runs.clamp(1, 5),
            max_seconds: 0.0,
            flush_cache: cfg.flush_cache,
            give_up_above_seconds: None,
            give_up_factor: None,
            settled_spread: None,
            enough_seconds: None,
        };
        let mut best: Option<(f64, usize)> = None;
        let mut refused = Vec::new();
        for i in 0..candidates {
            match self.time_work(Work::Peer(i), &probe) {
                Ok(runs) => {
                    let m = crate::database::median(&runs).unwrap_or(f64::INFINITY);
                    if best.is_none_or(|(b, _)| m < b) {
                        best = Some((m, i));
                    }
                }
                Err(f) if self.poisoned.is_some() => return Err(f),
                Err(f) => refused.push(f.message),
            }
        }
        let Some((_, algo)) = best else {
            return Err(Failure::new(
                FailureKind::Launch,
                format!(
                    "cublasLt ran none of its candidates: {}",
                    refused.join("; ")
                ),
            ));
        };
        let out = g.c;
        poison_buffer(&self.params[out], &self.stream).map_err(|e| self.fail(e))?;
        self.enqueue(Work::Peer(algo)).map_err(|e| self.fail(e))?;
        self.sync().map_err(|e| self.fail_at_sync(e))?;
        let output = self.download(out)?;
        let runs = self.time_work(Work::Peer(algo), cfg)?;
        let kernel = self
            .peer
            .as_ref()
            .map_or_else(String::new, |p| p.describe(algo));
        Ok((runs, output, kernel))
    }

    /// Checks `g` against the prepared parameters and plans it with cublasLt.
    fn plan_peer(&mut self, g: &GemmPeer) -> Result<(), Failure> {
        let fail = |m: String| Failure::new(FailureKind::Launch, m);
        let dims = [g.batch, g.m, g.n, g.k];
        if dims.iter().any(|&d| d <= 0 || d > i32::MAX as i64) {
            return Err(fail(format!(
                "GEMM peer dimensions {dims:?} are not positive 32-bit sizes"
            )));
        }
        let (na, nb, nc) = g.numels();
        let mut checks = vec![(g.a, na, "A"), (g.b, nb, "B"), (g.c, nc, "C")];
        if let Some(bias) = g.bias_relu {
            checks.push((bias, g.n as i128, "bias"));
        }
        for (idx, numel, what) in checks {
            let buf = self.params.get(idx).ok_or_else(|| {
                fail(format!(
                    "GEMM peer {what} is parameter {idx}, there are {}",
                    self.params.len()
                ))
            })?;
            if buf.dtype != Some(g.dtype) || buf.numel as i128 != numel {
                return Err(fail(format!(
                    "GEMM peer {what} = {} must be {} with {numel} elements, it is {:?} with {}",
                    buf.name, g.dtype, buf.dtype, buf.numel
                )));
            }
        }
        if g.c == g.a || g.c == g.b || g.bias_relu == Some(g.c) {
            return Err(fail("GEMM peer output C aliases an input".into()));
        }
        if !lt::available() {
            return Err(fail(
                "cublasLt not found: put libcublasLt.so.13 on LD_LIBRARY_PATH".into(),
            ));
        }
        if self.peer_workspace.is_none() {
            let ws = self
                .alloc("cublasLt workspace", None, lt::WORKSPACE_BYTES, 1)
                .map_err(|e| self.fail(e))?;
            self.peer_workspace = Some(Box::new(ws));
        }
        let ws = self.peer_workspace.as_ref().map_or(0, |b| b.ptr);
        self.peer = None;
        let plan = LtGemm::plan(
            g,
            self.params[g.a].ptr,
            self.params[g.b].ptr,
            self.params[g.c].ptr,
            g.bias_relu.map(|i| self.params[i].ptr),
            ws,
        )
        .map_err(fail)?;
        self.peer = Some(Box::new(plan));
        Ok(())
    }

    fn time_work(&mut self, work: Work, cfg: &TimingConfig) -> Result<Vec<f64>, Failure> {
        let warmup = Instant::now();
        loop {
            self.enqueue(work).map_err(|e| self.fail(e))?;
            self.sync().map_err(|e| self.fail_at_sync(e))?;
            if warmup.elapsed().as_secs_f64() >= cfg.warmup_seconds {
                break;
            }
        }
        let max_runs = cfg.max_runs.max(cfg.min_runs).max(1);
        // Runs are enqueued in batches and waited for together, so the host never leaves
        // the device idle between a start event and its kernels. The first batch may be
        // shorter: after it a slow candidate is given up.
        let batch = cfg.min_runs.clamp(1, max_runs);
        let events = self.timing_events(batch).map_err(|e| self.fail(e))?;
        let mut runs = Vec::with_capacity(max_runs);
        let start = Instant::now();
        while runs.len() < max_runs {
            let elapsed = start.elapsed().as_secs_f64();
            let n = cfg
                .next_batch(&runs, elapsed, batch)
                .min(max_runs - runs.len());
            for (begin, end) in &events[..n] {
                if cfg.flush_cache {
                    self.flush_l2().map_err(|e| self.fail(e))?;
                }
                begin
                    .record(&self.stream)
                    .map_err(during("recording a timing event"))
                    .map_err(|e| self.fail(e))?;
                self.enqueue(work).map_err(|e| self.fail(e))?;
                end.record(&self.stream)
                    .map_err(during("recording a timing event"))
                    .map_err(|e| self.fail(e))?;
            }
            self.sync().map_err(|e| self.fail_at_sync(e))?;
            for (begin, end) in &events[..n] {
                let ms = begin
                    .elapsed_ms(end)
                    .map_err(during("reading a timing event"))
                    .map_err(|e| self.fail(e))?;
                runs.push(f64::from(ms) * 1e-3);
            }
            if cfg.stops(&runs, start.elapsed().as_secs_f64()) {
                break;
            }
        }
        Ok(runs)
    }

    /// Event pairs created WITH timing (cudarc's `new_event(None)` disables it).
    fn timing_events(&self, n: usize) -> Result<Vec<(CudaEvent, CudaEvent)>, CudaError> {
        let new = || {
            self.ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(during("creating a timing event"))
        };
        (0..n).map(|_| Ok((new()?, new()?))).collect()
    }

    /// Overwrites the flush buffer (twice the L2) with a value that changes every round.
    fn flush_l2(&mut self) -> Result<(), CudaError> {
        let Some(flush) = &self.flush else {
            return Ok(());
        };
        self.flush_round = self.flush_round.wrapping_add(1);
        // SAFETY: the buffer holds at least `numel` bytes, a multiple of 4.
        unsafe {
            sys::cuMemsetD32Async(
                flush.ptr,
                self.flush_round,
                flush.numel / 4,
                self.stream.cu_stream(),
            )
        }
        .result()
        .map_err(during("flushing the L2"))
    }

    fn poison_outputs(&self) -> Result<(), CudaError> {
        for buf in self.params.iter().filter(|b| b.is_output) {
            poison_buffer(buf, &self.stream)?;
        }
        for buf in self.workspaces.iter().filter(|b| !b.zeroed) {
            poison_buffer(buf, &self.stream)?;
        }
        Ok(())
    }

    /// Enqueues one run of `work` on the stream, without waiting.
    fn enqueue(&self, work: Work) -> Result<(), CudaError> {
        match work {
            Work::Kernels(handle) => {
                let program = self.programs[handle.0]
                    .as_ref()
                    .expect("checked by the caller");
                for (func, launch) in &program.kernels {
                    let ptrs = launch
                        .params
                        .iter()
                        .map(|name| {
                            self.params
                                .iter()
                                .chain(&self.workspaces)
                                .find(|b| &b.name == name)
                                .map(|b| b.ptr)
                                .ok_or_else(|| CudaError {
                                    during: format!("launching {}", launch.name),
                                    cause: Cause::Refused(format!(
                                        "buffer {name} is neither a parameter nor a workspace"
                                    )),
                                })
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let cfg = LaunchConfig {
                        grid_dim: (launch.grid[0], launch.grid[1], launch.grid[2]),
                        block_dim: (launch.block[0], launch.block[1], launch.block[2]),
                        shared_mem_bytes: launch.dynamic_shared_bytes,
                    };
                    let launched =
                        if launch.waits_for_previous && self.info.compute_capability.0 >= 9 {
                            // SAFETY: as below; the kernel waits for the one before it itself.
                            unsafe { self.launch_dependent(func, &cfg, &ptrs) }
                        } else {
                            let mut builder = self.stream.launch_builder(func);
                            for p in &ptrs {
                                builder.arg(p);
                            }
                            // SAFETY: one device pointer per parameter of the generated
                            // kernel, in its order; each buffer lives as long as the runner.
                            // What the kernel does with them is what is being tested: faults
                            // surface at sync.
                            unsafe { builder.launch(cfg) }.map(|_| ())
                        };
                    launched.map_err(during(format!(
                        "launching {} (grid {:?}, block {:?}, {} bytes dynamic shared)",
                        launch.name, launch.grid, launch.block, launch.dynamic_shared_bytes
                    )))?;
                }
                Ok(())
            }
            Work::Peer(algo) => {
                let plan = self.peer.as_ref().ok_or_else(|| CudaError {
                    during: "running the GEMM peer".into(),
                    cause: Cause::Refused("no peer planned".into()),
                })?;
                plan.enqueue(algo, self.stream.cu_stream() as _)
                    .map_err(|e| CudaError {
                        during: format!("cublasLt algorithm {algo}"),
                        cause: Cause::Refused(e),
                    })
            }
        }
    }

    /// Launches `func` with programmatic stream serialization (CUDA's programmatic
    /// dependent launch, sm_90 and later): its blocks are scheduled as the blocks of the
    /// kernel before it on the stream exit (none triggers earlier); the generated kernel
    /// waits for that one's completion and writes itself (`griddepcontrol.wait`, see
    /// `codegen/cuda.rs`).
    ///
    /// # Safety
    /// `ptrs` are the kernel's parameters, one device pointer each, in its order, alive
    /// until the stream is synchronized.
    unsafe fn launch_dependent(
        &self,
        func: &CudaFunction,
        cfg: &LaunchConfig,
        ptrs: &[sys::CUdeviceptr],
    ) -> Result<(), DriverError> {
        self.ctx.bind_to_thread()?;
        let mut attr: sys::CUlaunchAttribute = std::mem::zeroed();
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        let mut args: Vec<*mut std::ffi::c_void> = ptrs
            .iter()
            .map(|p| p as *const sys::CUdeviceptr as *mut std::ffi::c_void)
            .collect();
        sys::cuLaunchKernelEx(
            &config,
            func.cu_function(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
        .result()
    }

    /// Waits for the stream, polling so that a kernel that never finishes becomes a
    /// timeout instead of a hang.
    fn sync(&self) -> Result<(), CudaError> {
        let deadline = Instant::now() + self.kernel_timeout;
        let mut spins = 0u32;
        loop {
            // SAFETY: a live stream of the current context.
            match unsafe { sys::cuStreamQuery(self.stream.cu_stream()) } {
                CUresult::CUDA_SUCCESS => return Ok(()),
                CUresult::CUDA_ERROR_NOT_READY => {}
                e => {
                    return Err(CudaError {
                        during: "waiting for the device".into(),
                        cause: Cause::Driver(DriverError(e)),
                    })
                }
            }
            if Instant::now() >= deadline {
                return Err(CudaError {
                    during: format!("waiting {:?} for the device", self.kernel_timeout),
                    cause: Cause::Timeout,
                });
            }
            spins += 1;
            if spins < 1000 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    fn download(&mut self, i: usize) -> Result<Vec<f32>, Failure> {
        let n = self.params[i].numel * self.params[i].dtype.map_or(1, |d| d.bytes());
        if self.staging.as_ref().is_none_or(|s| s.len() < n) {
            self.staging = None;
            // SAFETY: the memory is written by the copy below before it is read. Flags 0:
            // cached page-locked memory (write-combined memory is slow to read back).
            let fresh = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(n.max(1), 0) }.map_err(
                during(format!("allocating {n} bytes of page-locked memory")),
            );
            self.staging = Some(Box::new(fresh.map_err(|e| self.fail(e))?));
        }
        let ptr = self
            .staging
            .as_mut()
            .expect("allocated above")
            .as_mut_ptr()
            .map_err(during("waiting for the page-locked memory".to_string()));
        let ptr = ptr.map_err(|e| self.fail(e))?;
        let (src, dtype) = (
            self.params[i].ptr,
            self.params[i].dtype.unwrap_or(DType::F32),
        );
        // SAFETY: the staging memory holds at least `n` bytes and nothing else uses it;
        // the copy into it is waited for below, before it is read.
        let bytes = unsafe { std::slice::from_raw_parts_mut(ptr, n) };
        let copied = unsafe { result::memcpy_dtoh_async(bytes, src, self.stream.cu_stream()) }
            .map_err(during(format!("downloading {}", self.params[i].name)));
        copied.map_err(|e| self.fail(e))?;
        self.sync().map_err(|e| self.fail_at_sync(e))?;
        Ok(decode(dtype, bytes))
    }

    fn program(&self, handle: ProgramHandle) -> Result<&Program, Failure> {
        self.programs
            .get(handle.0)
            .and_then(|p| p.as_ref())
            .ok_or_else(|| {
                Failure::new(
                    FailureKind::Launch,
                    format!("program handle {} is not loaded", handle.0),
                )
            })
    }

    /// Refuses work on a poisoned runner, and makes the context current on this thread
    /// (the raw driver calls here need it; the runner may have moved between threads).
    fn enter(&self) -> Result<(), Failure> {
        if let Some(why) = &self.poisoned {
            return Err(Failure::new(
                FailureKind::Runtime,
                format!("the CUDA context is unusable after an earlier error ({why}); start a fresh process"),
            ));
        }
        self.ctx.bind_to_thread().map_err(|e| {
            Failure::new(
                FailureKind::Launch,
                format!("making the context current: {}", describe(&e)),
            )
        })
    }

    /// A failure at enqueue time: `Launch`, unless the error is sticky (left by an earlier
    /// asynchronous fault), which poisons the runner.
    fn fail(&mut self, e: CudaError) -> Failure {
        match e.cause {
            Cause::Driver(d) if is_sticky(d.0) => self.fail_at_sync(e),
            _ => Failure::new(FailureKind::Launch, e.message()),
        }
    }

    /// A failure while waiting for the device: the kernel faulted (`Runtime`) or did not
    /// finish (`Timeout`); either way the context cannot be trusted any more.
    fn fail_at_sync(&mut self, e: CudaError) -> Failure {
        let message = e.message();
        self.poisoned = Some(message.clone());
        let kind = if matches!(e.cause, Cause::Timeout) {
            FailureKind::Timeout
        } else {
            FailureKind::Runtime
        };
        Failure::new(kind, message)
    }
}

fn poison_buffer(buf: &DeviceBuffer, stream: &CudaStream) -> Result<(), CudaError> {
    let s = stream.cu_stream();
    // SAFETY: each memset writes exactly the buffer's `numel` elements.
    let r = unsafe {
        match buf.dtype {
            Some(DType::F32) => sys::cuMemsetD32Async(buf.ptr, POISON_F32, buf.numel, s),
            Some(DType::I32) => sys::cuMemsetD32Async(buf.ptr, POISON_I32, buf.numel, s),
            Some(DType::F16) => sys::cuMemsetD16Async(buf.ptr, POISON_F16, buf.numel, s),
            Some(DType::BF16) => sys::cuMemsetD16Async(buf.ptr, POISON_BF16, buf.numel, s),
            // Bool, and workspaces (raw bytes): all ones, which reads as NaN in f32 and f16.
            Some(DType::Bool) | None => sys::cuMemsetD8Async(buf.ptr, 0xff, buf.mem.len(), s),
        }
    };
    r.result()
        .map_err(during(format!("poisoning {}", buf.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_can_move_to_another_thread() {
        fn is_send<T: Send>() {}
        is_send::<CudaRunner>();
    }
}
