//! The isolated measurement worker and the parent that drives it.
//!
//! **Wire protocol.** The parent starts `<exe> __worker` and writes one [`Job`] as a JSON
//! line on its stdin, then closes it. The worker answers JSON lines on stdout ([`Reply`]),
//! flushing after each:
//!
//! 1. `{"ready": true}` once the reference is built and run, or
//!    `{"reference_failed": Failure}` (then it stops);
//! 2. `{"index": i, "outcome": Outcome}` per candidate, in order (`i` counts from 0 in
//!    the job it was sent; `Outcome` is `{"Ok": Measured}` or `{"Err": Failure}`);
//! 3. `{"peer": {"Ok": PeerMeasured} | {"Err": Failure}}` when the job asks for a peer.
//!
//! A gated job (`"gated": true`, sent by [`Measurer::measure_sharing`] and
//! [`Measurer::start_compiling`]) is compiled first: the worker answers `{"compiled": n}`
//! and waits for a line `{"go": true, "give_up_above_seconds": s}` ([`Go`]) before it
//! touches the device, then goes on as above with that give-up latency; the parent sends
//! it once the device is free, and closes stdin.
//!
//! Lines that are not replies (a kernel's `printf`) are ignored. Several jobs may be sent
//! one per line; the worker answers each in turn and exits 0 at the end of its input.
//!
//! **Isolation.** [`Measurer`] reads the replies through a reader thread and a channel
//! with a per-candidate timeout. When the worker dies (end of output before the job is
//! answered: a segfault, an abort, an exit) the candidate in flight becomes
//! [`FailureKind::Crash`]; when it is silent for longer than the timeout, it is killed
//! and the candidate becomes [`FailureKind::Timeout`]; a [`FailureKind::Runtime`]
//! outcome (a sticky CUDA error) also retires the worker. In each case a fresh worker is
//! started on the remaining candidates (it recomputes the reference) and measuring goes
//! on. Nothing a kernel does can take the parent down.

use super::cpu::CpuRunner;
use super::cuda::{self, CudaRunner};
use super::{
    stats, BuildInfo, Device, Failure, FailureKind, Job, Measured, Outcome, ParamSpec, Peer,
    PeerMeasured, TimingConfig,
};
use crate::codegen::Source;
use crate::ir::{BufferKind, Program};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use thiserror::Error;

/// The hidden subcommand `main.rs` routes to [`worker_main`].
pub const WORKER_SUBCOMMAND: &str = "__worker";

/// One line from the worker to the parent (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reply {
    Candidate {
        index: usize,
        outcome: Outcome,
        /// Seconds the worker waited for this candidate's compile to finish before it
        /// could check it (CUDA compiles overlap the checking and timing of earlier ones).
        #[serde(default, skip_serializing_if = "is_zero")]
        compile_wait_seconds: f64,
    },
    Peer {
        peer: Result<PeerMeasured, Failure>,
    },
    ReferenceFailed {
        reference_failed: Failure,
    },
    Ready {
        ready: bool,
    },
    /// A gated job's candidates are compiled: the worker waits for a [`Go`] line.
    Compiled {
        compiled: usize,
    },
}

/// The line that lets a gated job's worker take the device (see the module doc), with
/// the give-up latency its timing is to use by now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Go {
    pub go: bool,
    #[serde(default)]
    pub give_up_above_seconds: Option<f64>,
}

/// How a measurement gets its first worker.
enum First<'a> {
    /// A new one, ungated.
    Spawn,
    /// A new gated one; the device is locked once it has compiled.
    Shared(&'a Mutex<()>),
    /// One started by [`Measurer::start_compiling`].
    Compiling(Worker),
}

/// A gated job's worker, compiling (see [`Measurer::start_compiling`]); dropping it kills
/// the worker.
pub struct Compiling {
    worker: Worker,
    candidates: Vec<Source>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The parameters of a program, in call order, as a [`Job`] names them.
pub fn param_specs(p: &Program) -> Vec<ParamSpec> {
    p.params
        .iter()
        .map(|b| {
            let buf = p.buffer(*b);
            ParamSpec {
                name: buf.name.clone(),
                shape: buf.shape.clone(),
                dtype: buf.dtype,
                is_output: buf.kind == BufferKind::Output,
            }
        })
        .collect()
}

/// Fresh inputs for a job: one vector per input parameter, uniform in [-1, 1] without
/// zero, from ChaCha8 seeded with `seed` (the same on every platform).
pub fn random_inputs(params: &[ParamSpec], seed: u64) -> Vec<Vec<f32>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    params
        .iter()
        .filter(|p| !p.is_output)
        .map(|p| {
            (0..p.numel())
                .map(|_| loop {
                    let x: f32 = rng.gen_range(-1.0..=1.0);
                    if x != 0.0 {
                        break x;
                    }
                })
                .collect()
        })
        .collect()
}

/// Output elements one task of the parallel comparison sums.
const COMPARE_CHUNK: usize = 1 << 16;

