//! The `tessel` command line: parses arguments, reads files, calls the library, prints.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use tessel::ir::printer::print_program;
use tessel::lower::{lower, Backend};
use tessel::schedule::{replay, text, Schedule};
use tessel::workload::{self, Workload};

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
    /// C for the host CPU.
    C,
}

#[derive(Copy, Clone, ValueEnum)]
enum BestEmit {
    Trace,
    Ir,
    Cuda,
    C,
}

#[derive(Copy, Clone, ValueEnum)]
enum DbFormat {
    /// A self-contained SQLite file.
    Sqlite,
    /// One JSON object per record (for review and diffs).
    Jsonl,
}

#[derive(Subcommand)]
enum DbCommand {
    /// Counts by workload, target and status.
    Stats,
    /// Write records to a new file (never a copy of the live database).
    Export {
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        workload: Option<String>,
        #[arg(long, value_enum)]
        target: Option<TargetArg>,
        /// Only the best successful record per workload and target.
        #[arg(long)]
        best_only: bool,
        #[arg(long, value_enum, default_value = "sqlite")]
        format: DbFormat,
    },
    /// Merge a file someone sent: every record is checked (replayed and verified) first;
    /// nothing is merged unless all of it is acceptable.
    Import {
        file: PathBuf,
        #[arg(long, value_enum, default_value = "sqlite")]
        format: DbFormat,
    },
}

#[derive(Subcommand)]
enum ModelCommand {
    /// Print the features the cost model sees of a scheduled workload, one `name value`
    /// line per feature, in vector order.
    Features {
        workload: String,
        #[arg(long)]
        schedule: PathBuf,
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        /// The CUDA architecture whose limits (SMs, shared memory) the features use.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
    },
    /// Train the cost model on every record of a target kind and arch (failures included)
    /// and store it in the database.
    Train {
        #[arg(long)]
        db: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        /// The arch whose records to train on (default: the database's only one).
        #[arg(long)]
        arch: Option<String>,
        /// The model kind (gbdt, gbdt-rank, linear; perpetual with that feature).
        #[arg(long, default_value = "gbdt")]
        kind: String,
    },
    /// Leave-one-workload-out: for each workload, train on the others and rank its
    /// records; top-1, top-5 and pairwise accuracy beside the linear and random baselines.
    Eval {
        #[arg(long)]
        db: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        #[arg(long)]
        arch: Option<String>,
        /// Model kinds, comma-separated, the first the one reported (default: gbdt,linear).
        #[arg(long, default_value = "gbdt,linear")]
        kinds: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Seed of the random baseline.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

#[derive(Copy, Clone, ValueEnum)]
enum TargetArg {
    Cpu,
    Cuda,
}

#[derive(Subcommand)]
enum Command {
    /// Print a workload's IR, naive or after a schedule, or its trace.
    Show {
        /// A preset (`matmul:1024x1024x1024`, `conv2d_nchw:n=1,c=64,...`) or a workload file.
        workload: String,
        /// A trace file (`.sched`) to apply.
        #[arg(long)]
        schedule: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "ir")]
        emit: Emit,
    },
    /// Apply a schedule and check it against the unscheduled program with the reference
    /// interpreter on random inputs (use small shapes: it runs every loop serially).
    /// Build a scheduled workload for a target, check it against the reference on random
    /// inputs, time it; `--compare` times the library routine a user would otherwise call
    /// (cuBLAS on CUDA, ndarray's `dot` on the CPU) on the same inputs.
    Run {
        workload: String,
        #[arg(long)]
        schedule: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "cpu")]
        target: TargetArg,
        /// The CUDA architecture to compile for.
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        #[arg(long)]
        compare: bool,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// The best recorded schedule for a workload on a target: latency, where it was
    /// measured (this exact target, or a fallback of the same arch), and the trace, IR or
    /// kernel source.
    Best {
        workload: String,
        #[arg(long, value_enum, default_value = "cpu")]
        target: TargetArg,
        /// CUDA arch to look up when no GPU is present here (records of that arch answer,
        /// marked as a fallback).
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        #[arg(long)]
        db: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "trace")]
        emit: BestEmit,
    },
    /// Share records: statistics, export to a file, import (merge) a file.
    Db {
        #[command(subcommand)]
        command: DbCommand,
        #[arg(long, global = true)]
        db: Option<PathBuf>,
    },
    /// Compile a scheduled workload with NVRTC to SASS and report registers, spills,
    /// shared memory and compile time per kernel (needs NVRTC, not a GPU).
    Build {
        workload: String,
        #[arg(long)]
        schedule: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        #[arg(long, default_value = "sm_90a")]
        arch: String,
    },
    Check {
        workload: String,
        #[arg(long)]
        schedule: PathBuf,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Search schedules for workloads on a target, measuring every candidate and
    /// recording each result in the database; ends with the best schedule's trace.
    Tune(TuneArgs),
    /// The learned cost model: the features it sees of a candidate.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// What the search space offers for a workload, without compiling or measuring: N
    /// candidates after the postprocessors (CUDA limits of an H100 when no GPU is asked),
    /// each with its trace, threads per block, output elements per block and shared bytes.
    Sample {
        workload: String,
        #[arg(long, value_enum, default_value = "cuda")]
        target: TargetArg,
        #[arg(short, long, default_value_t = 16)]
        n: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// One JSON array of the candidates.
        #[arg(long)]
        json: bool,
    },
}

