//! The CPU side of measurement: build C with the system compiler, load it with
//! `libloading`, run it on host buffers, time it, and time ndarray's `dot` as the peer.
//!
//! [`CpuRunner`] has the shape of the CUDA runner so the worker drives both the same way:
//! [`prepare`](CpuRunner::prepare) the buffers once, [`build`](CpuRunner::build) each
//! source into a handle, [`run_once`](CpuRunner::run_once) it with NaN-poisoned outputs,
//! [`time`](CpuRunner::time) it. Everything here runs inside the worker process: a kernel
//! that writes out of bounds or never returns takes the worker down or hangs it, and the
//! parent ([`super::worker::Measurer`]) turns that into a typed failure.
//!
//! Cache flushing between timed runs: on x86_64 every cache line of the buffers the kernel
//! touches is evicted with `clflush` (the working set leaves every level, at a cost that
//! grows with the working set rather than with the LLC, which virtual machines report as
//! the host's, here 260 MB); elsewhere a scratch buffer twice the last-level cache
//! (clamped to 8..256 MB) is written.

use super::host_values::{decode, encode, poison};
use super::{BuildInfo, Failure, FailureKind, GemmPeer, ParamSpec, Peer, TimingConfig};
use crate::codegen::{self, Source};
use crate::ir::{DType, Program};
use crate::lower::{lower, Backend};
use crate::target::cpu::VectorIsa;
use libloading::Library;
use std::ffi::c_void;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Instant;

/// The error when no C compiler runs.
pub const NO_COMPILER: &str =
    "no C compiler found (tried $CC, cc, gcc, clang): install one or use --target cuda";

/// Compiler output kept in a failure or a build log, at most.
const MAX_LOG: usize = 16 << 10;

/// The C compiler and its flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuToolchain {
    /// The compiler command (`cc`, `gcc`, a path).
    pub cc: String,
    /// Flags before `-o out.so in.c`.
    pub flags: Vec<String>,
}

impl CpuToolchain {
    /// `-O3`, the ISA's flags (`-mavx2 -mfma`), `-ffp-contract=fast` (`a * b + c` becomes
    /// an FMA; `-std=c11` alone turns contraction off), `-fopenmp -shared -fPIC -std=c11`.
    pub fn flags_for(isa: VectorIsa) -> Vec<String> {
        std::iter::once("-O3")
            .chain(isa.cc_flags().iter().copied())
            .chain([
                "-ffp-contract=fast",
                "-fopenmp",
                "-shared",
                "-fPIC",
                "-std=c11",
            ])
            .map(str::to_string)
            .collect()
    }

    /// [`flags_for`](Self::flags_for) the ISA kernels are built for on this machine (the
    /// CPU's, or the narrower one `TESSEL_CPU_ISA` names: [`VectorIsa::host`]).
    pub fn default_flags() -> Result<Vec<String>, String> {
        VectorIsa::host().map(CpuToolchain::flags_for)
    }

    /// The first compiler that answers `--version` among `$CC`, `cc`, `gcc`, `clang`,
    /// with the default flags; an error where none does or `TESSEL_CPU_ISA` names an ISA
    /// this CPU cannot run.
    pub fn detect() -> Result<CpuToolchain, Failure> {
        let flags =
            CpuToolchain::default_flags().map_err(|e| Failure::new(FailureKind::Compile, e))?;
        let from_env = std::env::var("CC").ok().filter(|s| !s.trim().is_empty());
        let tried = from_env
            .into_iter()
            .chain(["cc", "gcc", "clang"].iter().map(|s| s.to_string()));
        for cc in tried {
            if crate::target::cpu::cc_version(&cc).is_some() {
                return Ok(CpuToolchain { cc, flags });
            }
        }
        Err(Failure::new(FailureKind::Compile, NO_COMPILER))
    }
}