/// The relative L2 error of `outs` against `reference` over all outputs together; a
/// non-finite element is a wrong answer that names the first one.
pub fn compare(
    params: &[ParamSpec],
    outs: &[Vec<f32>],
    reference: &[Vec<f32>],
) -> Result<f64, Failure> {
    let wrong = |m: String| Failure::new(FailureKind::WrongAnswer, m);
    if outs.len() != reference.len() {
        return Err(wrong(format!(
            "{} outputs, the reference has {}",
            outs.len(),
            reference.len()
        )));
    }
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for ((p, o), r) in params
        .iter()
        .filter(|p| p.is_output)
        .zip(outs)
        .zip(reference)
    {
        if o.len() != r.len() {
            return Err(wrong(format!(
                "output {} has {} elements, the reference {}",
                p.name,
                o.len(),
                r.len()
            )));
        }
        // In parallel chunks: a large GEMM's output is tens of millions of elements,
        // checked for every candidate.
        let sums: Vec<Result<(f64, f64), usize>> = o
            .par_chunks(COMPARE_CHUNK)
            .zip(r.par_chunks(COMPARE_CHUNK))
            .enumerate()
            .map(|(c, (xs, ys))| {
                let (mut num, mut den) = (0.0f64, 0.0f64);
                for (i, (x, y)) in xs.iter().zip(ys).enumerate() {
                    if !x.is_finite() {
                        return Err(c * COMPARE_CHUNK + i);
                    }
                    num += (f64::from(*x) - f64::from(*y)).powi(2);
                    den += f64::from(*y).powi(2);
                }
                Ok((num, den))
            })
            .collect();
        for s in sums {
            match s {
                Ok((n, d)) => {
                    num += n;
                    den += d;
                }
                Err(i) => {
                    return Err(wrong(format!(
                        "{}{} is {} (the first non-finite output element)",
                        p.name,
                        index_text(&p.shape, i),
                        o[i]
                    )))
                }
            }
        }
    }
    Ok(if den > 0.0 {
        (num / den).sqrt()
    } else {
        num.sqrt()
    })
}