fn db_path(db: Option<PathBuf>) -> Result<PathBuf> {
    db.or_else(tessel::database::default_path)
        .context("no database path: pass --db or set $TESSEL_DB")
}

fn tune_target(target: TargetArg) -> Result<tessel::tune::TuneTarget> {
    Ok(match target {
        TargetArg::Cpu => tessel::tune::TuneTarget::cpu(),
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

fn load_schedule(w: &Workload, path: &PathBuf) -> Result<Schedule> {
    let src =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let trace = text::parse(&src).map_err(|e| anyhow::anyhow!("{}:{e}", path.display()))?;
    match replay(&trace, w.to_program(), 0) {
        Ok(sch) => Ok(sch),
        Err(first) => {
            // Traces from the database name the canonical workload's blocks (t0, t1, ...):
            // replay those on the canonical program, whose parameters come in the same order.
            let canonical = tessel::database::canonical_program(w)?;
            replay(&trace, canonical, 0).map_err(|_| anyhow::anyhow!("{}: {first}", path.display()))
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
fn run_measure(
    spec: &str,
    schedule: Option<&PathBuf>,
    target: TargetArg,
    arch: &str,
    compare: bool,
    seed: u64,
) -> Result<()> {
    use tessel::measure::{session, worker::Measurer, Device};
    let w = load_workload(spec)?;
    let device = match target {
        TargetArg::Cpu => Device::Cpu,
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
    let job = session::job(&w, vec![candidate], device.clone(), compare, seed)
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    if compare && job.peer.is_none() {
        eprintln!(
            "note: --compare has a peer for matmul (any layout), batch_matmul and dense_bias_relu workloads only"
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
            let info = tessel::target::cpu::CpuInfo::query(&tc.cc);
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
        "latency   median {} (min {}, max {}, {} runs)",
        seconds(m.median_seconds),
        seconds(m.min_seconds),
        seconds(m.max_seconds),
        m.runs.len()
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
        tessel::database::Match::Exact => eprintln!("measured  on this target: {}", r.target),
        tessel::database::Match::Fallback { measured_on } => {
            eprintln!(
                "measured  on {measured_on} (fallback: same arch {}, not this device)",
                key.arch
            )
        }
    }
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
        DbCommand::Stats => {
            let s = db.stats()?;
            println!("{} records in {}", s.records, db.path().display());
            for (w, n) in &s.by_workload {
                println!("  workload {}: {n}", &w[..w.len().min(16)]);
            }
            for (t, n) in &s.by_target {
                println!("  target {t}: {n}");
            }
            for (st, n) in &s.by_status {
                println!("  status {}: {n}", st.name());
            }
        }
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
                DbFormat::Jsonl => {
                    let mut f = std::io::BufWriter::new(
                        std::fs::File::create(&out)
                            .with_context(|| format!("cannot create {}", out.display()))?,
                    );
                    db.export_jsonl(&mut f, &filter)?
                }
            };
            println!("exported {n} records to {}", out.display());
        }
        DbCommand::Import { file, format } => {
            let report = match format {
                DbFormat::Sqlite => db.import(&file, ImportMode::AllOrNothing)?,
                DbFormat::Jsonl => {
                    let f = std::fs::File::open(&file)
                        .with_context(|| format!("cannot read {}", file.display()))?;
                    db.import_jsonl(std::io::BufReader::new(f), ImportMode::AllOrNothing)?
                }
            };
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
        } => run_measure(&workload, schedule.as_ref(), target, &arch, compare, seed)?,
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
            let cubin = tessel::measure::cuda::compile(&src.code, &arch)
                .map_err(|e| anyhow::anyhow!("{:?}: {}", e.kind, e.message))?;
            println!(
                "built {} for {arch} with NVRTC in {:.0} ms ({} bytes of SASS)",
                workload,
                cubin.info.compile_seconds * 1e3,
                cubin.bytes.len()
            );
            let n = |v: Option<u32>| v.map_or_else(|| "?".to_string(), |x| x.to_string());
            for (k, launch) in cubin.kernels.iter().zip(&src.kernels) {
                println!(
                    "kernel {}: grid {:?} block {:?}, {} registers, {} bytes spill stores, {} bytes spill loads, {} bytes stack, {} bytes shared",
                    k.name, launch.grid, launch.block, n(k.registers), n(k.spill_stores), n(k.spill_loads), n(k.stack_bytes), n(k.shared_bytes)
                );
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
        Command::Tune(args) => run_tune(args)?,
        Command::Model { command } => model_command(command)?,
        Command::Sample {
            workload,
            target,
            n,
            seed,
            json,
        } => run_sample(&workload, target, n, seed, json)?,
    }
    Ok(())
}

/// `tessel model ...`: features here; train and eval in `tessel::model_cmd`.
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
            let (backend, dev) = match target {
                TargetArg::Cuda => (Backend::Cuda, tessel::cost_model::DeviceSpec::cuda(&arch)),
                TargetArg::Cpu => {
                    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                    (
                        Backend::Cpu,
                        tessel::cost_model::DeviceSpec::cpu(i64::try_from(cores).unwrap_or(1)),
                    )
                }
            };
            let lowered = lower(sch.program(), backend)?;
            for (name, value) in tessel::cost_model::features::feature_table(&lowered, &dev) {
                println!("{name} {value}");
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
        } => {
            let mut db = open_db(db)?;
            let kinds = kinds
                .split(',')
                .map(model_kind)
                .collect::<Result<Vec<_>>>()?;
            let (f, report) =
                model_cmd::eval(&mut db, kind_of(target), arch.as_deref(), &kinds, seed)?;
            if json {
                println!("{}", model_cmd::eval_json(&f, &report));
            } else {
                print!("{}", model_cmd::eval_table(&f, &report));
            }
        }
    }
    Ok(())
}

fn run_sample(spec: &str, target: TargetArg, n: usize, seed: u64, json: bool) -> Result<()> {
    use tessel::search::{SearchSpace, TargetLimits};
    let w = load_workload(spec)?;
    let program = tessel::database::canonical_program(&w)?;
    let (space, limits) = match target {
        TargetArg::Cuda => (
            SearchSpace::cuda_default(),
            TargetLimits::Cuda(tessel::target::cuda::CudaLimits::sm90_default()),
        ),
        TargetArg::Cpu => (SearchSpace::cpu_default(), TargetLimits::Cpu),
    };
    let samples = tessel::search::sample(&space, &limits, &program, n, seed);
    if json {
        println!("{}", serde_json::to_string_pretty(&samples)?);
        return Ok(());
    }
    for (i, s) in samples.iter().enumerate() {
        println!(
            "# candidate {i}: {} threads per block, {} outputs per block, {} bytes shared\n{}",
            s.threads_per_block, s.outputs_per_block, s.shared_bytes, s.trace
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
    #[arg(required = true)]
    workloads: Vec<String>,
    #[arg(long, value_enum, default_value = "cpu")]
    target: TargetArg,
    /// Candidates to measure per workload.
    #[arg(long, default_value_t = 64)]
    trials: usize,
    /// Stop a workload after this many seconds.
    #[arg(long)]
    time_limit: Option<f64>,
    /// The record database (default: $TESSEL_DB, else the platform's data directory).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Makes the proposals deterministic.
    #[arg(long)]
    seed: Option<u64>,
    /// Candidates measured per round (default 64).
    #[arg(long)]
    batch: Option<usize>,
    /// Stop after this many rounds without improvement.
    #[arg(long)]
    patience: Option<usize>,
    /// A search-space file instead of the embedded search_spaces/<target>.toml.
    #[arg(long)]
    space: Option<PathBuf>,
    /// How candidates are proposed: evolutionary search over the sketches' decisions
    /// (ranked by the cost model when there is one), or independent random samples.
    #[arg(long, value_enum, default_value = "evolutionary")]
    strategy: StrategyArg,
    /// Write the whole tune report as JSON to FILE: per workload the strategy, the cost
    /// model used, and per round the candidates proposed, scored and measured, failures
    /// by kind, the best latency so far and the seconds of each stage.
    #[arg(long, value_name = "FILE")]
    report_json: Option<PathBuf>,
}

#[derive(Copy, Clone, clap::ValueEnum)]
enum StrategyArg {
    Evolutionary,
    Random,
}

/// `tessel tune`: one tuning run per workload, with a progress bar (a line per round when
/// stderr is not a terminal); the JSON report is rewritten after each workload.
fn run_tune(args: TuneArgs) -> Result<()> {
    use tessel::search::{SearchSpace, StrategyKind};
    use tessel::tune::Tuner;
    let path = db_path(args.db.clone())?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut database = tessel::database::Database::open(&path)?;
    let tt = tune_target(args.target)?;
    let space = match &args.space {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            Some(SearchSpace::parse(&text, &p.display().to_string())?)
        }
        None => None,
    };
    let strategy = match args.strategy {
        StrategyArg::Evolutionary => StrategyKind::Evolutionary,
        StrategyArg::Random => StrategyKind::Random,
    };
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
        if strategy == StrategyKind::Evolutionary {
            tuner = tuner.with_models(
                std::sync::Arc::new(tessel::tune::StoredModels::default()),
                tessel::tune::ModelPolicy::default(),
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
        if let Some(sp) = &space {
            tuner = tuner.with_space(sp.clone());
        }
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
        "time      {:.1} s proposing (+{:.1} s while measuring), {:.1} s compiling, {:.1} s checking and timing, {:.1} s recording, {:.1} s learning",
        st.propose, report.overlapped_propose_seconds, st.compile, st.check_time, st.record, st.learn
    );
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