/// How the worker's OpenMP threads wait between parallel loops, set where the user set
/// neither `OMP_WAIT_POLICY` nor `GOMP_SPINCOUNT`: spin 10,000 times (about 0.1 ms by
/// libgomp's estimate of 100,000 spins a millisecond), then sleep. With
/// `passive` alone (the default until 2026-11-29) a call's two or three parallel loops
/// (a padded copy, the packing, the main nest) each woke sleeping threads: on the 2-core
/// AVX-512 VM, tuned convs ran 1.13x-1.24x faster and 512^3 / 1024^3 GEMMs 1.18x-1.24x
/// with a spin count of 10,000, the tuner compiling beside them (`benches/RESULTS.md`).
/// libgomp takes an explicit `GOMP_SPINCOUNT` over the policy's own count (300,000 with
/// no policy, which on a loaded 2-core EPYC cost a 512^3 GEMM 3-4x, 2026-11-23), and
/// spins none where it runs more threads than the CPUs it may use; LLVM's libomp (a
/// clang build) ignores it and sleeps at once (`passive`).
pub const OPENMP_WAIT: [(&str, &str); 2] =
    [("OMP_WAIT_POLICY", "passive"), ("GOMP_SPINCOUNT", "10000")];

/// The OpenMP threads kernels run on: `OMP_NUM_THREADS` when it is a positive number
/// (`tessel tune --threads N` sets it for the worker), else every hardware thread this
/// process may use. The ndarray peer runs on as many.
pub fn threads() -> usize {
    std::env::var("OMP_NUM_THREADS")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}

/// The C entry point every CPU kernel exports: buffer pointers in `Launch.params` order.
type EntryFn = unsafe extern "C" fn(*mut *mut c_void);

/// Where one kernel argument lives.
#[derive(Copy, Clone, Debug)]
enum Slot {
    /// A program parameter (index into the runner's buffers).
    Param(usize),
    /// A workspace the source declared (index into the module's workspaces).
    Own(usize),
    /// A workspace given to `prepare`.
    Shared(usize),
}

/// One built source: its kernels, resolved, and the library that keeps them alive.
struct Module {
    entries: Vec<(EntryFn, Vec<Slot>)>,
    workspaces: Vec<Vec<f32>>,
    /// Dropped after `entries` (fields drop in order), so no entry outlives its code.
    _lib: Library,
}

/// Builds, runs and times C kernels on the host.
pub struct CpuRunner {
    toolchain: CpuToolchain,
    dir: tempfile::TempDir,
    params: Vec<ParamSpec>,
    /// One buffer per parameter.
    buffers: Vec<Vec<f32>>,
    shared: Vec<(String, Vec<f32>)>,
    modules: Vec<Module>,
    flusher: Flusher,
}

impl CpuRunner {
    /// A runner with the detected toolchain and a fresh temporary directory.
    pub fn new() -> Result<CpuRunner, Failure> {
        CpuRunner::with_toolchain(CpuToolchain::detect()?)
    }

    /// A runner with a given toolchain.
    pub fn with_toolchain(toolchain: CpuToolchain) -> Result<CpuRunner, Failure> {
        let dir = tempfile::Builder::new()
            .prefix("tessel-cpu-")
            .tempdir()
            .map_err(|e| {
                Failure::new(
                    FailureKind::Launch,
                    format!("cannot create a temporary directory: {e}"),
                )
            })?;
        Ok(CpuRunner {
            toolchain,
            dir,
            params: Vec::new(),
            buffers: Vec::new(),
            shared: Vec::new(),
            modules: Vec::new(),
            flusher: Flusher::default(),
        })
    }

    /// The toolchain kernels are built with.
    pub fn toolchain(&self) -> &CpuToolchain {
        &self.toolchain
    }