/// `[i, j]` for a flat row-major offset into `shape`.
fn index_text(shape: &[i64], mut flat: usize) -> String {
    let mut idx = vec![0usize; shape.len()];
    for (d, e) in shape.iter().enumerate().rev() {
        let e = (*e).max(1) as usize;
        idx[d] = flat % e;
        flat /= e;
    }
    format!(
        "[{}]",
        idx.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The runner for a job's device.
enum Runner {
    Cpu(CpuRunner),
    Cuda { runner: CudaRunner, arch: String },
}

impl Runner {
    fn new(device: &Device) -> Result<Runner, Failure> {
        Ok(match device {
            Device::Cpu => Runner::Cpu(CpuRunner::new()?),
            Device::Cuda { arch } => Runner::Cuda {
                runner: CudaRunner::new()?,
                arch: arch.clone(),
            },
        })
    }

    fn prepare(
        &mut self,
        params: &[ParamSpec],
        inputs: &[Vec<f32>],
        ws: &[crate::codegen::Workspace],
    ) -> Result<(), Failure> {
        match self {
            Runner::Cpu(r) => r.prepare(params, inputs, ws),
            Runner::Cuda { runner, .. } => runner.prepare(params, inputs, ws),
        }
    }

    fn build(&mut self, src: &Source) -> Result<(usize, BuildInfo), Failure> {
        match self {
            Runner::Cpu(r) => r.build(src),
            Runner::Cuda { arch, .. } => {
                let cubin = cuda::compile(&src.code, arch)?;
                self.load(Prebuilt::Cuda(cubin), src)
            }
        }
    }

    fn load(&mut self, p: Prebuilt, src: &Source) -> Result<(usize, BuildInfo), Failure> {
        match (self, p) {
            (Runner::Cuda { runner, .. }, Prebuilt::Cuda(cubin)) => {
                let mut info = cubin.info.clone();
                let h = runner.load(std::slice::from_ref(&cubin), src)?;
                // NVRTC can answer a repeated compile without ptxas's report; the driver
                // still knows the registers.
                info.registers = info.registers.or_else(|| runner.registers(h));
                Ok((h.0, info))
            }
            (Runner::Cpu(r), Prebuilt::Cpu(path, info)) => Ok((r.load(&path, src)?, info)),
            _ => Err(Failure::new(
                FailureKind::Launch,
                "a candidate was compiled for another device",
            )),
        }
    }

    fn run_once(&mut self, h: usize) -> Result<Vec<Vec<f32>>, Failure> {
        match self {
            Runner::Cpu(r) => r.run_once(h),
            Runner::Cuda { runner, .. } => runner.run_once(cuda::ProgramHandle(h)),
        }
    }

    fn time(&mut self, h: usize, cfg: &super::TimingConfig) -> Result<Vec<f64>, Failure> {
        match self {
            Runner::Cpu(r) => r.time(h, cfg),
            Runner::Cuda { runner, .. } => runner.time(cuda::ProgramHandle(h), cfg),
        }
    }

    fn time_peer(&mut self, peer: &Peer, cfg: &super::TimingConfig) -> Result<PeerRun, Failure> {
        match self {
            Runner::Cpu(r) => r.time_peer(peer, cfg).map(|(runs, out)| (runs, out, None)),
            Runner::Cuda { runner, .. } => runner
                .time_peer(peer, cfg)
                .map(|(runs, out, kernel)| (runs, out, Some(kernel).filter(|k| !k.is_empty()))),
        }
    }

    fn peer_name(&self) -> &'static str {
        match self {
            Runner::Cpu(_) => "ndarray dot (matrixmultiply)",
            Runner::Cuda { .. } => "cublasLt (fastest of its heuristic's candidates)",
        }
    }
}

/// The worker process: answers each job read from stdin (see the module doc). Returns
/// the exit code.
pub fn worker_main() -> i32 {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut lines = stdin.lock().lines();
    while let Some(line) = lines.next() {
        let Ok(line) = line else { return 2 };
        if line.trim().is_empty() {
            continue;
        }
        let written = match serde_json::from_str::<Job>(&line) {
            Ok(job) => answer(&job, &mut out, &mut || {
                let line = lines.next()?.ok()?;
                serde_json::from_str::<Go>(&line).ok().filter(|g| g.go)
            }),
            Err(e) => {
                let f = Failure::new(
                    FailureKind::Launch,
                    format!("the worker cannot read the job: {e}"),
                );
                send(
                    &mut out,
                    &Reply::ReferenceFailed {
                        reference_failed: f,
                    },
                )
            }
        };
        if written.is_err() {
            // The parent is gone: nobody to answer.
            return 3;
        }
    }
    0
}

fn send(out: &mut impl Write, reply: &Reply) -> std::io::Result<()> {
    let line = serde_json::to_string(reply).map_err(std::io::Error::other)?;
    writeln!(out, "{line}")?;
    out.flush()
}

/// Measures one job, writing its replies; a gated job's candidates are compiled before
/// the device is touched, and `go` waits for the parent's word (`None`: the parent is
/// gone or said something else, and the job ends there).
fn answer(
    job: &Job,
    out: &mut impl Write,
    go: &mut dyn FnMut() -> Option<Go>,
) -> std::io::Result<()> {
    let inputs = random_inputs(&job.params, job.seed);
    let limit = job
        .compile_timeout_seconds
        .and_then(|s| Duration::try_from_secs_f64(s).ok());
    // A gated job compiles its candidates and its reference and opens the runner (a
    // CUDA context) before the parent's word: none of that runs on the device.
    let mut give_up_above_seconds = job.timing.give_up_above_seconds;
    let (runner, compiled_first, reference_build) = if job.gated {
        let (runner, candidates, reference) = match &job.device {
            // The candidates compile on other threads while this one opens the context
            // and compiles the reference.
            Device::Cuda { arch } => std::thread::scope(|s| {
                let candidates = s.spawn(|| Compiler::for_cuda(arch, limit).all(&codes_of(job)));
                let runner = Runner::new(&job.device);
                let reference = cuda::compile(&job.reference.code, arch).map(Prebuilt::Cuda);
                (runner, candidates.join().ok(), Some(reference))
            }),
            // The CPU's compiles need the runner's build directory; they run after the
            // reference as in an ungated job.
            Device::Cpu => (Runner::new(&job.device), None, None),
        };
        let compiled = candidates.as_ref().map_or(0, Vec::len);
        send(out, &Reply::Compiled { compiled })?;
        let Some(go) = go() else { return Ok(()) };
        give_up_above_seconds = go.give_up_above_seconds;
        (runner, candidates, reference)
    } else {
        (Runner::new(&job.device), None, None)
    };
    let mut runner = match runner {
        Ok(r) => r,
        Err(f) => {
            return send(
                out,
                &Reply::ReferenceFailed {
                    reference_failed: f,
                },
            )
        }
    };
    // Candidates are compiled on every core (NVRTC is thread-safe, gcc runs as one
    // process per candidate). On CUDA the compiles run in the background from the start,
    // so they overlap the reference and the checking and timing of the candidates before
    // them (the GPU times while the CPU compiles), unless the job is gated and they are
    // done. On the CPU they all finish before `ready` (the parent allows the reference
    // phase more time): kernels are timed on a quiet machine.
    let compiled = match (compiled_first, &job.device) {
        (Some(all), _) => Some(Compiled::Done(all)),
        (None, Device::Cuda { .. }) => Some(Compiled::in_background(
            Compiler::for_runner(&runner, limit),
            codes_of(job),
        )),
        (None, Device::Cpu) => None,
    };
    let reference = match run_reference(&mut runner, job, &inputs, reference_build) {
        Ok(r) => r,
        Err(f) => {
            return send(
                out,
                &Reply::ReferenceFailed {
                    reference_failed: f,
                },
            )
        }
    };
    let mut compiled = compiled.unwrap_or_else(|| {
        Compiled::Done(Compiler::for_runner(&runner, limit).all(&codes_of(job)))
    });
    send(out, &Reply::Ready { ready: true })?;
    // The give-up limit tightens as the job's candidates are timed (`give_up_factor`).
    let mut timing = TimingConfig {
        give_up_above_seconds,
        ..job.timing.clone()
    };
    for (index, src) in job.candidates.iter().enumerate() {
        let waiting = Instant::now();
        let pre = compiled.take(index);
        let compile_wait_seconds = waiting.elapsed().as_secs_f64();
        let outcome = measure_candidate(&mut runner, job, &timing, src, &reference, pre);
        if let Ok(m) = &outcome {
            timing.note_timed(m.median_seconds);
        }
        send(
            out,
            &Reply::Candidate {
                index,
                outcome,
                compile_wait_seconds,
            },
        )?;
    }
    if let Some(peer) = &job.peer {
        let result = measure_peer(&mut runner, job, peer, &reference);
        send(out, &Reply::Peer { peer: result })?;
    }
    Ok(())
}

fn codes_of(job: &Job) -> Vec<String> {
    job.candidates.iter().map(|s| s.code.clone()).collect()
}

/// Compiled candidates as the measuring loop takes them.
enum Compiled {
    /// All compiled before measuring (one slot per candidate, in order).
    Done(Vec<Option<Result<Prebuilt, Failure>>>),
    /// Compiling on other threads; results arrive in completion order.
    Background {
        results: Receiver<(usize, Result<Prebuilt, Failure>)>,
        got: Vec<Option<Result<Prebuilt, Failure>>>,
    },
}

impl Compiled {
    fn in_background(compiler: Compiler, codes: Vec<String>) -> Compiled {
        let (tx, rx) = mpsc::channel();
        let got = (0..codes.len()).map(|_| None).collect();
        std::thread::spawn(move || {
            compiler.each(&codes, |i, r| {
                let _ = tx.send((i, r));
            })
        });
        Compiled::Background { results: rx, got }
    }

    /// Candidate `i`'s compile result, waiting for it if it is still compiling; `None`
    /// when there is none (the caller then builds it itself).
    fn take(&mut self, i: usize) -> Option<Result<Prebuilt, Failure>> {
        match self {
            Compiled::Done(all) => all.get_mut(i).and_then(Option::take),
            Compiled::Background { results, got } => {
                while got.get(i).is_some_and(Option::is_none) {
                    let Ok((j, r)) = results.recv() else { break };
                    if let Some(slot) = got.get_mut(j) {
                        *slot = Some(r);
                    }
                }
                got.get_mut(i).and_then(Option::take)
            }
        }
    }
}

/// Runs the reference (`prebuilt` where it was compiled before) on fresh inputs.
fn run_reference(
    runner: &mut Runner,
    job: &Job,
    inputs: &[Vec<f32>],
    prebuilt: Option<Result<Prebuilt, Failure>>,
) -> Result<Vec<Vec<f32>>, Failure> {
    runner.prepare(&job.params, inputs, &job.reference.workspaces)?;
    let (h, _) = match prebuilt {
        Some(p) => runner.load(p?, &job.reference)?,
        None => runner.build(&job.reference)?,
    };
    let outs = runner.run_once(h)?;
    // A reference that leaves NaN behind cannot judge anything.
    compare(&job.params, &outs, &outs)?;
    Ok(outs)
}

/// A candidate compiled before measuring starts.
enum Prebuilt {
    Cuda(cuda::Cubin),
    /// A shared library in the CPU runner's build directory.
    Cpu(PathBuf, BuildInfo),
}

type CompileFn = dyn Fn(usize, &str) -> Result<Prebuilt, Failure> + Send + Sync;

/// Compiles candidate sources for a runner's device, on every core.
struct Compiler {
    compile: Arc<CompileFn>,
    /// The compiler's name, for messages.
    what: String,
    limit: Option<Duration>,
}

impl Compiler {
    /// A compiler for `runner`'s device; a compile still running `limit` after it
    /// started is a `Timeout`.
    fn for_runner(runner: &Runner, limit: Option<Duration>) -> Compiler {
        match runner {
            Runner::Cuda { arch, .. } => Compiler::for_cuda(arch, limit),
            Runner::Cpu(r) => {
                let (toolchain, dir) = (r.toolchain().clone(), r.build_dir().to_path_buf());
                Compiler {
                    compile: Arc::new(move |i, code: &str| {
                        super::cpu::compile(&toolchain, &dir, &format!("candidate{i}"), code, limit)
                            .map(|(path, info)| Prebuilt::Cpu(path, info))
                    }),
                    what: r.toolchain().cc.clone(),
                    limit,
                }
            }
        }
    }

    /// NVRTC for `arch`: needs no device, so a gated job compiles before it takes one.
    fn for_cuda(arch: &str, limit: Option<Duration>) -> Compiler {
        let arch = arch.to_string();
        Compiler {
            compile: Arc::new(move |_, code: &str| cuda::compile(code, &arch).map(Prebuilt::Cuda)),
            what: "NVRTC".to_string(),
            limit,
        }
    }

    /// One result per source, in order.
    fn all(&self, codes: &[String]) -> Vec<Option<Result<Prebuilt, Failure>>> {
        let mut out: Vec<Option<Result<Prebuilt, Failure>>> =
            (0..codes.len()).map(|_| None).collect();
        self.each(codes, |i, r| out[i] = Some(r));
        out
    }

    /// Compiles every source, handing each result to `done` as it is ready (exactly
    /// once per source). Threads take the next source from a shared counter, so one
    /// slow compile holds up only itself. A compile still running past the limit is a
    /// `Timeout`: the compiler goes on without it and starts another thread for the
    /// rest of the queue (the stuck one ends with the worker process, which serves one
    /// job).
    fn each(&self, codes: &[String], mut done: impl FnMut(usize, Result<Prebuilt, Failure>)) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (what, limit) = (&self.what, self.limit);
        let n = codes.len();
        let threads = std::thread::available_parallelism()
            .map_or(1, |t| t.get())
            .min(n.max(1));
        let codes: Arc<Vec<String>> = Arc::new(codes.to_vec());
        let next = Arc::new(AtomicUsize::new(0));
        // When each source's compile started: the limit applies to each compile, not to
        // the batch.
        let started: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; n]));
        let (tx, rx) = mpsc::channel();
        let spawn = || {
            let (codes, next, started, tx, compile) = (
                codes.clone(),
                next.clone(),
                started.clone(),
                tx.clone(),
                self.compile.clone(),
            );
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(code) = codes.get(i) else { break };
                if let Ok(mut s) = started.lock() {
                    s[i] = Some(Instant::now());
                }
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile(i, code)))
                        .unwrap_or_else(|_| {
                            Err(Failure::new(
                                FailureKind::Compile,
                                "the compiler thread panicked",
                            ))
                        });
                if tx.send((i, result)).is_err() {
                    break;
                }
            });
        };
        for _ in 0..threads {
            spawn();
        }
        let mut finished = vec![false; n];
        let mut count = 0;
        while count < n {
            let got = match limit {
                Some(_) => rx.recv_timeout(Duration::from_millis(50)).ok(),
                None => rx.recv().ok(),
            };
            if let Some((i, result)) = got {
                if !finished[i] {
                    finished[i] = true;
                    count += 1;
                    done(i, result);
                }
            }
            let Some(limit) = limit else { continue };
            let expired: Vec<usize> = match started.lock() {
                Ok(s) => (0..n)
                    .filter(|&i| !finished[i] && s[i].is_some_and(|t| t.elapsed() > limit))
                    .collect(),
                Err(_) => Vec::new(),
            };
            for i in expired {
                finished[i] = true;
                count += 1;
                done(
                    i,
                    Err(Failure::new(
                        FailureKind::Timeout,
                        format!(
                            "{what} did not finish compiling within {:.0} s",
                            limit.as_secs_f64()
                        ),
                    )),
                );
                // Its thread is still busy: another one takes over the queue.
                spawn();
            }
        }
    }
}

