//! The `tessel` command line: parses arguments, reads files, calls the library, prints.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use tessel::ir::printer::print_program;
use tessel::lower::{lower, Backend};
use tessel::schedule::{replay, text, Schedule};
use tessel::workload::{self, Workload};

/// Proposing a batch (replay, lowering, checks) allocates and frees IR nodes by the
/// million on every core; mimalloc does that in about 35% less CPU time than glibc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "tessel",
    version,
    about = "An auto-scheduler for tensor programs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Copy, Clone, ValueEnum)]
enum Emit {
    /// The loop-nest IR (TVMScript-like).
    Ir,
    /// The schedule as a trace (itself a valid --schedule file).
    Trace,
    /// The workload in the text language.
    Workload,
    /// The canonical workload text and its key.
    Key,
    /// CUDA C for the scheduled program (with each kernel's launch configuration).
    Cuda,
    /// The PTX NVRTC makes of that CUDA C for sm_90a (needs NVRTC, not a GPU).
    Ptx,
    /// C for the host CPU.
    C,
}

#[derive(Copy, Clone, ValueEnum)]
enum BuildEmit {
    /// The CUDA C handed to NVRTC.
    Cuda,
    /// The PTX NVRTC makes of it for `--arch`.
    Ptx,
}

#[derive(Copy, Clone, ValueEnum)]
enum BestEmit {
    /// The schedule as a trace (a valid --schedule file).
    Trace,
    /// The scheduled loop-nest IR.
    Ir,
    /// CUDA C for the scheduled program.
    Cuda,
    /// C for the host CPU.
    C,
}

#[derive(Copy, Clone, ValueEnum)]
enum DbFormat {
    /// A self-contained SQLite file.
    Sqlite,
    /// One JSON object per record (for review and diffs).
    Jsonl,
    /// JSON Lines compressed with gzip (`.jsonl.gz`, as shipped in database/).
    JsonlGz,
}

#[derive(Subcommand)]
enum DbCommand {
    /// Records per workload (named by its preset spec) and target: the best latency and
    /// the counts by status; then totals per target and status.
    Stats,
    /// Write records to a new file (never a copy of the live database).
    Export {
        /// The file to write (refused if it exists).
        #[arg(long)]
        out: PathBuf,
        /// Only this workload (a preset or a workload file).
        #[arg(long)]
        workload: Option<String>,
        /// Only records of this machine's target of this kind.
        #[arg(long, value_enum)]
        target: Option<TargetArg>,
        /// Only the best successful record per workload and target.
        #[arg(long)]
        best_only: bool,
        /// The file's form.
        #[arg(long, value_enum, default_value = "sqlite")]
        format: DbFormat,
    },
    /// Merge a file someone sent: every record is checked (replayed and verified) first;
    /// nothing is merged unless all of it is acceptable. Merged records are marked as
    /// imported from this file: their latencies are claims until `tessel db verify`.
    Import {
        /// An SQLite export, a `.jsonl` or a `.jsonl.gz` file (told apart by content).
        file: PathBuf,
        /// Read the file as this form instead of telling it from its first bytes.
        #[arg(long, value_enum)]
        format: Option<DbFormat>,
    },
    /// Re-measure imported records on this device: the top K claims of each workload are
    /// replayed, checked and timed in the measurement worker, the local measurements
    /// stored (lookups prefer them), and claims off by more than 2x flagged.
    Verify {
        /// The kind of this machine's device to measure on.
        #[arg(long, value_enum, default_value = "cpu")]
        target: TargetArg,
        /// Claims to measure per workload, fastest first.
        #[arg(long, default_value_t = 3)]
        top: usize,
        /// Only this workload (a preset or a workload file).
        #[arg(long)]
        workload: Option<String>,
    },
}

