//! The ways a schedule's operand copies (kernels of their own: an FFMA GEMM's operands
//! stored reduction first, a conv's data stored channels last) could run, as traces: for
//! each staging choice of a trace (the coin just before a `*_global` copy's block, direct
//! or through shared memory), each way and each tile that way offers, grown from the
//! trace with its other decisions kept. For probes that time a tuned best's copies every
//! way (`benches/probe/copy_kernels/`).
//!
//! ```text
//! cargo run --release --example staging_variants -- WORKLOAD SCHED OUTDIR [vN=D ...]
//! ```
//!
//! Each `vN=D` first sets the categorical decision that defines `vN` to candidate index
//! `D` and grows the trace again from there (a sketch choice such as
//! `unaligned_pad_kernels`' coin), in the order given. Writes `OUTDIR/<block>_<way>_<tile>.sched` (way `direct` or `tiled`, tile the run of
//! channels or the channel count) and prints one line per file.

use anyhow::{bail, Context, Result};
use tessel::schedule::{text, Decision, InstKind, Operand, Trace};
use tessel::search::mutator::replay_mutant;
use tessel::search::sketch::regrow;
use tessel::search::{SearchSpace, SketchKind};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workload, sched, out, sets @ ..] = &args[..] else {
        bail!("usage: staging_variants WORKLOAD SCHED OUTDIR [vN=D ...]");
    };
    // Traces from the database name the canonical workload's blocks (t0, t1, ...).
    let w = tessel::workload::preset(workload).with_context(|| format!("workload {workload}"))?;
    let program = tessel::database::canonical_program(&w)?;
    let mut trace = text::parse(&std::fs::read_to_string(sched).context("reading the schedule")?)?;
    std::fs::create_dir_all(out)?;
    // Every way the sketch has, padding kernels that store their operand transposed
    // included (off in the shipped space).
    let space = SearchSpace {
        transpose_padding_kernels: true,
        ..SearchSpace::cuda_default()
    };
    let kinds = [SketchKind::Plain, SketchKind::SplitK];
    for set in sets {
        let (rv, d) = set.split_once('=').context("vN=D")?;
        let inst = defining(&trace, rv).with_context(|| format!("no instruction defines {rv}"))?;
        let mutant = trace.with_decision(inst, Decision::Categorical(d.parse()?));
        trace = regrow(&space, &program, &kinds, &mutant, inst, 0)
            .with_context(|| format!("no sketch grows {set}"))?
            .trace()
            .clone();
    }
    for (coin, block) in staging_coins(&trace) {
        for (way, name) in [(0, "direct"), (1, "tiled")] {
            let mutant = trace.with_decision(coin, Decision::Categorical(way));
            // Grown afresh even where the way is the trace's: the sketch's tiles as it
            // makes them now, not as they were when the trace was recorded.
            let grown =
                regrow(&space, &program, &kinds, &mutant, coin, 0).map(|s| s.trace().clone());
            let Some(grown) = grown else {
                println!("{block} {name}: no sketch grows it");
                continue;
            };
            // The way's tile: the first categorical after the coin.
            let Some(tile) = (coin + 1..grown.insts.len())
                .find(|&i| grown.insts[i].kind == InstKind::SampleCategorical)
            else {
                continue;
            };
            let Some(Operand::List(candidates)) = grown.insts[tile].attr("candidates") else {
                continue;
            };
            for (c, value) in candidates.iter().enumerate() {
                let Operand::Int(value) = value else { continue };
                let t = grown.with_decision(tile, Decision::Categorical(c));
                match replay_mutant(&t, &program, 0) {
                    Ok(sch) => {
                        let file = format!("{out}/{block}_{name}_{value}.sched");
                        std::fs::write(&file, text::print(sch.trace()))?;
                        println!("{file}");
                    }
                    Err(e) => println!("{block} {name} {value}: {e}"),
                }
            }
        }
    }
    Ok(())
}

/// The instruction whose output is the rv printed as `name`.
fn defining(trace: &Trace, name: &str) -> Option<usize> {
    let rv = trace.rvs.iter().position(|r| r.name == name)? as u32;
    trace.insts.iter().position(|i| i.outputs.contains(&rv))
}

/// The staging coins of `trace`: a two-way `sample_categorical` followed by the
/// `get_block` of a copy into global memory (`*_global`) or of a padding kernel
/// (`*_pad`) and not by a layout change, with that block's name.
fn staging_coins(trace: &Trace) -> Vec<(usize, String)> {
    trace
        .insts
        .windows(3)
        .enumerate()
        .filter_map(|(i, pair)| {
            // The coin of `transpose_kernels` is followed by the layout change itself.
            if pair[2].kind == InstKind::TransformLayout {
                return None;
            }
            let two = matches!(pair[0].attr("candidates"), Some(Operand::List(c)) if c.len() == 2);
            let name = match (pair[1].kind, pair[1].attr("name")) {
                (InstKind::GetBlock, Some(Operand::Str(n)))
                    if n.ends_with("_global") || n.ends_with("_pad") =>
                {
                    n
                }
                _ => return None,
            };
            (pair[0].kind == InstKind::SampleCategorical && two).then(|| (i, name.clone()))
        })
        .collect()
}