fn measure_candidate(
    runner: &mut Runner,
    job: &Job,
    timing: &TimingConfig,
    src: &Source,
    reference: &[Vec<f32>],
    precompiled: Option<Result<Prebuilt, Failure>>,
) -> Outcome {
    let (h, build) = match precompiled {
        Some(p) => runner.load(p?, src)?,
        None => runner.build(src)?,
    };
    if let Some(limits) = &job.build_limits {
        let threads = src
            .kernels
            .iter()
            .map(|k| k.block.iter().map(|&d| i64::from(d)).product::<i64>())
            .max()
            .unwrap_or(1);
        limits
            .check(
                build.registers,
                build.spill_bytes(),
                build.stack_bytes.unwrap_or(0),
                threads,
            )
            .map_err(Failure::rejected)?;
    }
    let outs = runner.run_once(h)?;
    let rel_error = compare(&job.params, &outs, reference)?;
    check_tolerance(rel_error, job.tolerance)?;
    let runs = runner.time(h, timing)?;
    let (median_seconds, min_seconds, max_seconds) = checked_stats(&runs)?;
    Ok(Measured {
        median_seconds,
        min_seconds,
        max_seconds,
        runs,
        rel_error,
        build,
    })
}

/// A peer's run times, its output and, where the library says, which kernel ran.
type PeerRun = (Vec<f64>, Vec<f32>, Option<String>);