#[derive(Subcommand)]
enum ModelCommand {
    /// Print the features the cost model sees of a scheduled workload, one `name value`
    /// line per feature, in vector order.
    Features {
        /// A preset or a workload file.
        workload: String,
        /// The trace file (`.sched`) whose candidate to featurize.
        #[arg(long)]
        schedule: PathBuf,
        /// Lower for this target's backend.
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        /// The CUDA architecture whose limits (SMs, shared memory) the features use.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
    },
    /// What the stored cost model predicts for schedules of one workload: a score per
    /// schedule (higher predicted faster; a ranker's scale, comparable within the
    /// workload only), best first: how the search's filter would rank schedules you
    /// have measured or written.
    Score {
        /// A preset or a workload file.
        workload: String,
        /// The trace files (`.sched`, or a record's JSON trace) to score.
        #[arg(long, num_args = 1.., required = true)]
        schedule: Vec<PathBuf>,
        /// The record database holding the model (default: $TESSEL_DB, else the
        /// platform's data directory).
        #[arg(long)]
        db: Option<PathBuf>,
        /// The model of this target kind.
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        /// The model's arch (default: the database's only one), whose limits the
        /// features use.
        #[arg(long)]
        arch: Option<String>,
    },
    /// Train the cost model on every record of a target kind and arch (failures included)
    /// and store it in the database.
    Train {
        /// The record database (default: $TESSEL_DB, else the platform's data directory).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Train on the records of this target kind.
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        /// The arch whose records to train on (default: the database's only one).
        #[arg(long)]
        arch: Option<String>,
        /// The model kind (gbdt-rank, gbdt-rank-fail, gbdt, linear; perpetual with that
        /// feature).
        #[arg(long, default_value = "gbdt-rank")]
        kind: String,
    },
    /// Leave-one-workload-out: for each workload, train on the others and rank its
    /// records; top-1, top-5 and pairwise accuracy beside the linear and random baselines.
    Eval {
        /// The record database (default: $TESSEL_DB, else the platform's data directory).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Evaluate on the records of this target kind.
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        /// The arch whose records to use (default: the database's only one).
        #[arg(long)]
        arch: Option<String>,
        /// Model kinds, comma-separated, the first the one reported.
        #[arg(long, default_value = "gbdt-rank,gbdt,linear")]
        kinds: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Seed of the random baseline.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The workloads to evaluate on (and train on): `all`, `dev` (the first half of
        /// the workload keys, sorted; where settings are chosen) or `test` (the rest).
        #[arg(long, default_value = "all")]
        subset: String,
    },
}

#[derive(Copy, Clone, ValueEnum)]
enum TargetArg {
    /// The host CPU (C with OpenMP, built with the system compiler).
    Cpu,
    /// CUDA device 0 (NVRTC).
    Cuda,
}

#[derive(Subcommand)]
enum Command {
    /// Print a workload's IR, naive or after a schedule, or its trace.
    Show {
        /// A preset (`matmul:1024x1024x1024`, `conv2d_nchw:n=1,c=64,...`) or a workload file.
        workload: String,
        /// A trace file to apply (`.sched` text, or a record's JSON trace).
        #[arg(long)]
        schedule: Option<PathBuf>,
        /// What to print.
        #[arg(long, value_enum, default_value = "ir")]
        emit: Emit,
    },
    /// Build a scheduled workload for a target, check it against the reference on random
    /// inputs, time it; `--compare` times the library routine a user would otherwise call
    /// (cuBLAS on CUDA, ndarray's `dot` on the CPU) on the same inputs.
    Run {
        /// A preset (`matmul:1024x1024x1024`, `conv2d_nchw:n=1,c=64,...`) or a workload file.
        workload: String,
        /// A trace file to apply (`.sched` text, or a record's JSON trace); without one, the unscheduled program runs.
        #[arg(long)]
        schedule: Option<PathBuf>,
        /// Where to build and run it.
        #[arg(long, value_enum, default_value = "cpu")]
        target: TargetArg,
        /// The CUDA architecture to compile for.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// Also time the library routine (cuBLAS, ndarray) on the same inputs.
        #[arg(long)]
        compare: bool,
        /// The seed of the random inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// CPU threads of the kernel and of the ndarray peer (default: every core).
        #[arg(long)]
        threads: Option<usize>,
        /// Time with warm caches: no eviction of the buffers (CPU) or flush of the L2
        /// (CUDA) before each timed run, as library peers timed back to back from Python
        /// are (`benches/cpu_peers.py`). Without it every run starts cold.
        #[arg(long)]
        warm: bool,
    },
    /// The best recorded schedule for a workload on a target: latency, where it was
    /// measured (this exact target, or a fallback of the same arch), and the trace, IR or
    /// kernel source.
    Best {
        /// A preset (`matmul:1024x1024x1024`, `conv2d_nchw:n=1,c=64,...`) or a workload file.
        workload: String,
        /// The kind of target to look up (this machine's device of that kind).
        #[arg(long, value_enum, default_value = "cpu")]
        target: TargetArg,
        /// CUDA arch to look up when no GPU is present here (records of that arch answer,
        /// marked as a fallback).
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// The record database (default: $TESSEL_DB, else the platform's data directory).
        #[arg(long)]
        db: Option<PathBuf>,
        /// What to print on stdout (the latency and provenance go to stderr).
        #[arg(long, value_enum, default_value = "trace")]
        emit: BestEmit,
    },
    /// The record database: statistics, export to a file, import (merge) a file, verify
    /// imported records on this device.
    Db {
        #[command(subcommand)]
        command: DbCommand,
        /// The record database (default: $TESSEL_DB, else the platform's data directory).
        #[arg(long, global = true)]
        db: Option<PathBuf>,
    },
    /// Compile a scheduled workload with NVRTC to SASS and report registers, spills,
    /// shared memory and compile time per kernel (needs NVRTC, not a GPU).
    Build {
        /// A preset (`matmul:1024x1024x1024`, `conv2d_nchw:n=1,c=64,...`) or a workload file.
        workload: String,
        /// A trace file to apply (`.sched` text, or a record's JSON trace); without one, the unscheduled program.
        #[arg(long)]
        schedule: Option<PathBuf>,
        /// Must be cuda (the CPU build has no register report).
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        /// The CUDA architecture to compile for.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// Also print what NVRTC receives (`cuda`) or produces (`ptx`) on stdout; the
        /// register report then goes to stderr.
        #[arg(long, value_enum)]
        emit: Option<BuildEmit>,
        /// Also write the CUBIN NVRTC built to this file, for the CUDA toolkit's
        /// disassemblers (`cuobjdump -sass FILE`, `nvdisasm FILE`): the SASS the GPU runs.
        #[arg(long)]
        cubin: Option<PathBuf>,
    },
    /// Apply a schedule and check it against the unscheduled program with the reference
    /// interpreter on random inputs (no compiler, no device; use small shapes: it runs
    /// every loop serially).
    Check {
        /// A preset (`matmul:64x64x64`, `conv2d_nchw:n=1,c=8,...`) or a workload file.
        workload: String,
        /// The trace file (`.sched`) to apply.
        #[arg(long)]
        schedule: PathBuf,
        /// The seed of the random inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Search schedules for workloads (or a network's tasks) on a target, measuring every
    /// candidate and recording each result in the database; ends with the best schedule's
    /// trace (for a network, the table of its tasks).
    Tune(TuneArgs),
    /// What the database knows of a network's tasks or of workloads: per task the trials,
    /// best latency, GFLOP/s, ratio to the vendor library (with --peers), weighted
    /// contribution; per network the estimated latency. Prints a table, or with --out
    /// writes index.html and SVG tuning curves.
    Report(ReportArgs),
    /// The learned cost model: what it sees of a candidate, training it on the database's
    /// records, and its evaluation on workloads it never saw.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// What the search space offers for a workload, without compiling or measuring: N
    /// candidates after the postprocessors (CUDA limits of an H100 when no GPU is asked),
    /// each with its trace, threads per block, output elements per block and shared bytes.
    Sample {
        /// A preset (`matmul:1009x523x311`) or a workload file.
        workload: String,
        /// Whose design space to sample.
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        /// How many candidates to show.
        #[arg(short, long, default_value_t = 16)]
        n: usize,
        /// The sampling seed (the same seed shows the same candidates).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// A search-space file (`search_spaces/*.toml` format) instead of the target's
        /// default space.
        #[arg(long)]
        space: Option<PathBuf>,
        /// One JSON array of the candidates.
        #[arg(long)]
        json: bool,
        /// Instead, the one candidate grown from this schedule's decisions (a trace file):
        /// the sketch meeting the most of them takes them, the rest drawn from the seed.
        /// With a decision edited, one a sketch branches on, it is the schedule's
        /// neighbour on the other branch.
        #[arg(long, conflicts_with = "n")]
        like: Option<PathBuf>,
    },
}

/// The vector ISA CPU kernels are built for: the host's, or the narrower one
/// `TESSEL_CPU_ISA` names (an error where the CPU cannot run it).
fn cpu_isa() -> Result<tessel::target::cpu::VectorIsa> {
    tessel::target::cpu::VectorIsa::host().map_err(|e| anyhow::anyhow!("{e}"))
}

fn db_path(db: Option<PathBuf>) -> Result<PathBuf> {
    db.or_else(tessel::database::default_path)
        .context("no database path: pass --db or set $TESSEL_DB")
}

fn tune_target(target: TargetArg) -> Result<tessel::tune::TuneTarget> {
    Ok(match target {
        TargetArg::Cpu => {
            cpu_isa()?;
            tessel::tune::TuneTarget::cpu()
        }
        TargetArg::Cuda => tessel::tune::TuneTarget::cuda()?,
    })
}

/// The progress bar of one workload's tuning run on stderr: trials measured out of the
/// budget, elapsed time, candidates per second, best latency and TFLOP/s so far, failures
/// by kind. Hidden when
/// stderr is not a terminal (the caller then prints a line per round).
fn progress_bar(spec: &str, trials: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(trials as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    let style = indicatif::ProgressStyle::with_template(
        "{prefix} {spinner} [{elapsed_precise}] {bar:30} {pos}/{len} trials  {msg}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(format!("[{spec}]"));
    bar.set_message("building the first round");
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

fn load_workload(arg: &str) -> Result<Workload> {
    workload::from_cli(arg, |path| std::fs::read_to_string(path))
        .with_context(|| format!("workload {arg}"))
}

/// A schedule file: text, or JSON as the database stores a trace (`db export`'s `trace`).
fn read_trace(path: &std::path::Path) -> Result<tessel::schedule::Trace> {
    let src =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    if src.trim_start().starts_with('{') {
        tessel::schedule::json::from_json(&src)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    } else {
        text::parse(&src).map_err(|e| anyhow::anyhow!("{}:{e}", path.display()))
    }
}

fn load_schedule(w: &Workload, path: &std::path::Path) -> Result<Schedule> {
    let trace = read_trace(path)?;
    match replay(&trace, w.to_program(), 0) {
        Ok(sch) => Ok(sch),
        Err(first) => {
            // Traces from the database name the canonical workload's blocks (t0, t1, ...):
            // replay those on the canonical program, whose parameters come in the same order.
            // Where both fail, the replay that got further says what is wrong.
            let canonical = tessel::database::canonical_program(w)?;
            replay(&trace, canonical, 0).map_err(|second| {
                let e = if second.index > first.index {
                    second
                } else {
                    first
                };
                anyhow::anyhow!("{}: {e}", path.display())
            })
        }
    }
}

/// Lowers and prints a program for a backend.
fn generate(p: &tessel::ir::Program, backend: Backend) -> Result<tessel::codegen::Source> {
    let lowered = lower(p, backend)?;
    Ok(match backend {
        Backend::Cuda => tessel::codegen::cuda::generate(&lowered)?,
        Backend::Cpu => tessel::codegen::cpu::generate(&lowered)?,
    })
}

fn seconds(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} us", s * 1e6)
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}

fn rate(flops: f64, s: f64) -> String {
    let f = flops / s;
    if f >= 1e12 {
        format!("{:.2} TFLOP/s", f / 1e12)
    } else {
        format!("{:.1} GFLOP/s", f / 1e9)
    }
}

/// `tessel run`: measure one schedule (or the naive program) in the isolated worker.
/// How `tessel run` measures: with the library peer, the inputs' seed, warm caches.
struct RunOptions {
    compare: bool,
    seed: u64,
    warm: bool,
}

fn run_measure(
    spec: &str,
    schedule: Option<&PathBuf>,
    target: TargetArg,
    arch: &str,
    run: RunOptions,
) -> Result<()> {
    let RunOptions {
        compare,
        seed,
        warm,
    } = run;
    use tessel::measure::{session, worker::Measurer, Device};
    let w = load_workload(spec)?;
    let device = match target {
        TargetArg::Cpu => {
            cpu_isa()?;
            Device::Cpu
        }
        TargetArg::Cuda => {
            tessel::target::cuda::cuda_driver_available().map_err(|e| anyhow::anyhow!("{e}"))?;
            tessel::measure::cuda::nvrtc_available().map_err(|e| anyhow::anyhow!("{e}"))?;
            Device::Cuda {
                arch: arch.to_string(),
            }
        }
    };
    // Without a schedule the candidate is the unscheduled program, made runnable on the
    // device the simplest way (on CUDA: spatial loops spread over 256-thread blocks).
    let program = match (schedule, &device) {
        (Some(path), _) => load_schedule(&w, path)?.into_program(),
        (None, Device::Cpu) => w.to_program(),
        (None, Device::Cuda { .. }) => session::naive_cuda_program(&w.to_program())
            .map_err(|e| anyhow::anyhow!("{}", e.message))?,
    };
    // A trace printed by `tessel best` names the canonical workload (t0, t1, ...): measure
    // it against the canonical workload, whose parameters come in the same order.
    let names = |p: &tessel::ir::Program| {
        p.params
            .iter()
            .map(|b| p.buffer(*b).name.clone())
            .collect::<Vec<_>>()
    };
    let w = if names(&program) != names(&w.to_program()) {
        workload::parse(&w.canonical_text())?
    } else {
        w
    };
    let candidate =
        session::source_for(&program, &device).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let mut job = session::job(&w, vec![candidate], device.clone(), compare, seed)
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    job.timing.flush_cache = !warm;
    if compare && job.peer.is_none() {
        eprintln!(
            "note: --compare has a peer for matmul (any layout), batch_matmul and dense_bias_relu workloads only, in f32 (math=ieee or tf32) or, on CUDA, in f16/bf16 with acc=f32"
        );
    }
    let mut measurer = Measurer::for_current_exe()?;
    let (outcomes, peer) = measurer.measure(&job)?;
    let flops = w.flops();
    println!("workload  {spec}  (key {})", &w.key()[..16]);
    match &device {
        Device::Cpu => {
            let tc = tessel::measure::cpu::CpuToolchain::detect()
                .map_err(|e| anyhow::anyhow!("{}", e.message))?;
            let info =
                tessel::target::cpu::CpuInfo::query(&tc.cc).map_err(|e| anyhow::anyhow!("{e}"))?;
            println!(
                "target    cpu: {} ({}, {} threads, {})",
                info.model_name,
                info.arch(),
                info.threads,
                info.cc_version.clone().unwrap_or_else(|| tc.cc.clone())
            );
        }
        Device::Cuda { arch } => println!("target    cuda {arch}"),
    }
    let m = match outcomes.into_iter().next() {
        Some(Ok(m)) => m,
        Some(Err(f)) => bail!("{:?}: {}", f.kind, f.message),
        None => bail!("the worker returned no result"),
    };
    println!(
        "check     ok: relative error {:.2e} (tolerance {:.0e})",
        m.rel_error, job.tolerance
    );
    if let Some(r) = m.build.registers {
        println!(
            "build     {} registers, {} bytes spill stores, {} bytes spill loads, {:.0} ms compile",
            r,
            m.build.spill_stores.unwrap_or(0),
            m.build.spill_loads.unwrap_or(0),
            m.build.compile_seconds * 1e3
        );
    }
    println!(
        "latency   median {} (min {}, max {}, {} runs{})",
        seconds(m.median_seconds),
        seconds(m.min_seconds),
        seconds(m.max_seconds),
        m.runs.len(),
        if warm { ", warm caches" } else { "" }
    );
    println!("speed     {}", rate(flops, m.median_seconds));
    match (peer, measurer.peer_failure()) {
        (Some(pm), _) => {
            println!(
                "peer      {}: median {} ({}), relative error {:.2e}",
                pm.name,
                seconds(pm.median_seconds),
                rate(flops, pm.median_seconds),
                pm.rel_error
            );
            if let Some(kernel) = &pm.kernel {
                println!("peer      kernel: {kernel}");
            }
            println!(
                "ratio     tessel / {} = {:.2}x (throughput; >1 is faster)",
                pm.name,
                pm.median_seconds / m.median_seconds
            );
        }
        (None, Some(f)) => println!("peer      failed: {:?}: {}", f.kind, f.message),
        (None, None) => {}
    }
    Ok(())
}

fn open_db(path: Option<PathBuf>) -> Result<tessel::database::Database> {
    let path = path
        .or_else(tessel::database::default_path)
        .ok_or_else(|| anyhow::anyhow!("no database path: pass --db FILE or set TESSEL_DB"))?;
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
    }
    tessel::database::Database::open(&path).with_context(|| format!("database {}", path.display()))
}

/// The database key of this machine's target (for CUDA without a GPU: the arch alone).
fn target_key(target: TargetArg, arch: &str) -> Result<tessel::database::TargetKey> {
    use tessel::database::{target_key, TargetKey, TargetKind};
    match target {
        TargetArg::Cpu => Ok(target_key(
            &tessel::target::cpu_fingerprint().map_err(|e| anyhow::anyhow!("{e}"))?,
        )?),
        TargetArg::Cuda => match tessel::target::cuda_fingerprint() {
            Ok(fp) => Ok(target_key(&fp)?),
            Err(_) => Ok(TargetKey {
                kind: TargetKind::Cuda,
                arch: arch.to_string(),
                device: "(no GPU here)".into(),
                toolchain: "-".into(),
            }),
        },
    }
}

fn best(
    spec: &str,
    target: TargetArg,
    arch: &str,
    db: Option<PathBuf>,
    emit: BestEmit,
) -> Result<()> {
    let w = load_workload(spec)?;
    let db = open_db(db)?;
    let key = target_key(target, arch)?;
    let Some(k) = db.kernel(&w, &key)? else {
        bail!(
            "no successful record for {spec} on {key} (nor on another device of arch {}) in {}",
            key.arch,
            db.path().display()
        );
    };
    let r = &k.lookup.record;
    let median = r.median_secs.unwrap_or(f64::NAN);
    eprintln!(
        "best      {spec}: median {} ({}), record {} of {}",
        seconds(median),
        rate(w.flops(), median),
        r.id,
        db.path().display()
    );
    match &k.lookup.matched {
        tessel::database::Match::Exact if r.provenance.is_measured_here() => {
            eprintln!("measured  on this target: {}", r.target)
        }
        tessel::database::Match::Exact => {
            eprintln!(
                "claimed   for this target: {} (not measured here)",
                r.target
            )
        }
        tessel::database::Match::Fallback { measured_on } => {
            eprintln!(
                "measured  on {measured_on} (fallback: same arch {}, not this device)",
                key.arch
            )
        }
    }
    eprintln!("source    {}", r.provenance);
    match emit {
        BestEmit::Trace => print!("{}", text::print(&r.trace)),
        BestEmit::Ir => print!("{}", print_program(&k.program)),
        BestEmit::Cuda => print!("{}", generate(&k.program, Backend::Cuda)?.code),
        BestEmit::C => print!("{}", generate(&k.program, Backend::Cpu)?.code),
    }
    Ok(())
}

fn db_command(command: DbCommand, db: Option<PathBuf>) -> Result<()> {
    use tessel::database::{Filter, ImportMode};
    let mut db = open_db(db)?;
    match command {
        DbCommand::Stats => print_stats(&db)?,
        DbCommand::Export {
            out,
            workload,
            target,
            best_only,
            format,
        } => {
            let workload = workload
                .map(|w| load_workload(&w).map(|w| w.key()))
                .transpose()?;
            let target = target.map(|t| target_key(t, "sm_90a")).transpose()?;
            let filter = Filter {
                workload,
                target,
                best_only,
            };
            let n = match format {
                DbFormat::Sqlite => db.export(&out, &filter)?,
                DbFormat::Jsonl | DbFormat::JsonlGz => {
                    let f = std::fs::File::create_new(&out)
                        .with_context(|| format!("cannot create {}", out.display()))?;
                    let mut f = std::io::BufWriter::new(f);
                    if matches!(format, DbFormat::JsonlGz) {
                        let mut gz =
                            flate2::write::GzEncoder::new(f, flate2::Compression::default());
                        let n = db.export_jsonl(&mut gz, &filter)?;
                        gz.finish()
                            .with_context(|| format!("writing {}", out.display()))?;
                        n
                    } else {
                        db.export_jsonl(&mut f, &filter)?
                    }
                }
            };
            println!("exported {n} records to {}", out.display());
        }
        DbCommand::Import { file, format } => {
            use tessel::database::FileFormat;
            let format = format.map(|f| match f {
                DbFormat::Sqlite => FileFormat::Sqlite,
                DbFormat::Jsonl => FileFormat::Jsonl,
                DbFormat::JsonlGz => FileFormat::JsonlGz,
            });
            let report = db.import_file(&file, format, ImportMode::AllOrNothing)?;
            println!(
                "accepted {}, duplicates {}, rejected {}",
                report.accepted.len(),
                report.duplicates.len(),
                report.rejected.len()
            );
            for r in &report.rejected {
                println!("  rejected record {}: {}", r.source_id, r.reason);
            }
            if !report.merged {
                bail!(
                    "nothing was merged: {} record(s) were rejected",
                    report.rejected.len()
                );
            }
        }
        DbCommand::Verify {
            target,
            top,
            workload,
        } => run_verify(&mut db, target, top, workload.as_deref())?,
    }
    Ok(())
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Show {
            workload,
            schedule,
            emit,
        } => {
            let w = load_workload(&workload)?;
            let sch = match &schedule {
                Some(path) => load_schedule(&w, path)?,
                None => Schedule::new(w.to_program(), 0),
            };
            match emit {
                Emit::Ir => print!("{}", print_program(sch.program())),
                Emit::Trace => print!("{}", text::print(sch.trace())),
                Emit::Workload => print!("{}", w.to_text()),
                Emit::Key => print!("{}\n{}\n", w.canonical_text(), w.key()),
                Emit::Cuda => print!("{}", generate(sch.program(), Backend::Cuda)?.code),
                Emit::Ptx => print!("{}", ptx(sch.program())?),
                Emit::C => print!("{}", generate(sch.program(), Backend::Cpu)?.code),
            }
        }
        Command::Run {
            workload,
            schedule,
            target,
            arch,
            compare,
            seed,
            threads,
            warm,
        } => {
            set_cpu_threads(threads);
            let run = RunOptions {
                compare,
                seed,
                warm,
            };
            run_measure(&workload, schedule.as_ref(), target, &arch, run)?
        }
        Command::Best {
            workload,
            target,
            arch,
            db,
            emit,
        } => best(&workload, target, &arch, db, emit)?,
        Command::Db { command, db } => db_command(command, db)?,
        Command::Build {
            workload,
            schedule,
            target,
            arch,
            emit,
            cubin: cubin_path,
        } => {
            if matches!(target, TargetArg::Cpu) {
                bail!("tessel build reports NVRTC's register and spill counts: use --target cuda (tessel run --target cpu builds with the C compiler)");
            }
            tessel::measure::cuda::nvrtc_available().map_err(|e| anyhow::anyhow!("{e}"))?;
            let w = load_workload(&workload)?;
            let program = match &schedule {
                Some(path) => load_schedule(&w, path)?.into_program(),
                None => w.to_program(),
            };
            let device = tessel::measure::Device::Cuda { arch: arch.clone() };
            let src = tessel::measure::session::source_for(&program, &device)
                .map_err(|e| anyhow::anyhow!("{}", e.message))?;
            match emit {
                Some(BuildEmit::Cuda) => print!("{}", src.code),
                Some(BuildEmit::Ptx) => print!(
                    "{}",
                    tessel::measure::cuda::compile_ptx(&src.code, &arch)
                        .map_err(|f| anyhow::anyhow!("{f}"))?
                ),
                None => {}
            }
            let cubin = tessel::measure::cuda::compile(&src.code, &arch)
                .map_err(|e| anyhow::anyhow!("{:?}: {}", e.kind, e.message))?;
            let mut report = format!(
                "built {} for {arch} with NVRTC in {:.0} ms ({} bytes of SASS)\n",
                workload,
                cubin.info.compile_seconds * 1e3,
                cubin.bytes.len()
            );
            if let Some(path) = &cubin_path {
                std::fs::write(path, &cubin.bytes)
                    .with_context(|| format!("writing the CUBIN to {}", path.display()))?;
                report += &format!(
                    "cubin     {} (`cuobjdump -sass {}` prints its SASS)\n",
                    path.display(),
                    path.display()
                );
            }
            let n = |v: Option<u32>| v.map_or_else(|| "?".to_string(), |x| x.to_string());
            // ptxas reports the kernels in an order of its own: each by its name.
            for launch in &src.kernels {
                let Some(k) = cubin.kernels.iter().find(|k| k.name == launch.name) else {
                    continue;
                };
                report += &format!(
                    "kernel {}: grid {:?} block {:?}, {} registers, {} bytes spill stores, {} bytes spill loads, {} bytes stack, {} bytes shared\n",
                    k.name, launch.grid, launch.block, n(k.registers), n(k.spill_stores), n(k.spill_loads), n(k.stack_bytes), n(k.shared_bytes)
                );
            }
            match emit {
                Some(_) => eprint!("{report}"),
                None => print!("{report}"),
            }
        }
        Command::Check {
            workload,
            schedule,
            seed,
        } => {
            let w = load_workload(&workload)?;
            let sch = load_schedule(&w, &schedule)?;
            let reference = w.to_program();
            match tessel::interp::check(&reference, sch.program(), seed) {
                Ok(err) => println!(
                    "ok: relative error {err:.3e} (tolerance {:.0e})",
                    tessel::interp::TOLERANCE
                ),
                Err(e) => bail!("check failed: {e}"),
            }
        }
        Command::Tune(args) => {
            set_cpu_threads(args.threads);
            run_tune(args)?
        }
        Command::Report(args) => run_report(&args)?,
        Command::Model { command } => model_command(command)?,
        Command::Sample {
            workload,
            target,
            n,
            seed,
            space,
            json,
            like,
        } => {
            let space = space_file(space.as_deref())?;
            let like = like.as_deref().map(read_trace).transpose()?;
            run_sample(&workload, target, n, seed, space, json, like)?
        }
    }
    Ok(())
}

/// The backend a target lowers for and the device its features describe: a CUDA
/// architecture's limits, or this host's cores.
fn feature_device(target: TargetArg, arch: &str) -> (Backend, tessel::cost_model::DeviceSpec) {
    match target {
        TargetArg::Cuda => (Backend::Cuda, tessel::cost_model::DeviceSpec::cuda(arch)),
        TargetArg::Cpu => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            (
                Backend::Cpu,
                tessel::cost_model::DeviceSpec::cpu(i64::try_from(cores).unwrap_or(1)),
            )
        }
    }
}

/// `tessel model ...`: features and scores here; train and eval in `tessel::model_cmd`.
fn model_command(command: ModelCommand) -> Result<()> {
    use tessel::cost_model::ModelKind;
    use tessel::model_cmd;
    let kind_of = |t: TargetArg| match t {
        TargetArg::Cpu => tessel::database::TargetKind::Cpu,
        TargetArg::Cuda => tessel::database::TargetKind::Cuda,
    };
    let model_kind = |name: &str| {
        ModelKind::parse(name.trim()).with_context(|| {
            let known: Vec<_> = ModelKind::all().iter().map(|k| k.name()).collect();
            format!("unknown model kind {name:?} (known: {})", known.join(", "))
        })
    };
    match command {
        ModelCommand::Features {
            workload,
            schedule,
            target,
            arch,
        } => {
            let w = load_workload(&workload)?;
            let sch = load_schedule(&w, &schedule)?;
            let (backend, dev) = feature_device(target, &arch);
            let lowered = lower(sch.program(), backend)?;
            for (name, value) in tessel::cost_model::features::feature_table(&lowered, &dev) {
                println!("{name} {value}");
            }
        }
        ModelCommand::Score {
            workload,
            schedule,
            db,
            target,
            arch,
        } => {
            let w = load_workload(&workload)?;
            let db = open_db(db)?;
            let arch = model_cmd::resolve_arch(&db, kind_of(target), arch.as_deref())?;
            let (backend, dev) = feature_device(target, &arch);
            let features = schedule
                .iter()
                .map(|path| {
                    let sch = load_schedule(&w, path)?;
                    let lowered = lower(sch.program(), backend)
                        .with_context(|| format!("lowering {}", path.display()))?;
                    Ok(tessel::cost_model::features::featurize(&lowered, &dev))
                })
                .collect::<Result<Vec<_>>>()?;
            let (arch, scores) = model_cmd::score(&db, kind_of(target), Some(&arch), &features)?;
            let mut ranked: Vec<(f64, &PathBuf)> = scores.into_iter().zip(&schedule).collect();
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
            println!("model of {arch} in {}", db.path().display());
            for (score, path) in ranked {
                println!("{score:>10.4}  {}", path.display());
            }
        }
        ModelCommand::Train {
            db,
            target,
            arch,
            kind,
        } => {
            let mut db = open_db(db)?;
            let r = model_cmd::train(
                &mut db,
                kind_of(target),
                arch.as_deref(),
                model_kind(&kind)?,
            )?;
            println!(
                "trained a {} model on {} records of {} ({} skipped: no replay or lowering); \
                 featurized in {:.1} s, trained in {:.1} s; stored in {}",
                r.model_kind.name(),
                r.records,
                r.arch,
                r.skipped,
                r.featurize_secs,
                r.train_secs,
                db.path().display()
            );
        }
        ModelCommand::Eval {
            db,
            target,
            arch,
            kinds,
            json,
            seed,
            subset,
        } => {
            let mut db = open_db(db)?;
            let kinds = kinds
                .split(',')
                .map(model_kind)
                .collect::<Result<Vec<_>>>()?;
            let subset = tessel::cost_model::eval::Subset::parse(&subset)
                .with_context(|| format!("unknown subset {subset:?}: all, dev or test"))?;
            let (f, report) = model_cmd::eval(
                &mut db,
                kind_of(target),
                arch.as_deref(),
                &kinds,
                seed,
                subset,
            )?;
            if json {
                println!("{}", model_cmd::eval_json(&f, &report));
            } else {
                print!("{}", model_cmd::eval_table(&f, &report));
            }
        }
    }
    Ok(())
}

fn run_sample(
    spec: &str,
    target: TargetArg,
    n: usize,
    seed: u64,
    space: Option<tessel::search::SearchSpace>,
    json: bool,
    like: Option<tessel::schedule::Trace>,
) -> Result<()> {
    use tessel::search::{SearchSpace, TargetLimits};
    let w = load_workload(spec)?;
    let program = tessel::database::canonical_program(&w)?;
    let target_name = match target {
        TargetArg::Cuda => "cuda",
        TargetArg::Cpu => "cpu",
    };
    let (space, limits) = match target {
        TargetArg::Cuda => (
            space.unwrap_or_else(SearchSpace::cuda_default),
            TargetLimits::Cuda(tessel::target::cuda::CudaLimits::sm90_default()),
        ),
        TargetArg::Cpu => {
            let isa = cpu_isa()?;
            let space = space
                .unwrap_or_else(SearchSpace::cpu_default)
                .with_vector_unit(isa.f32_lanes(), isa.vector_registers());
            (space, TargetLimits::Cpu)
        }
    };
    let samples = match like {
        Some(trace) => tessel::search::sample_like(&space, &limits, &program, &trace, seed)
            .map(|s| vec![s])
            .with_context(|| format!("workload {spec} on {target_name}"))?,
        None => tessel::search::sample(&space, &limits, &program, n, seed)
            .with_context(|| format!("workload {spec} on {target_name}"))?,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&samples)?);
        return Ok(());
    }
    for (i, s) in samples.iter().enumerate() {
        println!(
            "# candidate {i}: {} threads per block, {} outputs per block, {} bytes shared, {} pipeline stages\n{}",
            s.threads_per_block, s.outputs_per_block, s.shared_bytes, s.pipeline_stages, s.trace
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    // The measurement worker is a hidden subcommand, outside clap: it speaks JSON lines.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == tessel::measure::worker::WORKER_SUBCOMMAND)
    {
        return ExitCode::from(u8::try_from(tessel::measure::worker::worker_main()).unwrap_or(1));
    }
    // A reader that stops early (`tessel db stats | head`) ends the output quietly, as it
    // does for other command-line tools, instead of a panic in `println!`: Rust ignores
    // SIGPIPE by default, and a write to the closed pipe then fails.
    // SAFETY: restoring a signal's default disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Named threads, so that `top -H` or a profile tells the search's parallel work
    // (`tessel-pool-N`) from a cost-model training's (`tessel-learn-N`, a pool of its own).
    let _ = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("tessel-pool-{i}"))
        .build_global();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `tessel tune`'s arguments.
#[derive(clap::Args)]
struct TuneArgs {
    /// Presets (`matmul:1024x1024x1024`, `conv2d_nchw:n=1,c=64,...`) or workload files,
    /// tuned one after the other.
    #[arg(required_unless_present = "network", conflicts_with = "network")]
    workloads: Vec<String>,
    /// A network file (benches/networks/*.toml): its tasks tuned together, each round
    /// going to the task whose improvement lowers the network's estimated latency most;
    /// `--trials` is then the network's total budget.
    #[arg(long, value_name = "FILE")]
    network: Option<PathBuf>,
    /// With --network: tune only share i of N (0-based) of the network's tasks, e.g. one
    /// index of a Slurm job array; merge the shards' databases with `tessel db import`.
    #[arg(long, value_name = "i/N")]
    shard: Option<tessel::network::Shard>,
    /// With --network on CUDA: the GPUs to measure on (`all`, or `0,1,...`; all of the same
    /// kind), one measurement worker each, each tuning a different task at a time.
    #[arg(long, value_name = "all|0,1,...")]
    devices: Option<tessel::tune::Devices>,
    /// With --network: how rounds go to tasks after the warm-up round over every task
    /// (default: gradient).
    #[arg(long, value_enum)]
    task_scheduler: Option<TaskSchedulerArg>,
    /// Where to measure.
    #[arg(long, value_enum, default_value = "cpu")]
    target: TargetArg,
    /// Candidates to measure per workload (with --network: in all).
    #[arg(long, default_value_t = 64)]
    trials: usize,
    /// Stop a workload after this many seconds.
    #[arg(long)]
    time_limit: Option<f64>,
    /// The record database (default: $TESSEL_DB, else the platform's data directory).
    /// One that has no record of the target yet starts from the record sets that ship in
    /// `database/` (imported, and the cost model trained on them, once).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Start a new database from nothing: do not import the shipped record sets (also
    /// `TESSEL_SHIPPED=off`; `TESSEL_SHIPPED=DIR` names another folder of sets).
    #[arg(long)]
    no_shipped: bool,
    /// Makes the proposals deterministic.
    #[arg(long)]
    seed: Option<u64>,
    /// Candidates measured per round (default 64; with --network the largest of 64, 32,
    /// 16 and 8 whose warm-up, a round for every task, takes at most a quarter of
    /// --trials).
    #[arg(long)]
    batch: Option<usize>,
    /// Stop after this many rounds without improvement.
    #[arg(long)]
    patience: Option<usize>,
    /// After the search, time the workload's K fastest records again, each in a fresh
    /// measurement worker of its own (again for those a slower second timing lets into the K
    /// fastest) and keep the second timing, the first staying as the record's claimed
    /// median: the fastest of hundreds of single timings is the one most likely to have
    /// been timed lucky, and the best then reported is one whose time held. Not trials.
    /// 0 does not. With --network, each task's K fastest.
    #[arg(long, value_name = "K", default_value_t = 3)]
    confirm: usize,
    /// A search-space file instead of the embedded search_spaces/<target>.toml.
    #[arg(long)]
    space: Option<PathBuf>,
    /// CPU threads of the kernels and of the ndarray peer (default: every core); part of
    /// the target's fingerprint.
    #[arg(long)]
    threads: Option<usize>,
    /// How candidates are proposed: evolutionary search over the sketches' decisions
    /// (ranked by the cost model when there is one), or independent random samples.
    #[arg(long, value_enum, default_value = "evolutionary")]
    strategy: StrategyArg,
    /// How the cost model is retrained while tuning (evolutionary search): on every
    /// record of the workloads being tuned and a sample of 4,096 of the others' (focused,
    /// a model within a round), or on every record (all: slower, every 64 new records,
    /// what tessel did before 2026-11-25; stored for later runs).
    #[arg(long, value_enum, default_value = "focused")]
    retrain: RetrainArg,
    /// Write the whole tune report as JSON to FILE: per workload the strategy, the cost
    /// model used, and per round the candidates proposed, scored and measured, failures
    /// by kind, the best latency so far and the seconds of each stage.
    #[arg(long, value_name = "FILE")]
    report_json: Option<PathBuf>,
}

#[derive(Copy, Clone, clap::ValueEnum)]
enum TaskSchedulerArg {
    /// Ansor's: to the task whose improvement lowers the estimated latency most.
    Gradient,
    /// Equal shares (the baseline).
    RoundRobin,
}

#[derive(Copy, Clone, clap::ValueEnum)]
enum StrategyArg {
    /// Evolve the sketches' decisions from measured results, ranked by the cost model.
    Evolutionary,
    /// Sample the design space afresh for every candidate.
    Random,
}

#[derive(Copy, Clone, ValueEnum)]
enum RetrainArg {
    /// The tuned workloads' records and a sample of the others'.
    Focused,
    /// Every record.
    All,
}

/// `tessel tune`: one tuning run per workload, with a progress bar (a line per round when
/// stderr is not a terminal); the JSON report is rewritten after each workload.
fn run_tune(args: TuneArgs) -> Result<()> {
    if let Some(file) = args.network.clone() {
        return tune_network(&args, &file);
    }
    if args.shard.is_some() || args.task_scheduler.is_some() || args.devices.is_some() {
        bail!("--shard, --task-scheduler and --devices need --network");
    }
    use tessel::tune::Tuner;
    let tt = tune_target(args.target)?;
    let (path, mut database) = open_tune_db(&args, &tt.key()?, "tessel")?;
    let space = space_file(args.space.as_deref())?;
    let strategy = strategy_kind(args.strategy);
    let mut json_reports = Vec::new();
    for spec in &args.workloads {
        let w = load_workload(spec)?;
        let bar = progress_bar(spec, args.trials);
        let mut tuner = Tuner::new(tt.clone())
            .with_trials(args.trials)
            .with_strategy(strategy)
            .with_db(&mut database)
            .with_notes(|note| bar.suspend(|| eprintln!("[{spec}] {note}")))
            .with_progress(|r| {
                let best = match r.best_seconds {
                    Some(s) => format!("best {} ({})", seconds(s), rate(r.flops, s)),
                    None => "best -".to_string(),
                };
                let fails: Vec<String> =
                    r.failures.iter().map(|(k, n)| format!("{k}={n}")).collect();
                let fails = if fails.is_empty() {
                    "none".to_string()
                } else {
                    fails.join(" ")
                };
                let speed = format!("{:.1} cand/s", r.candidates_per_second);
                if bar.is_hidden() {
                    // Not a terminal (a log file, CI): a line per round instead of a bar.
                    eprintln!(
                        "[{spec}] round {:>3}  trials {:>4}/{}  {speed}  {best}  failures: {fails}",
                        r.round, r.trials, r.trial_budget,
                    );
                } else {
                    bar.set_position(r.trials as u64);
                    bar.set_message(format!("{speed}  {best}  failures: {fails}"));
                }
            });
        tuner = configure_tuner(tuner, &args, strategy, space.as_ref());
        let report = tuner.tune(&w);
        bar.finish_and_clear();
        let report = report?;
        print_tune_report(spec, &w, &report);
        println!("database  {}", path.display());
        if let Some(file) = &args.report_json {
            json_reports.push(report.to_json(spec, &w.key()));
            let doc = serde_json::json!({ "workloads": json_reports });
            std::fs::write(file, serde_json::to_string_pretty(&doc)? + "\n")
                .with_context(|| format!("writing {}", file.display()))?;
        }
    }
    Ok(())
}

/// The database `tessel tune` writes to (its folder created), started from the record
/// sets that ship when it knows nothing of the target yet (`tune::shipped`; not with
/// `--no-shipped`). `who` prefixes the notes.
fn open_tune_db(
    args: &TuneArgs,
    target: &tessel::database::TargetKey,
    who: &str,
) -> Result<(PathBuf, tessel::database::Database)> {
    let path = db_path(args.db.clone())?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut database = tessel::database::Database::open(&path)?;
    tessel::tune::shipped::prepare(&mut database, target, args.no_shipped, &mut |note| {
        eprintln!("[{who}] {note}")
    })
    .map_err(|e| anyhow::anyhow!("starting {} from the shipped records: {e}", path.display()))?;
    Ok((path, database))
}

/// The settings `tessel tune` passes to a tuner, for workloads and networks alike.
fn configure_tuner<'a>(
    mut tuner: tessel::tune::Tuner<'a>,
    args: &TuneArgs,
    strategy: tessel::search::StrategyKind,
    space: Option<&tessel::search::SearchSpace>,
) -> tessel::tune::Tuner<'a> {
    use tessel::search::StrategyKind;
    if strategy == StrategyKind::Evolutionary {
        let policy = match args.retrain {
            RetrainArg::Focused => tessel::tune::ModelPolicy::default(),
            RetrainArg::All => tessel::tune::ModelPolicy::every_record(),
        };
        tuner = tuner.with_models(
            std::sync::Arc::new(tessel::tune::StoredModels::default()),
            policy,
        );
    }
    if let Some(b) = args.batch {
        tuner = tuner.with_batch(b);
    }
    if let Some(s) = args.time_limit {
        tuner = tuner.with_time_limit(std::time::Duration::from_secs_f64(s.max(0.0)));
    }
    if let Some(s) = args.seed {
        tuner = tuner.with_seed(s);
    }
    if let Some(p) = args.patience {
        tuner = tuner.with_patience(p);
    }
    if let Some(sp) = space {
        tuner = tuner.with_space(sp.clone());
    }
    tuner.with_confirm(args.confirm)
}

