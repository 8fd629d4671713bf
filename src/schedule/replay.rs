//! Replaying a trace on a program: one function that turns instructions back into
//! primitive calls.
//!
//! Replay keeps the trace's rv names and uses its decisions (sampling afresh where an
//! instruction has none), so replaying a trace on the workload it came from prints the
//! same IR, and replaying it with changed decisions gives another candidate of the same
//! design space, or a typed error.
//!
//! [`replay_fitted`] replays a trace of another workload (another shape of the same
//! computation): a tile decision that does not fit a loop of this program is replaced by
//! the nearest one that does ([`sampling::fit_tile`]), so the inner tiles of a good
//! schedule carry over to shapes whose extents differ.
//!
//! A block placed at a loop `sample_compute_location` chose sits under more or fewer
//! loops when the decision changes (a mutated location): `get_loops` of that block
//! matches the trace's outputs to the loops it finds innermost first, the block's own
//! loops being innermost.

use super::error::ScheduleError;
use super::inst::{Decision, InstKind, Instruction, Operand, Trace};
use super::sampling;
use super::state::{AnnArg, BlockRv, ExprRv, IntArg, LoopRv, Schedule, Target};
use crate::ir::Program;
use std::collections::HashSet;
use thiserror::Error;

/// A trace that does not replay: which instruction, and why.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("instruction {index} ({name}): {source}")]
pub struct ReplayError {
    /// Position of the instruction in the trace (0-based).
    pub index: usize,
    /// The instruction's name.
    pub name: &'static str,
    #[source]
    pub source: ScheduleError,
}

struct Replayer {
    sch: Schedule,
    /// Trace rv index -> rv index in the new schedule.
    map: Vec<Option<u32>>,
    /// Whether tile decisions that do not fit are fitted rather than refused.
    fit: bool,
    /// Trace rvs of the loops `sample_compute_location` returned, and of the blocks
    /// placed at one of them: such a block's loops depend on the decision
    /// ([`Replayer::loops_found`]).
    sampled_locations: HashSet<u32>,
    relocated: HashSet<u32>,
}

fn bad(what: &'static str, reason: impl Into<String>) -> ScheduleError {
    ScheduleError::InvalidArgument {
        what,
        reason: reason.into(),
    }
}