fn measure_peer(
    runner: &mut Runner,
    job: &Job,
    peer: &Peer,
    reference: &[Vec<f32>],
) -> Result<PeerMeasured, Failure> {
    let (runs, out, kernel) = runner.time_peer(peer, &job.timing)?;
    let Peer::Gemm(g) = peer;
    let c = &g.c;
    let slot = job.params.iter().take(*c).filter(|p| p.is_output).count();
    let (spec, want) = match (job.params.get(*c), reference.get(slot)) {
        (Some(spec), Some(want)) if spec.is_output => (spec, want),
        _ => {
            return Err(Failure::new(
                FailureKind::Launch,
                format!("peer output {c} is not an output parameter"),
            ))
        }
    };
    let rel_error = compare(
        std::slice::from_ref(spec),
        &[out],
        std::slice::from_ref(want),
    )?;
    check_tolerance(rel_error, job.tolerance)?;
    let (median_seconds, min_seconds, max_seconds) = checked_stats(&runs)?;
    Ok(PeerMeasured {
        name: match g.dtype {
            crate::ir::DType::F32 if g.tf32 => format!("{}, TF32", runner.peer_name()),
            crate::ir::DType::F32 => runner.peer_name().to_string(),
            d => format!(
                "{}, {} with f32 accumulation",
                runner.peer_name(),
                d.short()
            ),
        },
        kernel,
        median_seconds,
        min_seconds,
        max_seconds,
        rel_error,
    })
}

fn check_tolerance(rel_error: f64, tolerance: f64) -> Result<(), Failure> {
    if rel_error.is_finite() && rel_error <= tolerance {
        Ok(())
    } else {
        Err(Failure::new(
            FailureKind::WrongAnswer,
            format!("relative error {rel_error:.3e} exceeds the tolerance {tolerance:.0e}"),
        ))
    }
}

/// Median, min, max of run times that are all finite (JSON has no NaN).
fn checked_stats(runs: &[f64]) -> Result<(f64, f64, f64), Failure> {
    if runs.is_empty() || runs.iter().any(|t| !t.is_finite() || *t < 0.0) {
        return Err(Failure::new(
            FailureKind::Runtime,
            format!("bad timing runs {runs:?}"),
        ));
    }
    Ok(stats(runs))
}

/// Why measuring could not start or could not judge any candidate.
#[derive(Debug, Error)]
pub enum MeasureError {
    #[error("cannot start the measurement worker {exe}: {source}")]
    Spawn { exe: String, source: std::io::Error },
    /// The reference (or the runner itself) failed: no candidate can be checked.
    #[error("the reference failed, so no candidate can be checked: {0}")]
    Reference(Failure),
}

/// Drives worker processes: sends a job, collects one outcome per candidate, restarts
/// the worker after a crash, a timeout or a runtime error.
#[derive(Clone, Debug)]
pub struct Measurer {
    exe: PathBuf,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    timeout: Option<Duration>,
    reference_timeout: Duration,
    peer_failure: Option<Failure>,
    workers_started: usize,
    last_setup: Duration,
    last_compile_wait: Duration,
    last_device_wait: Duration,
}

impl Measurer {
    /// Measures with `<exe> __worker`.
    pub fn new(exe: impl Into<PathBuf>) -> Measurer {
        Measurer {
            exe: exe.into(),
            args: vec![WORKER_SUBCOMMAND.to_string()],
            envs: Vec::new(),
            timeout: None,
            reference_timeout: Duration::from_secs(300),
            peer_failure: None,
            workers_started: 0,
            last_setup: Duration::ZERO,
            last_compile_wait: Duration::ZERO,
            last_device_wait: Duration::ZERO,
        }
    }

    /// Measures with this very binary (`std::env::current_exe()` + `__worker`).
    pub fn for_current_exe() -> Result<Measurer, MeasureError> {
        let exe = std::env::current_exe().map_err(|source| MeasureError::Spawn {
            exe: "the current executable".into(),
            source,
        })?;
        Ok(Measurer::new(exe))
    }

    /// How long one candidate (build, check, timing) may take; overrides the job's
    /// `timeout_seconds`.
    pub fn with_timeout(mut self, timeout: Duration) -> Measurer {
        self.timeout = Some(timeout);
        self
    }

    /// How long starting a worker and checking the reference may take (default 300 s:
    /// the naive reference of a large workload is slow).
    pub fn with_reference_timeout(mut self, timeout: Duration) -> Measurer {
        self.reference_timeout = timeout;
        self
    }

