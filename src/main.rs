//! The `tessel` command line: parses arguments, reads files, calls the library, prints.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use tessel::ir::printer::print_program;
use tessel::schedule::{replay, text, Schedule};
use tessel::workload::{self, Workload};

#[derive(Parser)]
#[command(name = "tessel", version, about = "An auto-scheduler for tensor programs")]
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
    Check {
        workload: String,
        #[arg(long)]
        schedule: PathBuf,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

fn load_workload(arg: &str) -> Result<Workload> {
    workload::from_cli(arg, |path| std::fs::read_to_string(path)).with_context(|| format!("workload {arg}"))
}

fn load_schedule(w: &Workload, path: &PathBuf) -> Result<Schedule> {
    let src = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let trace = text::parse(&src).map_err(|e| anyhow::anyhow!("{}:{e}", path.display()))?;
    replay(&trace, w.to_program(), 0).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Show { workload, schedule, emit } => {
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
            }
        }
        Command::Check { workload, schedule, seed } => {
            let w = load_workload(&workload)?;
            let sch = load_schedule(&w, &schedule)?;
            let reference = w.to_program();
            match tessel::interp::check(&reference, sch.program(), seed) {
                Ok(err) => println!("ok: relative error {err:.3e} (tolerance {:.0e})", tessel::interp::TOLERANCE),
                Err(e) => bail!("check failed: {e}"),
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