/// The summary of one workload's tuning run on stdout.
fn print_tune_report(spec: &str, w: &Workload, report: &tessel::tune::TuneReport) {
    println!("workload  {spec}  (key {})", &w.key()[..16]);
    println!("target    {}", report.target);
    println!(
        "strategy  {}, {}",
        report.strategy,
        match &report.model {
            Some(m) => format!(
                "cost model {} trained on {} records",
                m.kind, m.records_trained_on
            ),
            None => "no cost model".to_string(),
        }
    );
    println!(
        "stopped   {} after {} rounds, {:.1} s",
        report.stop.describe(),
        report.rounds,
        report.elapsed.as_secs_f64()
    );
    println!(
        "trials    {} measured ({} ok, {:.1}/s), {} already in the database, {} duplicates",
        report.trials,
        report.ok,
        report.candidates_per_second(),
        report.already_measured,
        report.duplicates
    );
    let st = &report.stage_seconds;
    println!(
        "time      {:.1} s opening, {:.1} s proposing (+{:.1} s while measuring), {:.1} s compiling, {}{:.1} s checking and timing ({:.1} s of it timed runs; after their {} probe runs {} given up as over {}x the best and {} long enough), {:.1} s recording, {:.1} s learning, {:.1} s closing",
        report.opening.as_secs_f64(),
        st.propose,
        report.overlapped_propose_seconds,
        st.compile,
        if st.device_wait > 0.0 {
            format!("{:.1} s waiting for the device, ", st.device_wait)
        } else {
            String::new()
        },
        st.check_time,
        report.timed_run_seconds,
        tessel::measure::PROBE_RUNS,
        report.given_up,
        tessel::tune::DEFAULT_GIVE_UP_FACTOR,
        report.long_enough,
        st.record,
        st.learn,
        report.closing.as_secs_f64()
    );
    if !report.mutators.is_empty() {
        let uses: Vec<String> = report
            .mutators
            .iter()
            .map(|m| format!("{} {}/{}", m.mutator, m.accepted, m.tried))
            .collect();
        println!("mutants   accepted/tried: {}", uses.join(", "));
    }
    let fails: Vec<String> = report
        .failure_counts()
        .iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    println!(
        "failures  {}",
        if fails.is_empty() {
            "none".to_string()
        } else {
            fails.join(" ")
        }
    );
    if !report.confirmed.is_empty() {
        let again: Vec<String> = report
            .confirmed
            .iter()
            .map(|c| match &c.again_seconds {
                Ok(s) => format!("{} -> {}", seconds(c.first_seconds), seconds(*s)),
                Err(why) => format!("{} -> failed ({why})", seconds(c.first_seconds)),
            })
            .collect();
        println!(
            "confirmed {} fastest timed again in fresh workers ({:.1} s): {}",
            report.confirmed.len(),
            report.confirming.as_secs_f64(),
            again.join(", ")
        );
    }
    match &report.best {
        Some(b) => {
            println!(
                "best      {} ({}){}",
                seconds(b.median_seconds),
                rate(report.flops, b.median_seconds),
                if b.this_run {
                    ""
                } else {
                    ", from the database"
                }
            );
            print!("{}", text::print(&b.trace));
        }
        None => println!("best      none: no candidate passed"),
    }
}