    /// Replaces the worker's arguments (default `["__worker"]`).
    pub fn with_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Measurer {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Sets an environment variable for the worker.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Measurer {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// Why the peer of the last `measure` call failed, when it did.
    pub fn peer_failure(&self) -> Option<&Failure> {
        self.peer_failure.as_ref()
    }

    /// Wall time of the last `measure` call spent before candidates were checked: starting
    /// workers, running the reference and (on the CPU) compiling every candidate; on CUDA
    /// the compiles go on in the background (see [`Measurer::last_compile_wait`]).
    pub fn last_setup_time(&self) -> Duration {
        self.last_setup
    }

    /// Wall time of the last `measure` call the worker spent waiting for candidates'
    /// compiles after `ready` (on CUDA compiles overlap the checking and timing of the
    /// candidates before them; this is the part they did not hide).
    pub fn last_compile_wait(&self) -> Duration {
        self.last_compile_wait
    }

    /// Wall time of the last `measure_sharing` call spent waiting for the device while
    /// another measurer held it.
    pub fn last_device_wait(&self) -> Duration {
        self.last_device_wait
    }

    /// How many worker processes this measurer has started.
    pub fn workers_started(&self) -> usize {
        self.workers_started
    }

    /// Measures every candidate of the job (one outcome each, in order) and the peer if
    /// asked; fails only when no worker starts or the reference fails.
    pub fn measure(
        &mut self,
        job: &Job,
    ) -> Result<(Vec<Outcome>, Option<PeerMeasured>), MeasureError> {
        self.measure_on(job, First::Spawn)
    }

    /// As [`Measurer::measure`], for a device that other measurers (each with a worker of
    /// its own) share: the worker compiles every candidate first, and only then is
    /// `device` locked, held until the job is measured. One measurer so compiles while
    /// another checks and times, and no two time on the device at once.
    pub fn measure_sharing(
        &mut self,
        job: &Job,
        device: &Mutex<()>,
    ) -> Result<(Vec<Outcome>, Option<PeerMeasured>), MeasureError> {
        self.measure_on(job, First::Shared(device))
    }

    /// Starts a worker compiling `job`'s candidates, to be measured later by
    /// [`Measurer::measure_compiled`] once the device is free: a tuner so compiles its
    /// next batch while it checks and times this one.
    pub fn start_compiling(&mut self, job: &Job) -> Result<Compiling, MeasureError> {
        let mut worker = self.spawn()?;
        worker.send(&Job {
            gated: true,
            ..job.clone()
        });
        Ok(Compiling {
            worker,
            candidates: job.candidates.clone(),
        })
    }

    /// Measures `job` (as [`Measurer::measure`]) on the worker that has been compiling it
    /// since [`Measurer::start_compiling`], waiting for its compiles to end; its timing
    /// takes `job`'s give-up latency, which may have changed since. A worker started on
    /// other candidates is dropped and the job measured afresh.
    pub fn measure_compiled(
        &mut self,
        compiling: Compiling,
        job: &Job,
    ) -> Result<(Vec<Outcome>, Option<PeerMeasured>), MeasureError> {
        match compiling.candidates == job.candidates {
            true => self.measure_on(job, First::Compiling(compiling.worker)),
            false => self.measure_on(job, First::Spawn),
        }
    }

    fn measure_on<'d>(
        &mut self,
        job: &Job,
        mut first: First<'d>,
    ) -> Result<(Vec<Outcome>, Option<PeerMeasured>), MeasureError> {
        self.peer_failure = None;
        self.last_setup = Duration::ZERO;
        self.last_compile_wait = Duration::ZERO;
        self.last_device_wait = Duration::ZERO;
        let n = job.candidates.len();
        let timeout = self.timeout.unwrap_or_else(|| {
            Duration::try_from_secs_f64(job.timeout_seconds).unwrap_or(Duration::from_secs(60))
        });
        let mut outcomes: Vec<Outcome> = Vec::with_capacity(n);
        let mut peer = None;
        let mut peer_pending = job.peer.is_some();
        // The shared device, once taken (a worker started after a crash needs no gate:
        // the device is held).
        let mut held: Option<MutexGuard<'d, ()>> = None;
        while outcomes.len() < n || peer_pending {
            let base = outcomes.len();
            let sub = Job {
                candidates: job.candidates[base..].to_vec(),
                gated: false,
                ..job.clone()
            };
            let first = std::mem::replace(&mut first, First::Spawn);
            let mut w =
                self.worker_for(first, &sub, job.timing.give_up_above_seconds, &mut held)?;
            let spawned = Instant::now();
            let mut ready = false;
            let mut deadline = Instant::now() + self.reference_timeout;
            let ended = loop {
                if outcomes.len() == n && !peer_pending {
                    break None;
                }
                match w.next(deadline) {
                    Event::Reply(Reply::Ready { .. }) => {
                        ready = true;
                        self.last_setup += spawned.elapsed();
                        deadline = Instant::now() + timeout;
                    }
                    Event::Reply(Reply::ReferenceFailed { reference_failed }) => {
                        return Err(MeasureError::Reference(reference_failed))
                    }
                    Event::Reply(Reply::Candidate {
                        index,
                        outcome,
                        compile_wait_seconds,
                    }) if ready && base + index == outcomes.len() => {
                        self.last_compile_wait +=
                            Duration::try_from_secs_f64(compile_wait_seconds).unwrap_or_default();
                        deadline = Instant::now() + timeout;
                        let sticky = matches!(&outcome, Err(f) if f.kind == FailureKind::Runtime);
                        outcomes.push(outcome);
                        if sticky && outcomes.len() < n {
                            break None;
                        }
                    }
                    Event::Reply(Reply::Peer { peer: p }) if ready && outcomes.len() == n => {
                        peer_pending = false;
                        match p {
                            Ok(p) => peer = Some(p),
                            Err(f) => self.peer_failure = Some(f),
                        }
                    }
                    Event::Reply(other) => w.noise(format!("out-of-order reply {other:?}")),
                    Event::Eof => break Some(FailureKind::Crash),
                    Event::Timeout => break Some(FailureKind::Timeout),
                }
            };
            let Some(kind) = ended else { continue };
            let what = if !ready {
                "checking the reference"
            } else if outcomes.len() < n {
                "measuring this candidate"
            } else {
                "timing the peer"
            };
            let failure = Failure::new(kind, w.post_mortem(kind, what, timeout));
            if !ready {
                return Err(MeasureError::Reference(failure));
            } else if outcomes.len() < n {
                outcomes.push(Err(failure));
            } else {
                peer_pending = false;
                self.peer_failure = Some(failure);
            }
        }
        Ok((outcomes, peer))
    }

    /// The worker that measures `sub`: a gated one once it has compiled (taking the
    /// shared device into `held` first) and been let go with `give_up_above_seconds`, or a
    /// new ungated one, also where a gated one died while compiling (the compile that
    /// killed it then fails its candidate alone). The compiles count as setup.
    fn worker_for<'d>(
        &mut self,
        first: First<'d>,
        sub: &Job,
        give_up_above_seconds: Option<f64>,
        held: &mut Option<MutexGuard<'d, ()>>,
    ) -> Result<Worker, MeasureError> {
        let compiling = Instant::now();
        let (compiled, device) = match first {
            First::Spawn => (None, None),
            First::Shared(device) => {
                let w = self.start_compiling(sub)?.worker;
                (self.compiled(w), Some(device))
            }
            First::Compiling(w) => (self.compiled(w), None),
        };
        self.last_setup += compiling.elapsed();
        if let Some(device) = device {
            // A measurer that panicked while holding the device left it between two jobs.
            let waiting = Instant::now();
            *held = Some(device.lock().unwrap_or_else(|p| p.into_inner()));
            self.last_device_wait = waiting.elapsed();
        }
        Ok(match compiled {
            Some(mut w) => {
                w.go(give_up_above_seconds);
                w
            }
            None => {
                let mut w = self.spawn()?;
                w.send(sub);
                w
            }
        })
    }