    /// Allocates the host buffers: `inputs` holds one vector per input parameter (those
    /// with `is_output == false`), in parameter order; outputs start as NaN; `workspaces`
    /// (name, elements, bytes per element) are shared by every kernel that names them
    /// without declaring them itself.
    pub fn prepare(
        &mut self,
        params: &[ParamSpec],
        inputs: &[Vec<f32>],
        workspaces: &[crate::codegen::Workspace],
    ) -> Result<(), Failure> {
        let launch = |m: String| Failure::new(FailureKind::Launch, m);
        let n_inputs = params.iter().filter(|p| !p.is_output).count();
        if inputs.len() != n_inputs {
            return Err(launch(format!(
                "{} input vectors for {n_inputs} input parameters",
                inputs.len()
            )));
        }
        let mut inputs = inputs.iter();
        let mut buffers = Vec::with_capacity(params.len());
        for p in params {
            if !matches!(p.dtype, DType::F32 | DType::F16 | DType::BF16) {
                return Err(launch(format!(
                    "parameter {} is {}: the CPU runner handles float32, float16 and bfloat16",
                    p.name, p.dtype
                )));
            }
            if p.is_output {
                buffers.push(words(&poison(p.dtype, p.numel())));
            } else {
                let data = inputs
                    .next()
                    .ok_or_else(|| launch("too few inputs".to_string()))?;
                if data.len() != p.numel() {
                    return Err(launch(format!(
                        "input {} has {} elements, its shape needs {}",
                        p.name,
                        data.len(),
                        p.numel()
                    )));
                }
                buffers.push(words(&encode(p.dtype, data)));
            }
        }
        self.params = params.to_vec();
        self.buffers = buffers;
        self.shared = workspaces
            .iter()
            .map(|w| (w.name.clone(), workspace(w.elements, w.elem_bytes)))
            .collect();
        Ok(())
    }

    /// Compiles `src`, loads it and resolves `tessel_entry_N` for each kernel; the handle
    /// names the result in `run_once` and `time`.
    pub fn build(&mut self, src: &Source) -> Result<(usize, BuildInfo), Failure> {
        let stem = format!("kernel{}", self.modules.len());
        let (so_path, info) = compile(&self.toolchain, self.dir.path(), &stem, &src.code, None)?;
        Ok((self.load(&so_path, src)?, info))
    }