/// `tessel db stats`: per workload (named by its preset spec where there is one) and
/// target, the best latency and the records by status; then totals.
fn print_stats(db: &tessel::database::Database) -> Result<()> {
    let s = db.stats()?;
    let count = |by: &[(tessel::database::Status, u64)]| {
        by.iter()
            .map(|(st, n)| format!("{}={n}", st.name()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "{} records of {} workloads in {}",
        s.records,
        s.workloads.len(),
        db.path().display()
    );
    for w in &s.workloads {
        let parsed = workload::parse(&w.canonical_text).ok();
        let name = parsed
            .as_ref()
            .map_or_else(|| "unreadable workload".into(), workload::describe);
        println!("{name}  (key {}, {} records)", &w.key[..16], w.records);
        for t in &w.targets {
            let best = match (t.best_median_secs, &parsed) {
                (Some(b), Some(p)) => format!("best {} ({})", seconds(b), rate(p.flops(), b)),
                (Some(b), None) => format!("best {}", seconds(b)),
                (None, _) => "best -".into(),
            };
            let total: u64 = t.by_status.iter().map(|(_, n)| n).sum();
            println!(
                "  {}: {best}; {}; {} of {total} measured here",
                t.target,
                count(&t.by_status),
                t.measured_here
            );
        }
    }
    println!("targets");
    for (t, n) in &s.by_target {
        println!("  {t}: {n}");
    }
    println!("status    {}", count(&s.by_status));
    Ok(())
}

/// `tessel db verify`: re-measures the top imported claims of each workload on this
/// device, prints each claim beside the local measurement, flags those off by > 2x.
fn run_verify(
    db: &mut tessel::database::Database,
    target: TargetArg,
    top: usize,
    workload: Option<&str>,
) -> Result<()> {
    use tessel::verify::{Verifier, OFF_FACTOR};
    let only = workload
        .map(|spec| load_workload(spec).map(|w| vec![w.key()]))
        .transpose()?;
    let path = db.path().to_path_buf();
    let names: std::collections::HashMap<String, (String, f64)> = db
        .workloads()?
        .into_iter()
        .filter_map(|s| {
            let w = workload::parse(&s.canonical_text).ok()?;
            Some((s.key, (workload::describe(&w), w.flops())))
        })
        .collect();
    let report = Verifier::new(db, tune_target(target)?)
        .with_top(top)
        .verify(only.as_deref())?;
    println!("target    {}", report.target);
    let mut off = 0;
    for c in &report.checked {
        let (name, flops) = names
            .get(&c.workload_key)
            .cloned()
            .unwrap_or_else(|| (c.workload_key.clone(), f64::NAN));
        let claimed = c.claimed_secs();
        let here = match &c.measured {
            Ok(m) => format!("measured {} ({})", seconds(*m), rate(flops, *m)),
            Err(why) => format!("failed here: {why}"),
        };
        let ratio = c
            .ratio()
            .map_or_else(String::new, |r| format!(", {r:.2}x the claim"));
        let flag = if c.is_off() {
            off += 1;
            format!("  OFF by more than {OFF_FACTOR}x")
        } else if !c.same_device {
            format!("  (claimed on {})", c.claim.target.device)
        } else {
            String::new()
        };
        println!(
            "{name}  record {}: claimed {}, {here}{ratio}{flag}",
            c.claim.id,
            seconds(claimed)
        );
    }
    println!(
        "verified  {} records, {off} claims off by more than {OFF_FACTOR}x; measurements stored in {}",
        report.checked.len(),
        path.display()
    );
    Ok(())
}

/// The PTX of a program's CUDA C, compiled by NVRTC for sm_90a's virtual architecture.
fn ptx(p: &tessel::ir::Program) -> Result<String> {
    let code = generate(p, Backend::Cuda)?.code;
    tessel::measure::cuda::compile_ptx(&code, "sm_90a").map_err(|f| anyhow::anyhow!("{f}"))
}

/// `--threads N`: the OpenMP threads of CPU kernels (`OMP_NUM_THREADS`, which the worker
/// inherits and `measure::cpu::threads` reads for the peer and the fingerprint).
fn set_cpu_threads(threads: Option<usize>) {
    if let Some(n) = threads.filter(|n| *n > 0) {
        std::env::set_var("OMP_NUM_THREADS", n.to_string());
    }
}

/// The design space of `--space FILE`, or `None` for the target's default.
fn space_file(path: Option<&std::path::Path>) -> Result<Option<tessel::search::SearchSpace>> {
    let Some(p) = path else { return Ok(None) };
    let text =
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
    Ok(Some(tessel::search::SearchSpace::parse(
        &text,
        &p.display().to_string(),
    )?))
}

fn strategy_kind(arg: StrategyArg) -> tessel::search::StrategyKind {
    use tessel::search::StrategyKind;
    match arg {
        StrategyArg::Evolutionary => StrategyKind::Evolutionary,
        StrategyArg::Random => StrategyKind::Random,
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every subcommand at every depth, with its path (`tessel db import`).
    fn walk(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        // `help` is clap's own, repeating the others' descriptions.
        for sub in cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        {
            let p = format!("{path} {}", sub.get_name());
            out.push((p.clone(), sub.clone()));
            walk(sub, p, out);
        }
    }

    /// Every command, argument and value choice says what it is, and no two commands
    /// share a description (each `--help` says its own thing).
    #[test]
    fn every_command_and_argument_has_help() {
        let mut cli = Cli::command();
        cli.build();
        let mut commands = Vec::new();
        walk(&cli, "tessel".into(), &mut commands);
        let mut missing = Vec::new();
        let mut abouts: Vec<(String, String)> = Vec::new();
        for (path, cmd) in &commands {
            match cmd.get_about() {
                None => missing.push(path.clone()),
                Some(about) => abouts.push((path.clone(), about.to_string())),
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} <{id}>"));
                }
                for value in arg.get_possible_values() {
                    if value.get_help().is_none() && !value.is_hide_set() {
                        missing.push(format!("{path} <{id}> {}", value.get_name()));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "without help: {missing:#?}");
        for (i, (p, a)) in abouts.iter().enumerate() {
            for (q, b) in &abouts[i + 1..] {
                assert_ne!(a, b, "{p} and {q} have the same description");
            }
        }
        assert!(commands.iter().any(|(p, _)| p == "tessel check"));
    }
}

/// Reads and parses a network file.
fn load_network(path: &std::path::Path) -> Result<tessel::network::Network> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(tessel::network::Network::parse(
        &text,
        &path.display().to_string(),
    )?)
}

/// `tessel tune --network FILE [--shard i/N]`: the network's tasks (or this shard's)
/// tuned by the task scheduler, a line per round, then the table of the tasks.
fn tune_network(args: &TuneArgs, file: &std::path::Path) -> Result<()> {
    use tessel::tune::Tuner;
    let network = load_network(file)?;
    let tasks: Vec<tessel::network::Task> = match args.shard {
        Some(s) => tessel::network::shard(&network.tasks, s)
            .into_iter()
            .map(|i| network.tasks[i].clone())
            .collect(),
        None => network.tasks.clone(),
    };
    let name = match args.shard {
        Some(s) => format!("{} shard {}/{}", network.name, s.index, s.count),
        None => network.name.clone(),
    };
    let tt = tune_target(args.target)?;
    let key = tt.key()?;
    let (path, mut database) = open_tune_db(args, &key, &name)?;
    let space = space_file(args.space.as_deref())?;
    let strategy = strategy_kind(args.strategy);
    let batch = args
        .batch
        .unwrap_or_else(|| tessel::network::default_batch(args.trials, tasks.len()));
    eprintln!(
        "[{name}] {} tasks, {} trials in all in rounds of {batch}, on {key}",
        tasks.len(),
        args.trials
    );
    let report = {
        let tuner = Tuner::new(tt.clone())
            .with_trials(args.trials)
            .with_strategy(strategy)
            .with_db(&mut database)
            .with_notes(|note| eprintln!("[{name}] {note}"));
        let mut tuner = configure_tuner(tuner, args, strategy, space.as_ref())
            .with_batch(batch)
            .with_task_policy(match args.task_scheduler {
                Some(TaskSchedulerArg::Gradient) | None => tessel::network::Policy::Gradient,
                Some(TaskSchedulerArg::RoundRobin) => tessel::network::Policy::RoundRobin,
            });
        let count = tasks.len();
        if let Some(devices) = &args.devices {
            tuner = tuner.with_workers(device_workers(devices, &tt)?);
        }
        tuner.tune_network(&tasks, |r, task| {
            let best = r.task_best_seconds.map_or("-".into(), seconds);
            let est = r.estimated_seconds.map_or("-".into(), seconds);
            eprintln!(
                "[{name}] round {:>3}  task {:>2}/{count} {:<9} trials {:>5}/{}  task best {best}  \
                 estimated {est}  {}",
                r.round,
                r.task + 1,
                r.reason,
                r.total_trials,
                args.trials,
                task.label(),
            );
        })?
    };
    println!(
        "stopped   {} after {} trials in {:.1} s ({:.1} s of them opening the tasks)",
        report.stop.describe(),
        report.trials(),
        report.elapsed.as_secs_f64(),
        report.opened.as_secs_f64()
    );
    let per_task: Vec<String> = report
        .tasks
        .iter()
        .map(|t| t.report.trials.to_string())
        .collect();
    println!("trials    per task this run: {}", per_task.join(" "));
    let confirmed: Vec<&tessel::tune::Confirmed> = report
        .tasks
        .iter()
        .flat_map(|t| &t.report.confirmed)
        .collect();
    if !confirmed.is_empty() {
        let slower = confirmed
            .iter()
            .filter(|c| c.ratio().is_none_or(|r| r > 1.05))
            .count();
        let secs: f64 = report
            .tasks
            .iter()
            .map(|t| t.report.confirming.as_secs_f64())
            .sum();
        println!(
            "confirmed {} fastest records timed again in fresh workers ({secs:.1} s): {slower} more than 5% slower or failed",
            confirmed.len()
        );
    }
    let specs: Vec<tessel::report::TaskSpec> = tasks
        .iter()
        .map(|t| tessel::report::TaskSpec {
            label: t.label(),
            workload: &t.workload,
            weight: t.weight,
        })
        .collect();
    let summary = tessel::report::collect(
        &database,
        &name,
        true,
        &specs,
        &key,
        &std::collections::HashMap::new(),
    )?;
    print!("{}", tessel::report::table::render(&summary));
    println!("database  {}", path.display());
    if let Some(out) = &args.report_json {
        let doc = report.to_json(&name);
        std::fs::write(out, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// `tessel report`'s arguments.
#[derive(clap::Args)]
struct ReportArgs {
    /// Workloads to report on, one task each (weight 1). Without workloads or a network:
    /// every workload the database holds records of for the target.
    #[arg(conflicts_with = "network")]
    workloads: Vec<String>,
    /// A network file: its tasks with their weights, and the estimated total.
    #[arg(long, value_name = "FILE")]
    network: Option<PathBuf>,
    /// The record database (default: $TESSEL_DB, else the platform's data directory).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Records of which kind of target (this machine's arch, or --arch for CUDA without a
    /// GPU here).
    #[arg(long, value_enum, default_value = "cpu")]
    target: TargetArg,
    /// The CUDA arch to report on when no GPU is present here.
    #[arg(long, default_value = "sm_90a")]
    arch: String,
    /// The vendor libraries' latencies: a JSON object from workload (as the network file
    /// or the command line gives it) to seconds, e.g. written by benches/network_run.sh.
    #[arg(long, value_name = "FILE")]
    peers: Option<PathBuf>,
    /// Write index.html and the SVG curves into DIR instead of printing the table.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Every workload stored in `db` (whose text parses), labelled as `tessel db stats` names
/// it, weight 1 each.
fn stored_tasks(db: &tessel::database::Database) -> Result<Vec<(String, Workload, u32)>> {
    Ok(db
        .workloads()?
        .into_iter()
        .filter_map(|w| workload::parse(&w.canonical_text).ok())
        .map(|w| (workload::describe(&w), w, 1))
        .collect())
}

/// `tessel report`: the table on stdout, or the HTML page and SVG curves under --out.
fn run_report(args: &ReportArgs) -> Result<()> {
    use tessel::report::{html, plot, table, TaskSpec};
    let db = tessel::database::Database::open(db_path(args.db.clone())?)?;
    let key = target_key(args.target, &args.arch)?;
    let (title, network, tasks): (String, bool, Vec<(String, Workload, u32)>) = match &args.network
    {
        Some(file) => {
            let n = load_network(file)?;
            let tasks = n
                .tasks
                .iter()
                .map(|t| (t.label(), t.workload.clone(), t.weight))
                .collect();
            (n.name, true, tasks)
        }
        None if args.workloads.is_empty() => ("workloads".to_string(), false, stored_tasks(&db)?),
        None => {
            let mut tasks = Vec::new();
            for spec in &args.workloads {
                tasks.push((spec.clone(), load_workload(spec)?, 1));
            }
            ("workloads".to_string(), false, tasks)
        }
    };
    let mut peers = std::collections::HashMap::new();
    if let Some(file) = &args.peers {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let map: std::collections::BTreeMap<String, f64> = serde_json::from_str(&text)
            .with_context(|| {
                format!(
                    "{}: not a JSON object of workload -> seconds",
                    file.display()
                )
            })?;
        for (spec, secs) in map {
            let w = tessel::network::task_workload(&spec)
                .with_context(|| format!("{}: workload {spec}", file.display()))?;
            peers.insert(w.key(), secs);
        }
    }
    let specs: Vec<TaskSpec> = tasks
        .iter()
        .map(|(label, w, weight)| TaskSpec {
            label: label.clone(),
            workload: w,
            weight: *weight,
        })
        .collect();
    let mut summary = tessel::report::collect(&db, &title, network, &specs, &key, &peers)?;
    if args.network.is_none() && args.workloads.is_empty() {
        // The database's whole list: those with records of this target only.
        summary.rows.retain(|r| r.trials > 0);
        if summary.rows.is_empty() {
            bail!(
                "{} holds no records of {} (name workloads or --network to list them anyway)",
                db.path().display(),
                summary.target
            );
        }
    }
    let Some(dir) = &args.out else {
        print!("{}", table::render(&summary));
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    let mut task_plots = Vec::new();
    for (i, row) in summary.rows.iter().enumerate() {
        let svg = plot::task_curve(&row.label, &row.curve)?;
        if let Some(svg) = &svg {
            write(&html::task_plot_name(i), svg)?;
        }
        task_plots.push(svg.is_some());
    }
    let network_plot = match network {
        true => plot::network_curve(&summary.title, &summary.network_curve())?,
        false => None,
    };
    if let Some(svg) = &network_plot {
        write(html::NETWORK_PLOT, svg)?;
    }
    write(
        "index.html",
        &html::render(&summary, &task_plots, network_plot.is_some()),
    )?;
    print!("{}", table::render(&summary));
    println!("report    {}", dir.join("index.html").display());
    Ok(())
}

/// One measurement worker per device of `--devices`, each seeing only its GPU (as
/// device 0) through `CUDA_VISIBLE_DEVICES`, mapped through this process's own
/// `CUDA_VISIBLE_DEVICES` when that is set.
fn device_workers(
    devices: &tessel::tune::Devices,
    target: &tessel::tune::TuneTarget,
) -> Result<Vec<tessel::measure::worker::Measurer>> {
    let visible: Option<Vec<String>> = std::env::var("CUDA_VISIBLE_DEVICES")
        .ok()
        .map(|v| v.split(',').map(|d| d.trim().to_string()).collect());
    let mut workers = Vec::new();
    for d in devices.ordinals(target)? {
        let name = match &visible {
            Some(v) => v
                .get(d)
                .cloned()
                .with_context(|| format!("device {d} is not in CUDA_VISIBLE_DEVICES"))?,
            None => d.to_string(),
        };
        workers.push(
            tessel::measure::worker::Measurer::for_current_exe()?
                .with_timeout(std::time::Duration::from_secs(60))
                .with_env("CUDA_VISIBLE_DEVICES", name),
        );
    }
    eprintln!("measuring on {} devices", workers.len());
    Ok(workers)
}