    /// The gated worker once it answered `{"compiled": n}`; `None` when it died or was
    /// silent for the reference's timeout meanwhile (it is killed).
    fn compiled(&self, mut w: Worker) -> Option<Worker> {
        let deadline = Instant::now() + self.reference_timeout;
        loop {
            match w.next(deadline) {
                Event::Reply(Reply::Compiled { .. }) => return Some(w),
                Event::Reply(other) => w.noise(format!("out-of-order reply {other:?}")),
                Event::Eof | Event::Timeout => return None,
            }
        }
    }

    fn spawn(&mut self) -> Result<Worker, MeasureError> {
        self.workers_started += 1;
        Worker::spawn(&self.exe, &self.args, &self.envs).map_err(|source| MeasureError::Spawn {
            exe: self.exe.display().to_string(),
            source,
        })
    }
}

/// What the parent hears next from a worker.
enum Event {
    Reply(Reply),
    Eof,
    Timeout,
}

/// Output kept for a post-mortem, at most.
const TAIL: usize = 4096;

/// A running worker process with threads reading its stdout and stderr.
struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    noise: VecDeque<String>,
    /// The worker's `TMPDIR`, removed by the parent when the worker is dropped (after it
    /// is killed), so a crashed worker leaves no build files behind.
    _tmp: tempfile::TempDir,
}

impl Worker {
    fn spawn(
        exe: &std::path::Path,
        args: &[String],
        envs: &[(String, String)],
    ) -> std::io::Result<Worker> {
        let tmp = tempfile::Builder::new()
            .prefix("tessel-worker-")
            .tempdir()?;
        let mut cmd = Command::new(exe);
        let wait = super::cpu::OPENMP_WAIT;
        if wait.iter().all(|(key, _)| std::env::var_os(key).is_none()) {
            cmd.envs(wait);
        }
        let mut child = cmd
            .env("TMPDIR", tmp.path())
            .args(args)
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(stdout);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match r.read_until(b'\n', &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            if tx
                                .send(String::from_utf8_lossy(&buf).trim_end().to_string())
                                .is_err()
                            {
                                break;
                            }
                        }
                    }
                }
            });
        }
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(mut err) = child.stderr.take() {
            let tail = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut chunk = [0u8; 1024];
                while let Ok(k @ 1..) = err.read(&mut chunk) {
                    let Ok(mut t) = tail.lock() else { break };
                    t.extend(&chunk[..k]);
                    let excess = t.len().saturating_sub(TAIL);
                    t.drain(..excess);
                }
            });
        }
        Ok(Worker {
            child,
            stdin,
            lines,
            stderr,
            noise: VecDeque::new(),
            _tmp: tmp,
        })
    }

    /// Writes the job and closes stdin, unless the job is gated: then stdin stays open
    /// for [`Worker::go`]. A worker that is already gone shows up as end of output.
    fn send(&mut self, job: &Job) {
        if let (Some(mut stdin), Ok(line)) = (self.stdin.take(), serde_json::to_string(job)) {
            let _ = writeln!(stdin, "{line}").and_then(|_| stdin.flush());
            if job.gated {
                self.stdin = Some(stdin);
            }
        }
    }

    /// Lets a gated job take the device, giving up on candidates slower than
    /// `give_up_above_seconds` after their probes, and closes stdin.
    fn go(&mut self, give_up_above_seconds: Option<f64>) {
        let go = Go {
            go: true,
            give_up_above_seconds,
        };
        if let (Some(mut stdin), Ok(line)) = (self.stdin.take(), serde_json::to_string(&go)) {
            let _ = writeln!(stdin, "{line}").and_then(|_| stdin.flush());
        }
    }

    fn next(&mut self, deadline: Instant) -> Event {
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => match serde_json::from_str::<Reply>(&line) {
                    Ok(reply) => return Event::Reply(reply),
                    Err(_) => self.noise(line),
                },
                Err(RecvTimeoutError::Timeout) => return Event::Timeout,
                Err(RecvTimeoutError::Disconnected) => return Event::Eof,
            }
        }
    }

    fn noise(&mut self, line: String) {
        if !line.trim().is_empty() {
            self.noise.push_back(line);
            if self.noise.len() > 8 {
                self.noise.pop_front();
            }
        }
    }

    /// Ends the worker and says what happened to it.
    fn post_mortem(&mut self, kind: FailureKind, what: &str, timeout: Duration) -> String {
        let status = match kind {
            FailureKind::Timeout => {
                self.kill();
                format!(
                    "no answer within {:.1} s while {what}; the worker was killed",
                    timeout.as_secs_f64()
                )
            }
            _ => format!(
                "the worker died while {what}: {}",
                describe(self.wait_briefly())
            ),
        };
        // Give the stderr reader a moment to drain what the worker wrote last.
        std::thread::sleep(Duration::from_millis(20));
        let mut msg = status;
        let err = self
            .stderr
            .lock()
            .map(|mut t| {
                String::from_utf8_lossy(t.make_contiguous())
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        if !err.is_empty() {
            msg.push_str(&format!("\nstderr:\n{err}"));
        }
        if !self.noise.is_empty() {
            msg.push_str(&format!(
                "\nstdout:\n{}",
                Vec::from(self.noise.clone()).join("\n")
            ));
        }
        msg
    }

    /// The exit status, waiting up to two seconds before killing.
    fn wait_briefly(&mut self) -> Option<ExitStatus> {
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(_) => break,
            }
        }
        self.kill();
        None
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            self.kill();
        }
    }
}