    /// The directory compiled libraries go to (see [`compile`]).
    pub fn build_dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Loads a library [`compile`]d from `src` and resolves its kernels.
    pub fn load(&mut self, so_path: &std::path::Path, src: &Source) -> Result<usize, Failure> {
        let id = self.modules.len();
        let launch = |m: String| Failure::new(FailureKind::Launch, m);
        // SAFETY: the library is a kernel we just compiled; its initialisers are the C
        // runtime's and OpenMP's. A kernel that misbehaves later is what the worker
        // process is isolated for.
        let lib = unsafe { Library::new(so_path) }
            .map_err(|e| launch(format!("cannot load {}: {e}", so_path.display())))?;
        let workspaces: Vec<Vec<f32>> = src
            .workspaces
            .iter()
            .map(|w| workspace(w.elements, w.elem_bytes))
            .collect();
        let mut entries = Vec::with_capacity(src.kernels.len());
        for k in &src.kernels {
            // SAFETY: every CPU kernel's entry has the signature `void (void **)`
            // (codegen::cpu); the pointer is used only while `lib` is alive.
            let f: EntryFn = unsafe { lib.get::<EntryFn>(k.name.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| launch(format!("kernel entry {} not found: {e}", k.name)))?;
            let slots = k
                .params
                .iter()
                .map(|name| self.slot(src, name))
                .collect::<Result<Vec<_>, _>>()?;
            entries.push((f, slots));
        }
        self.modules.push(Module {
            entries,
            workspaces,
            _lib: lib,
        });
        Ok(id)
    }

    fn slot(&self, src: &Source, name: &str) -> Result<Slot, Failure> {
        if let Some(i) = self.params.iter().position(|p| p.name == name) {
            return Ok(Slot::Param(i));
        }
        if let Some(i) = src.workspaces.iter().position(|w| w.name == name) {
            return Ok(Slot::Own(i));
        }
        if let Some(i) = self.shared.iter().position(|w| w.0 == name) {
            return Ok(Slot::Shared(i));
        }
        Err(Failure::new(
            FailureKind::Launch,
            format!("kernel argument {name} is neither a parameter nor a workspace"),
        ))
    }

    /// Poisons the outputs with NaN, runs every kernel of the handle in order and
    /// returns the outputs (in parameter order), as f32 values.
    pub fn run_once(&mut self, handle: usize) -> Result<Vec<Vec<f32>>, Failure> {
        for (p, b) in self.params.iter().zip(&mut self.buffers) {
            if p.is_output {
                *b = words(&poison(p.dtype, p.numel()));
            }
        }
        self.launch(handle)?;
        Ok(self
            .params
            .iter()
            .zip(&self.buffers)
            .filter(|(p, _)| p.is_output)
            .map(|(p, b)| decode(p.dtype, &stored_bytes(b, p.numel() * p.dtype.bytes())))
            .collect())
    }

    /// Times the handle: warm-up by time, then timed runs (seconds each), the cache
    /// flushed before each when asked.
    pub fn time(&mut self, handle: usize, cfg: &TimingConfig) -> Result<Vec<f64>, Failure> {
        self.module(handle)?;
        time_loop(cfg, |step| match step {
            Step::Run => self.launch(handle),
            Step::Flush => {
                self.flush(handle);
                Ok(())
            }
        })
    }

    /// Times the peer on the same inputs the same way; returns the run times and the
    /// peer's output (the GEMM's `C`, flattened).
    pub fn time_peer(
        &mut self,
        peer: &Peer,
        cfg: &TimingConfig,
    ) -> Result<(Vec<f64>, Vec<f32>), Failure> {
        let Peer::Gemm(g) = peer;
        let shape_ok = |i: usize, numel: i128, output: bool| {
            self.params
                .get(i)
                .is_some_and(|p| p.numel() as i128 == numel && p.is_output == output)
        };
        let (na, nb, nc) = g.numels();
        if let Some(p) = [g.a, g.b, g.c]
            .iter()
            .filter_map(|&i| self.params.get(i))
            .find(|p| p.dtype != DType::F32)
        {
            return Err(Failure::new(
                FailureKind::Launch,
                format!(
                    "no CPU peer for {} GEMMs: ndarray's dot multiplies float32 ({} is {})",
                    p.dtype, p.name, p.dtype
                ),
            ));
        }
        if [g.batch, g.m, g.n, g.k].iter().any(|d| *d <= 0)
            || !shape_ok(g.a, na, false)
            || !shape_ok(g.b, nb, false)
            || !shape_ok(g.c, nc, true)
            || g.bias_relu
                .is_some_and(|i| !shape_ok(i, g.n as i128, false))
        {
            return Err(Failure::new(
                FailureKind::Launch,
                format!("peer {peer:?} does not match the parameters"),
            ));
        }
        let bias = g.bias_relu.map(|i| self.buffers[i].as_slice());
        gemm_peer(
            &self.buffers[g.a],
            &self.buffers[g.b],
            bias,
            g,
            cfg,
            &mut self.flusher,
        )
    }

    fn module(&self, handle: usize) -> Result<&Module, Failure> {
        self.modules
            .get(handle)
            .ok_or_else(|| Failure::new(FailureKind::Launch, format!("no built kernel {handle}")))
    }

    fn launch(&mut self, handle: usize) -> Result<(), Failure> {
        self.module(handle)?;
        let CpuRunner {
            modules,
            buffers,
            shared,
            ..
        } = self;
        let m = &mut modules[handle];
        for (f, slots) in &m.entries {
            let mut args: Vec<*mut c_void> = slots
                .iter()
                .map(|s| match *s {
                    Slot::Param(i) => buffers[i].as_mut_ptr().cast(),
                    Slot::Own(i) => m.workspaces[i].as_mut_ptr().cast(),
                    Slot::Shared(i) => shared[i].1.as_mut_ptr().cast(),
                })
                .collect();
            // SAFETY: each pointer is a live buffer of the size the kernel's program
            // declares; a kernel that strays outside it is contained by the worker.
            unsafe { f(args.as_mut_ptr()) };
        }
        Ok(())
    }

    fn flush(&mut self, handle: usize) {
        let CpuRunner {
            modules,
            buffers,
            shared,
            flusher,
            ..
        } = self;
        let mut bufs: Vec<&[f32]> = buffers.iter().map(Vec::as_slice).collect();
        bufs.extend(shared.iter().map(|s| s.1.as_slice()));
        if let Some(m) = modules.get(handle) {
            bufs.extend(m.workspaces.iter().map(Vec::as_slice));
        }
        flusher.flush(&bufs);
    }
}

/// Kills the process group a compiler was started in (its own: `process_group(0)`), so
/// cc1 and the assembler go with the driver.
fn kill_group(child: &std::process::Child) {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    // Only a real group id: 0 or 1 would name our own group or every process.
    if pid > 1 {
        // SAFETY: kill(2) with a negative pid signals exactly that process group; the
        // group is the child's own, created at spawn.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

/// Compiles C `code` into `dir/stem.so` with the toolchain (thread-safe: each call has
/// its own files). A compiler still running after `limit` is killed and the candidate is
/// a `Timeout`.
pub fn compile(
    toolchain: &CpuToolchain,
    dir: &std::path::Path,
    stem: &str,
    code: &str,
    limit: Option<std::time::Duration>,
) -> Result<(std::path::PathBuf, BuildInfo), Failure> {
    let c_path = dir.join(format!("{stem}.c"));
    let so_path = dir.join(format!("{stem}.so"));
    let log_path = dir.join(format!("{stem}.log"));
    let launch = |m: String| Failure::new(FailureKind::Launch, m);
    std::fs::write(&c_path, code)
        .map_err(|e| launch(format!("cannot write {}: {e}", c_path.display())))?;
    let log_file = std::fs::File::create(&log_path)
        .map_err(|e| launch(format!("cannot write {}: {e}", log_path.display())))?;
    let log_err = log_file
        .try_clone()
        .map_err(|e| launch(format!("cannot write {}: {e}", log_path.display())))?;
    let start = Instant::now();
    let mut child = Command::new(&toolchain.cc)
        .args(&toolchain.flags)
        .arg("-o")
        .arg(&so_path)
        .arg(&c_path)
        .stdin(std::process::Stdio::null())
        .stdout(log_file)
        .stderr(log_err)
        // Its own process group, so that a timeout kills cc1 and the assembler too, not
        // only the compiler driver.
        .process_group(0)
        .spawn()
        .map_err(|e| {
            Failure::new(
                FailureKind::Compile,
                format!("{NO_COMPILER} ({}: {e})", toolchain.cc),
            )
        })?;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(launch(format!("waiting for {}: {e}", toolchain.cc))),
        }
        if let Some(limit) = limit.filter(|l| start.elapsed() > *l) {
            kill_group(&child);
            let _ = child.kill();
            let _ = child.wait();
            return Err(Failure::new(
                FailureKind::Timeout,
                format!(
                    "{} did not finish compiling within {:.0} s",
                    toolchain.cc,
                    limit.as_secs_f64()
                ),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let compile_seconds = start.elapsed().as_secs_f64();
    let log = truncate(std::fs::read_to_string(&log_path).unwrap_or_default());
    if !status.success() {
        return Err(Failure::new(
            FailureKind::Compile,
            format!("{} failed ({status}):\n{log}", toolchain.cc),
        ));
    }
    Ok((
        so_path,
        BuildInfo {
            compile_seconds,
            log,
            ..BuildInfo::default()
        },
    ))
}

/// The reference source: the unscheduled program lowered for the CPU.
pub fn naive_source(program: &Program) -> Result<Source, Failure> {
    let lowered = lower(program, Backend::Cpu).map_err(|e| {
        Failure::new(
            FailureKind::Instantiation,
            format!("lowering the reference: {e}"),
        )
    })?;
    codegen::cpu::generate(&lowered).map_err(|e| {
        Failure::new(
            FailureKind::Instantiation,
            format!("generating the reference: {e}"),
        )
    })
}

/// Stored bytes as the 4-byte words of a host buffer (aligned for every element type),
/// the last word zero-padded.
fn words(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            f32::from_ne_bytes(w)
        })
        .collect()
}

/// The first `n` stored bytes of a host buffer's words.
fn stored_bytes(words: &[f32], n: usize) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_ne_bytes()).take(n).collect()
}

/// A zeroed workspace of `n` elements of `bytes` bytes, as 4-byte words.
fn workspace(n: i64, bytes: usize) -> Vec<f32> {
    vec![0.0; (n.max(0) as usize * bytes).div_ceil(4)]
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_LOG {
        let mut cut = MAX_LOG;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("\n[... truncated]");
    }
    s
}

/// What the timing loop asks of the thing it times.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Run,
    Flush,
}