impl Replayer {
    fn rv(&self, op: &Operand) -> Result<u32, ScheduleError> {
        match op {
            Operand::Rv(i) => self
                .map
                .get(*i as usize)
                .copied()
                .flatten()
                .ok_or_else(|| bad("operand", format!("rv #{i} is not defined yet"))),
            other => Err(bad(
                "operand",
                format!("expected a variable, found {other:?}"),
            )),
        }
    }
    fn block(&self, op: &Operand) -> Result<BlockRv, ScheduleError> {
        self.rv(op).map(BlockRv)
    }
    fn lp(&self, op: &Operand) -> Result<LoopRv, ScheduleError> {
        self.rv(op).map(LoopRv)
    }
    fn int_arg(&self, op: &Operand) -> Result<IntArg, ScheduleError> {
        match op {
            Operand::Int(v) => Ok(IntArg::Lit(*v)),
            Operand::Rv(_) => Ok(IntArg::Rv(ExprRv(self.rv(op)?))),
            Operand::Product(fs) => Ok(IntArg::Product(
                fs.iter()
                    .map(|f| self.int_arg(f))
                    .collect::<Result<_, _>>()?,
            )),
            other => Err(bad(
                "integer",
                format!("expected an integer, found {other:?}"),
            )),
        }
    }
    fn attr<'a>(inst: &'a Instruction, name: &str) -> Result<&'a Operand, ScheduleError> {
        inst.attr(name)
            .ok_or_else(|| bad("attribute", format!("{} needs {name}=", inst.kind.name())))
    }
    fn int(inst: &Instruction, name: &str) -> Result<i64, ScheduleError> {
        match Self::attr(inst, name)? {
            Operand::Int(v) => Ok(*v),
            other => Err(bad(
                "attribute",
                format!("{name} must be an integer, found {other:?}"),
            )),
        }
    }
    fn string<'a>(inst: &'a Instruction, name: &str) -> Result<&'a str, ScheduleError> {
        match Self::attr(inst, name)? {
            Operand::Str(s) => Ok(s),
            other => Err(bad(
                "attribute",
                format!("{name} must be a string, found {other:?}"),
            )),
        }
    }
    fn input(inst: &Instruction, i: usize) -> Result<&Operand, ScheduleError> {
        inst.inputs.get(i).ok_or_else(|| {
            bad(
                "input",
                format!("{} needs {} inputs", inst.kind.name(), i + 1),
            )
        })
    }

    /// The decision of a `sample_categorical` or `sample_compute_location`: an index, or
    /// `None` to sample afresh.
    fn index_decision(inst: &Instruction) -> Result<Option<usize>, ScheduleError> {
        match &inst.decision {
            Some(Decision::Categorical(i)) => Ok(Some(*i)),
            None => Ok(None),
            Some(other) => Err(bad(
                "decision",
                format!("{other:?} for {}", inst.kind.name()),
            )),
        }
    }

    /// Notes, before `inst` runs, what a sampled compute location affects.
    fn track_locations(&mut self, inst: &Instruction) {
        match (inst.kind, inst.inputs.as_slice()) {
            (InstKind::SampleComputeLocation, _) => {
                self.sampled_locations.extend(inst.outputs.iter().copied());
            }
            (
                InstKind::ComputeAt | InstKind::ReverseComputeAt,
                [Operand::Rv(b), Operand::Rv(l)],
            ) if self.sampled_locations.contains(l) => {
                self.relocated.insert(*b);
            }
            _ => {}
        }
    }

    /// For `get_loops` of a block placed at a sampled compute location, the number of
    /// loops it sits under now: with another decision than the trace was made with, more
    /// or fewer than the trace lists. `None` for any other instruction.
    fn loops_found(&self, inst: &Instruction) -> Option<usize> {
        match (inst.kind, inst.inputs.first()) {
            (InstKind::GetLoops, Some(Operand::Rv(b))) if self.relocated.contains(b) => {
                let block = self.block(&Operand::Rv(*b)).ok()?;
                let id = self.sch.block_id(block).ok()?;
                Some(super::get::get_loops(self.sch.program(), id).len())
            }
            _ => None,
        }
    }

    /// Runs one instruction; returns the new rv indices of its outputs.
    fn step(&mut self, inst: &Instruction) -> Result<Vec<u32>, ScheduleError> {
        use InstKind::*;
        let s = &mut self.sch;
        let outs: Vec<u32> = match inst.kind {
            GetBlock => {
                let name = Self::string(inst, "name")?.to_string();
                vec![s.get_block(&name)?.0]
            }
            GetLoops => {
                let b = self.block(Self::input(inst, 0)?)?;
                self.sch.get_loops(b)?.into_iter().map(|l| l.0).collect()
            }
            GetConsumers => {
                let b = self.block(Self::input(inst, 0)?)?;
                self.sch
                    .get_consumers(b)?
                    .into_iter()
                    .map(|l| l.0)
                    .collect()
            }
            GetProducers => {
                let b = self.block(Self::input(inst, 0)?)?;
                self.sch
                    .get_producers(b)?
                    .into_iter()
                    .map(|l| l.0)
                    .collect()
            }
            Split => {
                let l = self.lp(Self::input(inst, 0)?)?;
                let Operand::List(fs) = Self::attr(inst, "factors")? else {
                    return Err(bad("factors", "expected a list"));
                };
                let factors: Vec<Option<IntArg>> = fs
                    .iter()
                    .map(|f| {
                        if *f == Operand::None {
                            Ok(None)
                        } else {
                            self.int_arg(f).map(Some)
                        }
                    })
                    .collect::<Result<_, _>>()?;
                self.sch
                    .split(l, &factors)?
                    .into_iter()
                    .map(|l| l.0)
                    .collect()
            }
            Fuse => {
                let ls: Vec<LoopRv> = inst
                    .inputs
                    .iter()
                    .map(|o| self.lp(o))
                    .collect::<Result<_, _>>()?;
                vec![self.sch.fuse(&ls)?.0]
            }
            Reorder => {
                let ls: Vec<LoopRv> = inst
                    .inputs
                    .iter()
                    .map(|o| self.lp(o))
                    .collect::<Result<_, _>>()?;
                self.sch.reorder(&ls)?;
                vec![]
            }
            Bind => {
                let l = self.lp(Self::input(inst, 0)?)?;
                let t = Self::string(inst, "thread")?.to_string();
                self.sch.bind(l, &t)?;
                vec![]
            }
            Tensorize => {
                let l = self.lp(Self::input(inst, 0)?)?;
                let i = Self::string(inst, "intrin")?.to_string();
                self.sch.tensorize(l, &i)?;
                vec![]
            }
            Vectorize | Unroll | Parallel => {
                let l = self.lp(Self::input(inst, 0)?)?;
                match inst.kind {
                    Vectorize => self.sch.vectorize(l)?,
                    Unroll => self.sch.unroll(l)?,
                    _ => self.sch.parallel(l)?,
                }
                vec![]
            }
            Annotate => {
                let op = Self::input(inst, 0)?;
                let idx = self.rv(op)?;
                let target = match self.sch.trace().rvs.get(idx as usize).map(|r| r.kind) {
                    Some(super::inst::RvKind::Loop) => Target::Loop(LoopRv(idx)),
                    _ => Target::Block(BlockRv(idx)),
                };
                let key = Self::string(inst, "key")?.to_string();
                let value = match Self::attr(inst, "value")? {
                    Operand::Int(v) => AnnArg::Int(*v),
                    Operand::Str(v) => AnnArg::Str(v.clone()),
                    o @ Operand::Rv(_) => AnnArg::Rv(ExprRv(self.rv(o)?)),
                    Operand::List(items) => AnnArg::List(
                        items
                            .iter()
                            .map(|i| self.int_arg(i))
                            .collect::<Result<_, _>>()?,
                    ),
                    other => return Err(bad("annotate value", format!("{other:?}"))),
                };
                self.sch.annotate(target, &key, value)?;
                vec![]
            }
            CacheRead | CacheWrite => {
                let b = self.block(Self::input(inst, 0)?)?;
                let scope = Self::string(inst, "scope")?.to_string();
                if inst.kind == CacheRead {
                    vec![
                        self.sch
                            .cache_read(b, Self::int(inst, "read_index")?, &scope)?
                            .0,
                    ]
                } else {
                    vec![
                        self.sch
                            .cache_write(b, Self::int(inst, "write_index")?, &scope)?
                            .0,
                    ]
                }
            }
            ReadCache => {
                let b = self.block(Self::input(inst, 0)?)?;
                let cache = self.block(Self::input(inst, 1)?)?;
                self.sch.read_cache(b, cache)?;
                vec![]
            }
            ComputeAt | ReverseComputeAt | SerialSumAt | DecomposeReduction => {
                let b = self.block(Self::input(inst, 0)?)?;
                let l = self.lp(Self::input(inst, 1)?)?;
                match inst.kind {
                    ComputeAt => {
                        self.sch.compute_at(b, l)?;
                        vec![]
                    }
                    ReverseComputeAt => {
                        self.sch.reverse_compute_at(b, l)?;
                        vec![]
                    }
                    SerialSumAt => {
                        self.sch.serial_sum_at(b, l)?;
                        vec![]
                    }
                    _ => vec![self.sch.decompose_reduction(b, l)?.0],
                }
            }
            Rfactor => {
                let l = self.lp(Self::input(inst, 0)?)?;
                vec![self.sch.rfactor(l, Self::int(inst, "factor_axis")?)?.0]
            }
            TransformLayout => {
                let b = self.block(Self::input(inst, 0)?)?;
                let Operand::List(xs) = Self::attr(inst, "permutation")? else {
                    return Err(bad("permutation", "expected a list"));
                };
                let int = |x: &Operand| match x {
                    Operand::Int(v) => Ok(*v),
                    other => Err(bad("permutation", format!("{other:?}"))),
                };
                let groups: Vec<Vec<i64>> = xs
                    .iter()
                    .map(|x| match x {
                        Operand::List(g) => g.iter().map(int).collect(),
                        single => int(single).map(|v| vec![v]),
                    })
                    .collect::<Result<_, _>>()?;
                self.sch
                    .transform_layout(b, Self::int(inst, "buffer_index")?, &groups)?;
                vec![]
            }
            Im2col => {
                let b = self.block(Self::input(inst, 0)?)?;
                self.sch.im2col(b)?;
                vec![]
            }
            PadEinsum => {
                let b = self.block(Self::input(inst, 0)?)?;
                let Operand::List(ps) = Self::attr(inst, "padding")? else {
                    return Err(bad("padding", "expected a list"));
                };
                let padding: Vec<IntArg> = ps
                    .iter()
                    .map(|x| self.int_arg(x))
                    .collect::<Result<_, _>>()?;
                self.sch.pad_einsum(b, &padding)?;
                vec![]
            }
            ComputeInline | ReverseComputeInline => {
                let b = self.block(Self::input(inst, 0)?)?;
                if inst.kind == ComputeInline {
                    self.sch.compute_inline(b)?
                } else {
                    self.sch.reverse_compute_inline(b)?
                }
                vec![]
            }
            StorageSwizzle => {
                let b = self.block(Self::input(inst, 0)?)?;
                self.sch
                    .storage_swizzle(b, Self::int(inst, "buffer_index")?)?;
                vec![]
            }
            StorageWiden => {
                let b = self.block(Self::input(inst, 0)?)?;
                self.sch
                    .storage_widen(b, Self::int(inst, "buffer_index")?)?;
                vec![]
            }
            SplitLayout => {
                let b = self.block(Self::input(inst, 0)?)?;
                let factor = self.int_arg(Self::attr(inst, "factor")?)?;
                self.sch.split_layout(
                    b,
                    Self::int(inst, "buffer_index")?,
                    Self::int(inst, "axis")?,
                    factor,
                )?;
                vec![]
            }
            StorageAlign => {
                let b = self.block(Self::input(inst, 0)?)?;
                self.sch.storage_align(
                    b,
                    Self::int(inst, "buffer_index")?,
                    Self::int(inst, "axis")?,
                    Self::int(inst, "factor")?,
                    Self::int(inst, "offset")?,
                )?;
                vec![]
            }
            SamplePerfectTile => {
                let l = self.lp(Self::input(inst, 0)?)?;
                let decision = match &inst.decision {
                    Some(Decision::Tile(t)) => Some(t.clone()),
                    None => None,
                    Some(other) => {
                        return Err(bad(
                            "decision",
                            format!("{other:?} for sample_perfect_tile"),
                        ))
                    }
                };
                let n = Self::int(inst, "n")?;
                let m = Self::int(inst, "max_innermost_factor")?;
                let decision = match decision {
                    Some(t) if self.fit => {
                        let extent = self.sch.tiled_extent(l, n, "sample_perfect_tile n")?;
                        let fits = sampling::check_tile(extent, n as usize, m, &t).is_ok();
                        Some(if fits {
                            t
                        } else {
                            sampling::fit_tile(extent, m, &t)
                        })
                    }
                    other => other,
                };
                self.sch
                    .sample_perfect_tile(l, n, m, decision)?
                    .into_iter()
                    .map(|v| v.0)
                    .collect()
            }
            SampleTile => {
                let l = self.lp(Self::input(inst, 0)?)?;
                let decision = match &inst.decision {
                    Some(Decision::Tile(t)) => Some(t.clone()),
                    None => None,
                    Some(other) => {
                        return Err(bad("decision", format!("{other:?} for sample_tile")))
                    }
                };
                let n = Self::int(inst, "n")?;
                let m = Self::int(inst, "max_innermost_factor")?;
                let w = match Self::attr(inst, "max_waste")? {
                    Operand::Float(w) => *w,
                    other => return Err(bad("max_waste", format!("{other:?}"))),
                };
                let decision = match decision {
                    Some(t) if self.fit => {
                        let extent = self.sch.tiled_extent(l, n, "sample_tile n")?;
                        let fits = sampling::check_imperfect_tile(extent, n as usize, m, w, &t);
                        Some(match fits {
                            Ok(()) => t,
                            Err(_) => sampling::fit_imperfect_tile(extent, m, w, &t),
                        })
                    }
                    other => other,
                };
                self.sch
                    .sample_tile(l, n, m, w, decision)?
                    .into_iter()
                    .map(|v| v.0)
                    .collect()
            }
            SampleCategorical => {
                let ints = |o: &Operand| -> Result<Vec<i64>, ScheduleError> {
                    match o {
                        Operand::List(xs) => xs
                            .iter()
                            .map(|x| match x {
                                Operand::Int(v) => Ok(*v),
                                other => Err(bad("candidates", format!("{other:?}"))),
                            })
                            .collect(),
                        other => Err(bad("candidates", format!("{other:?}"))),
                    }
                };
                let floats = |o: &Operand| -> Result<Vec<f64>, ScheduleError> {
                    match o {
                        Operand::List(xs) => xs
                            .iter()
                            .map(|x| match x {
                                Operand::Float(v) => Ok(*v),
                                Operand::Int(v) => Ok(*v as f64),
                                other => Err(bad("probs", format!("{other:?}"))),
                            })
                            .collect(),
                        other => Err(bad("probs", format!("{other:?}"))),
                    }
                };
                let c = ints(Self::attr(inst, "candidates")?)?;
                let p = floats(Self::attr(inst, "probs")?)?;
                let decision = Self::index_decision(inst)?;
                vec![self.sch.sample_categorical(&c, &p, decision)?.0]
            }
            SampleComputeLocation => {
                let b = self.block(Self::input(inst, 0)?)?;
                let Operand::List(ls) = Self::input(inst, 1)? else {
                    return Err(bad("locations", "expected a list of loops"));
                };
                let locations: Vec<LoopRv> =
                    ls.iter().map(|o| self.lp(o)).collect::<Result<_, _>>()?;
                let decision = Self::index_decision(inst)?;
                vec![self.sch.sample_compute_location(b, &locations, decision)?.0]
            }
        };
        Ok(outs)
    }
}