/// "killed by signal 11 (SIGSEGV)", "exit code 3".
fn describe(status: Option<ExitStatus>) -> String {
    let Some(status) = status else {
        return "it closed its output but did not exit, so it was killed".to_string();
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                4 => " (SIGILL)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                _ => "",
            };
            return format!("killed by signal {sig}{name}");
        }
    }
    match status.code() {
        Some(c) => format!("exit code {c}"),
        None => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;

    fn sleepy_runner(script: &str) -> Runner {
        // A "compiler" that runs `script` per source: `sh -c SCRIPT -o out.so in.c`.
        let tc = super::super::cpu::CpuToolchain {
            cc: "sh".into(),
            flags: vec!["-c".into(), script.into()],
        };
        Runner::Cpu(CpuRunner::with_toolchain(tc).unwrap())
    }

    fn codes(sources: &[Source]) -> Vec<String> {
        sources.iter().map(|s| s.code.clone()).collect()
    }

    fn source(code: &str) -> Source {
        Source {
            code: code.into(),
            kernels: Vec::new(),
            workspaces: Vec::new(),
        }
    }

    #[test]
    fn the_compile_limit_applies_to_each_compile_not_to_the_batch() {
        // Four waves of 0.4 s compiles on every core: the batch takes at least 1.6 s, more
        // than the limit, yet no single compile comes near it.
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
        let sources = vec![source("int x;"); 4 * threads];
        let runner = sleepy_runner("sleep 0.4");
        let out =
            Compiler::for_runner(&runner, Some(Duration::from_millis(1500))).all(&codes(&sources));
        assert_eq!(out.len(), sources.len());
        for o in &out {
            assert!(
                matches!(o, Some(Ok(_))),
                "{:?}",
                o.as_ref().map(|r| r.as_ref().err())
            );
        }
    }

    #[test]
    fn a_compile_past_the_limit_is_a_timeout_and_the_rest_still_compile() {
        let runner = sleepy_runner("sleep 0.1; case \"$2\" in *candidate0.c) sleep 30;; esac");
        let sources = vec![source("int x;"); 3];
        let start = Instant::now();
        let out =
            Compiler::for_runner(&runner, Some(Duration::from_millis(800))).all(&codes(&sources));
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(
            matches!(&out[0], Some(Err(f)) if f.kind == FailureKind::Timeout),
            "{:?}",
            out[0].as_ref().map(|r| r.as_ref().err())
        );
        assert!(matches!(out[1], Some(Ok(_))));
        assert!(matches!(out[2], Some(Ok(_))));
    }

    fn spec(name: &str, shape: Vec<i64>, is_output: bool) -> ParamSpec {
        ParamSpec {
            name: name.into(),
            shape,
            dtype: DType::F32,
            is_output,
        }
    }

    #[test]
    fn inputs_are_deterministic_nonzero_and_bounded() {
        let params = [
            spec("A", vec![4, 8], false),
            spec("C", vec![4], true),
            spec("B", vec![3], false),
        ];
        let a = random_inputs(&params, 7);
        assert_eq!(a.iter().map(Vec::len).collect::<Vec<_>>(), vec![32, 3]);
        assert_eq!(a, random_inputs(&params, 7));
        assert_ne!(a, random_inputs(&params, 8));
        assert!(a
            .iter()
            .flatten()
            .all(|x| *x != 0.0 && (-1.0..=1.0).contains(x)));
    }

    #[test]
    fn compare_names_the_first_nan() {
        let params = [spec("A", vec![2], false), spec("C", vec![2, 3], true)];
        let reference = vec![vec![1.0; 6]];
        assert_eq!(compare(&params, &reference, &reference), Ok(0.0));
        let mut bad = reference.clone();
        bad[0][4] = f32::NAN;
        let e = compare(&params, &bad, &reference).unwrap_err();
        assert_eq!(e.kind, FailureKind::WrongAnswer);
        assert!(e.message.starts_with("C[1, 1] is NaN"), "{}", e.message);
        let off = vec![vec![1.0, 1.0, 1.0, 1.0, 1.0, 4.0]];
        let err = compare(&params, &off, &reference).unwrap();
        assert!((err - (9.0f64 / 6.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn replies_round_trip_in_the_documented_shape() {
        let r = Reply::Candidate {
            index: 3,
            outcome: Err(Failure::new(FailureKind::Compile, "x")),
            compile_wait_seconds: 0.0,
        };
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(
            line,
            r#"{"index":3,"outcome":{"Err":{"kind":"compile","message":"x"}}}"#
        );
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), r);
        for r in [
            Reply::Ready { ready: true },
            Reply::ReferenceFailed {
                reference_failed: Failure::new(FailureKind::Crash, "y"),
            },
        ] {
            assert_eq!(
                serde_json::from_str::<Reply>(&serde_json::to_string(&r).unwrap()).unwrap(),
                r
            );
        }
        assert!(serde_json::from_str::<Reply>("hello from printf").is_err());
    }

    #[test]
    fn describes_exit_statuses() {
        assert!(describe(None).contains("killed"));
    }
}