/// Warm up for `warmup_seconds` (at least one run), then time between `min_runs` and
/// `max_runs` runs, stopping when [`TimingConfig::stops`] says so (`max_seconds` passed,
/// the runs settled, or the probe runs of a candidate to give up).
pub(crate) fn time_loop(
    cfg: &TimingConfig,
    mut step: impl FnMut(Step) -> Result<(), Failure>,
) -> Result<Vec<f64>, Failure> {
    let warm = Instant::now();
    loop {
        step(Step::Run)?;
        if warm.elapsed().as_secs_f64() >= cfg.warmup_seconds {
            break;
        }
    }
    let min = cfg.min_runs.max(1);
    let max = cfg.max_runs.max(min);
    let start = Instant::now();
    let mut runs = Vec::with_capacity(min.min(max));
    loop {
        if cfg.flush_cache {
            step(Step::Flush)?;
        }
        let t = Instant::now();
        step(Step::Run)?;
        runs.push(t.elapsed().as_secs_f64());
        if cfg.stops(&runs, start.elapsed().as_secs_f64()) {
            break;
        }
    }
    Ok(runs)
}

/// Evicts buffers from the caches between timed runs (see the module doc).
#[derive(Default)]
struct Flusher {
    /// The scratch buffer written where `clflush` is not available.
    #[cfg(not(target_arch = "x86_64"))]
    scratch: Vec<u8>,
}