/// Replays `trace` on `prog`. Sampling instructions without a decision draw from `seed`.
pub fn replay(trace: &Trace, prog: Program, seed: u64) -> Result<Schedule, ReplayError> {
    run(trace, prog, seed, false)
}

/// Replays `trace`, made for another workload, on `prog`, fitting its tile decisions to
/// this program's loops; the schedule's trace holds the fitted decisions.
pub fn replay_fitted(trace: &Trace, prog: Program, seed: u64) -> Result<Schedule, ReplayError> {
    run(trace, prog, seed, true)
}

fn run(trace: &Trace, prog: Program, seed: u64, fit: bool) -> Result<Schedule, ReplayError> {
    // The schedule is dropped on the first error, so no primitive needs to restore the
    // program it leaves; the schedule handed out restores again.
    let mut sch = Schedule::new(prog, seed);
    sch.set_rollback(false);
    sch.reserve(trace.insts.len(), trace.rvs.len());
    let mut r = Replayer {
        sch,
        map: vec![None; trace.rvs.len()],
        fit,
        sampled_locations: HashSet::new(),
        relocated: HashSet::new(),
    };
    for (index, inst) in trace.insts.iter().enumerate() {
        let err = |source| ReplayError {
            index,
            name: inst.kind.name(),
            source,
        };
        r.track_locations(inst);
        let mut names: Vec<String> = inst
            .outputs
            .iter()
            .map(|o| {
                trace
                    .rvs
                    .get(*o as usize)
                    .map_or_else(|| "_".into(), |r| r.name.clone())
            })
            .collect();
        // The loops of a block at a sampled location: its own loops are the innermost,
        // the ones above them depend on the location. The trace's outputs are matched
        // innermost first; loops it does not list are unnamed, and a listed loop that no
        // longer exists stays undefined (an error where a later instruction uses it).
        let found = r.loops_found(inst);
        if let Some(n) = found {
            let listed = names.len();
            names = if n >= listed {
                std::iter::repeat_n("_".to_string(), n - listed)
                    .chain(names)
                    .collect()
            } else {
                names.split_off(listed - n)
            };
        }
        r.sch.next_names = Some(names);
        let outs = r.step(inst).map_err(err)?;
        r.sch.next_names = None;
        let fixed_arity = !matches!(
            inst.kind,
            InstKind::GetLoops | InstKind::GetConsumers | InstKind::GetProducers
        );
        if found.is_none()
            && outs.len() != inst.outputs.len()
            && !(fixed_arity && inst.outputs.is_empty() && outs.is_empty())
        {
            return Err(err(ScheduleError::OutputCount {
                instruction: inst.kind.name().into(),
                given: inst.outputs.len(),
                actual: outs.len(),
            }));
        }
        for (o, n) in inst.outputs.iter().rev().zip(outs.into_iter().rev()) {
            if let Some(slot) = r.map.get_mut(*o as usize) {
                *slot = Some(n);
            }
        }
    }
    r.sch.set_rollback(true);
    Ok(r.sch)
}