impl Flusher {
    fn flush(&mut self, bufs: &[&[f32]]) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_clflush, _mm_mfence};
            for b in bufs {
                let (start, end) = (
                    b.as_ptr() as usize,
                    b.as_ptr() as usize + std::mem::size_of_val(*b),
                );
                let mut line = start & !63;
                while line < end {
                    // SAFETY: `line` lies within (or on the cache line of) a live buffer;
                    // clflush is part of SSE2, which every x86_64 CPU has.
                    unsafe { _mm_clflush(line as *const u8) };
                    line += 64;
                }
            }
            // SAFETY: SSE2, as above.
            unsafe { _mm_mfence() };
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = bufs;
            if self.scratch.is_empty() {
                let llc = crate::target::cpu::last_level_cache_bytes_sysfs();
                self.scratch = vec![0; (2 * llc).clamp(8 << 20, 256 << 20) as usize];
            }
            for x in self.scratch.iter_mut() {
                *x = x.wrapping_add(1);
            }
            std::hint::black_box(&self.scratch);
        }
    }
}

/// ndarray's `dot` (`general_mat_mul`, the same matrixmultiply path without allocating
/// the result) per batch on views in the stored layouts, then the epilogue, timed like a
/// kernel. matrixmultiply runs on one thread: the rows of C are split into [`threads`]
/// bands, each multiplied on its own thread of a pool made once, so the peer uses as
/// many cores as the kernels.
fn gemm_peer(
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    g: &GemmPeer,
    cfg: &TimingConfig,
    flusher: &mut Flusher,
) -> Result<(Vec<f64>, Vec<f32>), Failure> {
    use ndarray::linalg::general_mat_mul;
    use ndarray::{Array3, ArrayView3, Axis};
    let (batch, m, n, k) = (g.batch as usize, g.m as usize, g.n as usize, g.k as usize);
    let shape =
        |e: ndarray::ShapeError| Failure::new(FailureKind::Launch, format!("peer gemm: {e}"));
    // Views of the stored buffers as [batch, m, k] and [batch, k, n].
    let a = if g.trans_a {
        ArrayView3::from_shape((batch, k, m), a)
            .map_err(shape)?
            .permuted_axes([0, 2, 1])
    } else {
        ArrayView3::from_shape((batch, m, k), a).map_err(shape)?
    };
    let b = if g.trans_b {
        ArrayView3::from_shape((batch, n, k), b)
            .map_err(shape)?
            .permuted_axes([0, 2, 1])
    } else {
        ArrayView3::from_shape((batch, k, n), b).map_err(shape)?
    };
    let n_threads = threads().min(m.max(1));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n_threads)
        .build()
        .map_err(|e| Failure::new(FailureKind::Launch, format!("peer threads: {e}")))?;
    let band = m.div_ceil(n_threads).max(1);
    let mut c = Array3::<f32>::from_elem((batch, m, n), f32::NAN);
    let run = |c: &mut Array3<f32>| {
        for i in 0..batch {
            let (ai, bi) = (a.index_axis(Axis(0), i), b.index_axis(Axis(0), i));
            let mut ci = c.index_axis_mut(Axis(0), i);
            pool.scope(|s| {
                let bands = ci
                    .axis_chunks_iter_mut(Axis(0), band)
                    .zip(ai.axis_chunks_iter(Axis(0), band));
                for (mut c_band, a_band) in bands {
                    let bi = &bi;
                    s.spawn(move |_| {
                        general_mat_mul(1.0, &a_band, bi, 0.0, &mut c_band);
                        if let Some(bias) = bias {
                            for mut row in c_band.rows_mut() {
                                for (x, bj) in row.iter_mut().zip(bias) {
                                    *x = (*x + bj).max(0.0);
                                }
                            }
                        }
                    });
                }
            });
        }
    };
    run(&mut c);
    let out = c.iter().copied().collect();
    let runs = time_loop(cfg, |step| {
        match step {
            Step::Run => run(&mut c),
            Step::Flush => {
                let (a_s, b_s) = (a.as_slice_memory_order(), b.as_slice_memory_order());
                flusher.flush(&[
                    a_s.unwrap_or(&[]),
                    b_s.unwrap_or(&[]),
                    c.as_slice().unwrap_or(&[]),
                ])
            }
        }
        Ok(())
    })?;
    Ok((runs, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compiler_that_runs_past_its_limit_is_killed_and_a_timeout() {
        // A "compiler" that sleeps: `sh -c 'sleep 30' -o out.so in.c`.
        let tc = CpuToolchain {
            cc: "sh".into(),
            flags: vec!["-c".into(), "sleep 30".into()],
        };
        let dir = tempfile::tempdir().unwrap();
        let start = Instant::now();
        let limit = std::time::Duration::from_millis(300);
        let f = compile(&tc, dir.path(), "k", "int x;", Some(limit)).unwrap_err();
        assert_eq!(f.kind, FailureKind::Timeout, "{f}");
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        // A compiler that fails is a compile error with its output.
        let tc = CpuToolchain {
            cc: "sh".into(),
            flags: vec!["-c".into(), "echo broken >&2; exit 1".into()],
        };
        let f = compile(&tc, dir.path(), "k", "int x;", Some(limit)).unwrap_err();
        assert_eq!(f.kind, FailureKind::Compile, "{f}");
        assert!(f.message.contains("broken"), "{f}");
    }

    fn cfg() -> TimingConfig {
        TimingConfig {
            warmup_seconds: 0.0,
            min_runs: 3,
            max_runs: 5,
            max_seconds: 0.01,
            flush_cache: true,
            give_up_above_seconds: None,
            give_up_factor: None,
            settled_spread: None,
            enough_seconds: None,
        }
    }

    #[test]
    fn time_loop_stops_after_min_runs_once_they_settle() {
        // A spread wide enough that sleeps stretched by a loaded machine still agree (at
        // 0.5 a CI run once needed a fourth run); which spreads settle is tested exactly
        // in `measure::tests`. Without settling the loop would run 1000 times or 60 s.
        let cfg = TimingConfig {
            max_runs: 1000,
            max_seconds: 60.0,
            settled_spread: Some(100.0),
            ..cfg()
        };
        // A sleep of 2 ms per run.
        let runs = time_loop(&cfg, |s| {
            if s == Step::Run {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(runs.len(), cfg.min_runs);
    }

    #[test]
    fn time_loop_respects_the_run_bounds() {
        let mut calls = (0, 0);
        let runs = time_loop(&cfg(), |s| {
            match s {
                Step::Run => calls.0 += 1,
                Step::Flush => calls.1 += 1,
            }
            Ok(())
        })
        .unwrap();
        assert!((3..=5).contains(&runs.len()));
        assert_eq!(calls, (runs.len() + 1, runs.len()));
        assert!(runs.iter().all(|t| t.is_finite() && *t >= 0.0));
    }

    #[test]
    fn time_loop_gives_up_on_a_candidate_slower_than_the_limit() {
        let slow = |_: Step| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            Ok(())
        };
        let limited = |limit| TimingConfig {
            min_runs: 10,
            max_runs: 20,
            give_up_above_seconds: Some(limit),
            ..cfg()
        };
        // Every run takes at least 1 ms: over a 0.1 ms limit after the probe runs...
        let runs = time_loop(&limited(1e-4), slow).unwrap();
        assert_eq!(runs.len(), crate::measure::PROBE_RUNS);
        // ...and timed fully under a 10 s one.
        let runs = time_loop(&limited(10.0), slow).unwrap();
        assert!(runs.len() >= 10, "{}", runs.len());
    }

    #[test]
    fn time_loop_stops_on_failure() {
        let e = time_loop(&cfg(), |_| Err(Failure::new(FailureKind::Runtime, "boom"))).unwrap_err();
        assert_eq!(e.kind, FailureKind::Runtime);
    }

    #[test]
    fn gemm_peer_multiplies() {
        // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]], twice (batch 2).
        let a = [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0];
        let b = [5.0, 6.0, 7.0, 8.0, 5.0, 6.0, 7.0, 8.0];
        let g = GemmPeer::nn(2, 2, 2, 2);
        let (runs, out) = gemm_peer(&a, &b, None, &g, &cfg(), &mut Flusher::default()).unwrap();
        assert_eq!(out, vec![19.0, 22.0, 43.0, 50.0, 19.0, 22.0, 43.0, 50.0]);
        assert!(!runs.is_empty());
        // The same product from A^T stored [k, m] and B^T stored [n, k], then relu(C + bias)
        // with bias [-20, -60]: [[0, 0], [23, 0]].
        let at = [1.0, 3.0, 2.0, 4.0];
        let bt = [5.0, 7.0, 6.0, 8.0];
        let g = GemmPeer {
            trans_a: true,
            trans_b: true,
            ..GemmPeer::nn(1, 2, 2, 2)
        };
        let (_, out) = gemm_peer(&at, &bt, None, &g, &cfg(), &mut Flusher::default()).unwrap();
        assert_eq!(out, vec![19.0, 22.0, 43.0, 50.0]);
        let bias = [-20.0, -60.0];
        let (_, out) =
            gemm_peer(&at, &bt, Some(&bias), &g, &cfg(), &mut Flusher::default()).unwrap();
        assert_eq!(out, vec![0.0, 0.0, 23.0, 0.0]);
    }

    #[test]
    fn flags_derive_from_the_isa_not_the_build_machine() {
        let avx2 = CpuToolchain::flags_for(VectorIsa::Avx2Fma);
        for f in [
            "-O3",
            "-mavx2",
            "-mfma",
            "-ffp-contract=fast",
            "-fopenmp",
            "-std=c11",
        ] {
            assert!(avx2.iter().any(|x| x == f), "{f} in {avx2:?}");
        }
        assert!(!avx2.iter().any(|x| x.starts_with("-march")), "{avx2:?}");
        let avx512 = CpuToolchain::flags_for(VectorIsa::Avx512f);
        assert!(avx512.iter().any(|x| x == "-mavx512f"), "{avx512:?}");
        let none = CpuToolchain::flags_for(VectorIsa::Baseline);
        assert!(!none.iter().any(|x| x.starts_with("-m")), "{none:?}");
        assert_eq!(
            CpuToolchain::default_flags(),
            VectorIsa::host().map(CpuToolchain::flags_for)
        );
    }

    #[test]
    fn truncates_long_logs_on_a_char_boundary() {
        let s = truncate("é".repeat(MAX_LOG));
        assert!(s.ends_with("[... truncated]") && s.len() < MAX_LOG + 32);
    }
}
