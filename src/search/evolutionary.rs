//! Evolutionary search over the sketches' decisions, ranked by the cost model (the
//! MetaSchedule scheme, with the parameters of the space's `[search]` section).
//!
//! One call to [`SearchStrategy::propose`] for `n` candidates is one round, its
//! population (candidates per generation) `n x population_per_candidate` within
//! `min_population` and `population` ([`SearchParams::population_for`]), so a small batch
//! costs in proportion:
//!
//! 1. **Initial population**: the best measured candidates of this workload (the top
//!    `init_measured_ratio` of the population by latency, from [`SearchStrategy::feedback`]),
//!    the transferred traces of other workloads that replay and pass the postprocessors
//!    here ([`SearchStrategy::seed_traces`]), each also grown again from its sketch with
//!    its decisions as hints (so a trace recorded before the space gained a decision gets
//!    one), and fresh samples of every sketch.
//! 2. **Generations**: the population is scored, survivors are drawn with probability
//!    proportional to their score and mutated ([`super::mutator`]) with the
//!    `mutation_probability`, else copied. A mutant that fails to replay or to pass the
//!    postprocessors is discarded; every candidate is deduplicated by its IR hash. A
//!    mutant is first looked up by its decisions (the replay memo of earlier waves and
//!    rounds, then the other mutants of its wave), so each distinct one is replayed,
//!    lowered and checked once.
//! 3. **Batch**: the best-scored candidates of the round not yet proposed or measured,
//!    first a `thread_tile_share` of the batch from each class of outputs per thread
//!    ([`TileClass`]), at most a `tiling_share` of them of one tiling (a sketch and its
//!    tile decisions) and a `branch_share` of one branch (a conv as its GEMM or not,
//!    split-K or not, and as many kernels), plus an `eps_greedy` share of fresh samples;
//!    only these get source code.
//!
//! The score is the cost model's ([`SearchStrategy::set_scorer`]); without a model a
//! candidate scores the normalized throughput of its closest measured ancestor (fresh
//! samples the mean of the measured ones, or all alike before anything is measured), and
//! [`SearchStrategy::uses_model`] says so.
//!
//! A small space runs out: sampling and mutation stop after `max_attempts_per_candidate`
//! tries per wanted candidate or after a wave that found nothing new, and a batch short of
//! what was asked says `exhausted`.
//!
//! Deterministic: the random numbers come from a ChaCha generator seeded by the seed and
//! the round, drawn serially; replay, checks, the mutation sites of new members and
//! scoring run in parallel (rayon) and are collected in order.
//!
//! [`EvolutionarySearch::last_times`] says where the last round's time went, phase by
//! phase ([`RoundTimes`]; `cargo bench --bench search_round` prints it).

use super::mutator::{self, MutatorKind, MutatorStats, Site};
use super::padding;
use super::postproc::{self, TargetLimits, Verified};
use super::random::{ir_hash, splitmix, Candidate, MeasuredResult, Proposal, SearchStrategy};
use super::round_times::{timed, RoundTimes, Work};
use super::sample::BlockShape;
use super::sketch::{self, SketchKind};
use super::space::{SearchParams, SearchSpace};
use crate::cost_model::Scorer;
use crate::ir::Program;
use crate::lower::{lower, Lowered};
use crate::schedule::{replay, Decision, InstKind, Schedule, Trace};
use rand::distributions::{Distribution, WeightedIndex};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// Candidates per call of the scorer (the unit of parallel scoring).
const SCORE_CHUNK: usize = 64;

/// A candidate that replayed and passed the checks before codegen.
struct Member {
    trace: Trace,
    /// The decisions a mutator can change ([`mutator::sites`]), found once, in parallel.
    sites: Vec<Site>,
    hash: String,
    lowered: Lowered,
    /// Its trace's instructions without decisions, as an index into the search's
    /// registry: with the decisions, the key of the replay memo.
    structure: usize,
}

/// Where a candidate of the round came from.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Origin {
    Measured,
    Transferred,
    Fresh,
    Mutant,
}

/// A candidate of the current round.
struct Entry {
    member: Arc<Member>,
    origin: Origin,
    /// Normalized throughput of the closest measured ancestor (itself when measured).
    lineage: Option<f64>,
    score: Option<f64>,
}

/// The distinct candidates of one round, in the order they were found.
#[derive(Default)]
struct Round {
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    /// Candidates per generation ([`SearchParams::population_for`] the batch).
    population: usize,
}

impl Round {
    /// Adds a candidate unless its IR is already in the round; its position, and whether
    /// it is new.
    fn admit(
        &mut self,
        member: Arc<Member>,
        origin: Origin,
        lineage: Option<f64>,
    ) -> (usize, bool) {
        if let Some(i) = self.index.get(&member.hash) {
            return (*i, false);
        }
        self.index.insert(member.hash.clone(), self.entries.len());
        self.entries.push(Entry {
            member,
            origin,
            lineage,
            score: None,
        });
        (self.entries.len() - 1, true)
    }
}

/// What to evaluate: a trace to replay, a mutant to replay (re-sampling the decisions
/// its change made invalid) or, for a changed sketch choice at `regrow_at`, to grow
/// again from its sketch, or a fresh sample of a sketch.
enum Source {
    Trace(Trace),
    Mutant {
        trace: Trace,
        regrow_at: Option<usize>,
    },
    Fresh {
        kind: SketchKind,
        seed: u64,
    },
    /// A trace grown again whole from its sketch with its decisions as hints, new
    /// decisions drawn with `salt` in the seed.
    Upgrade {
        trace: Trace,
        salt: u64,
    },
}

/// The outcome of evaluating one [`Source`].
enum Evaluated {
    /// The IR is already in the round, at this position.
    InRound(usize),
    /// Replayed (or sampled) and passed the checks.
    New {
        trace: Trace,
        sites: Vec<Site>,
        hash: String,
        lowered: Box<Lowered>,
    },
    /// The sketch failed to apply to a fresh sample.
    Instantiation,
    /// The trace does not replay on this program.
    Replay,
    /// A postprocessor refused it.
    Rejected,
}

/// What the replay memo remembers of a trace (by structure and decisions).
#[derive(Clone)]
enum Memo {
    Valid(String),
    Invalid,
}

/// A measured candidate of this workload.
struct Measured {
    trace: Trace,
    seconds: Option<f64>,
    /// Replayed once when first needed for a population; `Err` if it no longer replays.
    member: Option<Result<Arc<Member>, ()>>,
}

/// What the last round did: where its first generation came from and how large each
/// generation was, for reports and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoundSummary {
    /// First-generation members from measured candidates of this workload.
    pub measured: usize,
    /// First-generation members transferred from other workloads.
    pub transferred: usize,
    /// First-generation fresh samples.
    pub fresh: usize,
    /// Sizes of the generations after the first.
    pub generations: Vec<usize>,
    /// Distinct candidates the round met.
    pub distinct: usize,
}

/// Evolutionary search of `program`'s design space for a target.
pub struct EvolutionarySearch {
    space: SearchSpace,
    target: TargetLimits,
    program: Program,
    seed: u64,
    params: SearchParams,
    sketches: Vec<SketchKind>,
    round: u64,
    scorer: Option<Arc<dyn Scorer>>,
    /// Measured candidates by IR hash.
    measured: HashMap<String, Measured>,
    /// Transferred traces not yet tried on this program.
    pending_transfer: Vec<Trace>,
    transferred: Vec<Arc<Member>>,
    /// IR hashes proposed, measured or said known: never proposed again.
    seen: HashSet<String>,
    memo: HashMap<MemoKey, Memo>,
    /// Trace structures (instructions without decisions) met so far.
    structures: Vec<Trace>,
    stats: MutatorStats,
    last: RoundSummary,
    /// Where the last round's time went.
    times: RoundTimes,
}

impl EvolutionarySearch {
    /// Searches the space of `program` (the canonical workload program) for `target`;
    /// the same `seed` (and the same feedback) proposes the same candidates. The search
    /// parameters come from the space's `[search]` section.
    pub fn new(space: SearchSpace, target: TargetLimits, program: Program, seed: u64) -> Self {
        let sketches = sketch::sketches(&space, &program).unwrap_or_default();
        EvolutionarySearch {
            params: space.search.clone(),
            space,
            target,
            program,
            seed,
            sketches,
            round: 0,
            scorer: None,
            measured: HashMap::new(),
            pending_transfer: Vec::new(),
            transferred: Vec::new(),
            seen: HashSet::new(),
            memo: HashMap::new(),
            structures: Vec::new(),
            stats: MutatorStats::default(),
            last: RoundSummary::default(),
            times: RoundTimes::default(),
        }
    }

    /// What the last call to `propose` did.
    pub fn last_round(&self) -> &RoundSummary {
        &self.last
    }

    /// Where the last call to `propose` spent its time, phase by phase.
    pub fn last_times(&self) -> &RoundTimes {
        &self.times
    }

    /// Per mutator: (name, mutants tried, mutants accepted: replayed and passed the
    /// postprocessors).
    pub fn mutator_stats(&self) -> Vec<(&'static str, usize, usize)> {
        self.stats.rows()
    }

    /// The sketches fresh samples are drawn from.
    pub fn sketches(&self) -> &[SketchKind] {
        &self.sketches
    }

    // ----- evaluation -------------------------------------------------------------------

    /// Replays (or samples) and checks `sources` in parallel, in order. IR already in
    /// `round` is not checked again.
    fn evaluate(&mut self, round: &Round, sources: Vec<Source>) -> Vec<Evaluated> {
        let start = Instant::now();
        let done: Vec<(Evaluated, Work)> = sources
            .into_par_iter()
            .map(|source| {
                let mut work = Work::default();
                let e = self.evaluate_one(round, source, &mut work);
                (e, work)
            })
            .collect();
        self.times.evaluate += start.elapsed();
        done.into_iter()
            .map(|(e, work)| {
                self.times.add_work(&work);
                e
            })
            .collect()
    }

    /// Replays (or samples) and checks one source, adding the time of each step to `work`.
    fn evaluate_one(&self, round: &Round, source: Source, work: &mut Work) -> Evaluated {
        let sch = match source {
            Source::Trace(t) => {
                match timed(&mut work.replay, || replay(&t, self.program.clone(), 0)) {
                    Ok(sch) => sch,
                    Err(_) => return Evaluated::Replay,
                }
            }
            // A sketch choice is grown again from its sketch: the trace's instructions
            // after it are those of the old choice, which a replay would repeat.
            Source::Mutant {
                trace,
                regrow_at: Some(inst),
            } => {
                let seed = splitmix(self.seed ^ self.round.rotate_left(32) ^ inst as u64);
                match self.regrow(&trace, inst, seed, work) {
                    Some(sch) => sch,
                    None => return Evaluated::Replay,
                }
            }
            Source::Upgrade { trace, salt } => {
                let inst = trace.insts.len().saturating_sub(1);
                let seed = splitmix(self.seed ^ self.round.rotate_left(32) ^ salt);
                match self.regrow(&trace, inst, seed, work) {
                    Some(sch) => sch,
                    None => return Evaluated::Replay,
                }
            }
            Source::Mutant {
                trace,
                regrow_at: None,
            } => match timed(&mut work.replay, || {
                mutator::replay_mutant(&trace, &self.program, 0)
            }) {
                Ok(sch) => sch,
                Err(_) => return Evaluated::Replay,
            },
            Source::Fresh { kind, seed } => {
                let sampled = timed(&mut work.sample, || {
                    sketch::sample_afresh(&self.space, &self.program, kind, seed, None)
                        .map(|s| padding::tighten_if_asked(&self.space, s, &self.program))
                });
                match sampled {
                    Some(sch) => sch,
                    None => return Evaluated::Instantiation,
                }
            }
        };
        let hash = timed(&mut work.hash, || ir_hash(sch.program()));
        if let Some(i) = round.index.get(&hash) {
            return Evaluated::InRound(*i);
        }
        let checked = timed(&mut work.postprocess, || {
            postproc::check_program(sch.program(), &self.space, &self.target)
        });
        if checked.is_err() {
            return Evaluated::Rejected;
        }
        let lowered = match timed(&mut work.lower, || {
            lower(sch.program(), self.target.backend())
        }) {
            Ok(l) => l,
            Err(_) => return Evaluated::Rejected,
        };
        let checked = timed(&mut work.postprocess, || {
            postproc::check_lowered(&lowered, &self.space, &self.target)
        });
        match checked {
            Ok(()) => Evaluated::New {
                sites: mutator::sites(sch.trace()),
                trace: sch.trace().clone(),
                hash,
                lowered: Box::new(lowered),
            },
            Err(_) => Evaluated::Rejected,
        }
    }

    /// `trace` grown again from its sketch through instruction `inst` (see
    /// [`sketch::regrow`]), the time it took added to `work`.
    fn regrow(&self, trace: &Trace, inst: usize, seed: u64, work: &mut Work) -> Option<Schedule> {
        timed(&mut work.sample, || {
            sketch::regrow(
                &self.space,
                &self.program,
                &self.sketches,
                trace,
                inst,
                seed,
            )
        })
    }

    /// The index of `trace`'s structure in the registry, registering it if new.
    fn structure_of(&mut self, trace: &Trace) -> usize {
        if let Some(i) = self
            .structures
            .iter()
            .position(|s| same_structure(s, trace))
        {
            return i;
        }
        let mut bare = trace.clone();
        for inst in &mut bare.insts {
            inst.decision = None;
        }
        self.structures.push(bare);
        self.structures.len() - 1
    }

    fn member(
        &mut self,
        trace: Trace,
        sites: Vec<Site>,
        hash: String,
        lowered: Box<Lowered>,
    ) -> Arc<Member> {
        let structure = self.structure_of(&trace);
        Arc::new(Member {
            trace,
            sites,
            hash,
            lowered: *lowered,
            structure,
        })
    }

    // ----- the initial population -------------------------------------------------------

    /// The best measured candidates: the top `init_measured_ratio` of the population by
    /// latency, each with its normalized throughput.
    fn measured_members(&mut self, round: &Round) -> Vec<(Arc<Member>, f64)> {
        let k = (self.params.init_measured_ratio * round.population as f64) as usize;
        let mut best: Vec<(f64, String)> = self
            .measured
            .iter()
            .filter_map(|(h, m)| m.seconds.map(|s| (s, h.clone())))
            .filter(|(s, _)| s.is_finite() && *s > 0.0)
            .collect();
        best.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        best.truncate(k);
        let Some(fastest) = best.first().map(|b| b.0) else {
            return Vec::new();
        };
        let todo: Vec<String> = best
            .iter()
            .filter(|(_, h)| self.measured[h].member.is_none())
            .map(|(_, h)| h.clone())
            .collect();
        let sources = todo
            .iter()
            .map(|h| Source::Trace(self.measured[h].trace.clone()))
            .collect();
        for (h, e) in todo.iter().zip(self.evaluate(round, sources)) {
            let member = match e {
                Evaluated::New {
                    trace,
                    sites,
                    hash,
                    lowered,
                } => {
                    self.seen.insert(hash.clone());
                    Ok(self.member(trace, sites, hash, lowered))
                }
                Evaluated::InRound(i) => Ok(round.entries[i].member.clone()),
                _ => Err(()),
            };
            if let Some(m) = self.measured.get_mut(h) {
                m.member = Some(member);
            }
        }
        best.iter()
            .filter_map(|(s, h)| match &self.measured[h].member {
                Some(Ok(m)) => Some((m.clone(), fastest / s)),
                _ => None,
            })
            .collect()
    }

    /// Tries the transferred traces not tried yet; keeps those that replay and pass. Each
    /// is also grown again from its sketch with its decisions as hints (a regrowth at its
    /// last instruction): a trace recorded before the space gained a decision replays
    /// without it, and its mutants would never have it; grown again it keeps every
    /// decision it had and draws the new ones. Where the space is unchanged the two are
    /// the same candidate, kept once.
    fn take_transfers(&mut self, round: &Round) {
        let pending = std::mem::take(&mut self.pending_transfer);
        let sources = pending
            .into_iter()
            .enumerate()
            .flat_map(|(i, t)| {
                let upgrade = Source::Upgrade {
                    trace: t.clone(),
                    salt: i as u64,
                };
                [Source::Trace(t), upgrade]
            })
            .collect();
        for e in self.evaluate(round, sources) {
            let member = match e {
                Evaluated::New {
                    trace,
                    sites,
                    hash,
                    lowered,
                } => self.member(trace, sites, hash, lowered),
                Evaluated::InRound(i) => round.entries[i].member.clone(),
                _ => continue,
            };
            if !self.transferred.iter().any(|m| m.hash == member.hash) {
                self.transferred.push(member);
            }
        }
    }

    /// Up to `want` fresh samples of the sketches, in waves, new to the round.
    fn sample_fresh(
        &mut self,
        round: &mut Round,
        want: usize,
        rng: &mut ChaCha8Rng,
        out: &mut Proposal,
    ) -> Vec<usize> {
        let cap = want.saturating_mul(self.params.max_attempts_per_candidate);
        let (mut found, mut tried) = (Vec::new(), 0);
        while found.len() < want && tried < cap && !self.sketches.is_empty() {
            let k = (want - found.len()).min(cap - tried);
            tried += k;
            let sources = (0..k)
                .map(|_| Source::Fresh {
                    kind: self.sketches[rng.gen_range(0..self.sketches.len())],
                    seed: rng.gen(),
                })
                .collect();
            let before = found.len();
            let evaluated = self.evaluate(round, sources);
            let admitting = Instant::now();
            for e in evaluated {
                match e {
                    Evaluated::New {
                        trace,
                        sites,
                        hash,
                        lowered,
                    } => {
                        let m = self.member(trace, sites, hash, lowered);
                        match round.admit(m, Origin::Fresh, None) {
                            (i, true) => found.push(i),
                            _ => out.duplicates += 1,
                        }
                    }
                    Evaluated::InRound(_) => out.duplicates += 1,
                    Evaluated::Instantiation | Evaluated::Replay => out.instantiation_failures += 1,
                    Evaluated::Rejected => {}
                }
            }
            self.times.dedup += admitting.elapsed();
            if found.len() == before {
                break;
            }
        }
        found
    }

    /// The first generation: measured, transferred, then fresh samples up to the
    /// population.
    fn initial_population(
        &mut self,
        round: &mut Round,
        rng: &mut ChaCha8Rng,
        out: &mut Proposal,
    ) -> Vec<usize> {
        let mut pop = Vec::new();
        self.last = RoundSummary::default();
        let measured = self.measured_members(round);
        let prior = (!measured.is_empty())
            .then(|| measured.iter().map(|(_, t)| t).sum::<f64>() / measured.len() as f64);
        for (m, throughput) in measured {
            if let (i, true) = round.admit(m, Origin::Measured, Some(throughput)) {
                pop.push(i);
                self.last.measured += 1;
            }
        }
        self.take_transfers(round);
        for m in self.transferred.clone() {
            if let (i, true) = round.admit(m, Origin::Transferred, prior) {
                pop.push(i);
                self.last.transferred += 1;
            }
        }
        let want = round.population.saturating_sub(pop.len());
        let fresh = self.sample_fresh(round, want, rng, out);
        self.last.fresh = fresh.len();
        for i in fresh {
            round.entries[i].lineage = prior;
            pop.push(i);
        }
        pop
    }

    // ----- scoring and evolution --------------------------------------------------------

    /// Scores the round's candidates that have no score yet.
    fn score(&mut self, round: &mut Round, out: &mut Proposal) {
        let start = Instant::now();
        let todo: Vec<usize> = (0..round.entries.len())
            .filter(|i| round.entries[*i].score.is_none())
            .collect();
        out.scored += todo.len();
        let scores: Vec<f64> = match &self.scorer {
            Some(scorer) => {
                let lowered: Vec<&Lowered> = todo
                    .iter()
                    .map(|i| &round.entries[*i].member.lowered)
                    .collect();
                lowered
                    .par_chunks(SCORE_CHUNK)
                    .map(|c| {
                        let mut s = scorer.score(c);
                        s.resize(c.len(), 0.0);
                        s
                    })
                    .collect::<Vec<_>>()
                    .concat()
            }
            None => todo
                .iter()
                .map(|i| round.entries[*i].lineage.unwrap_or(1.0))
                .collect(),
        };
        for (i, s) in todo.into_iter().zip(scores) {
            round.entries[i].score = Some(if s.is_finite() { s } else { 0.0 });
        }
        self.times.score += start.elapsed();
    }

    /// The next generation: survivors of `pop` drawn by score, mutated or copied, in waves
    /// until the population is full, the attempts are spent or a wave finds nothing new.
    fn next_generation(
        &mut self,
        round: &mut Round,
        pop: &[usize],
        rng: &mut ChaCha8Rng,
        out: &mut Proposal,
    ) -> Vec<usize> {
        if pop.is_empty() {
            return Vec::new();
        }
        let weights: Vec<f64> = pop
            .iter()
            .map(|i| round.entries[*i].score.unwrap_or(0.0).max(0.0))
            .collect();
        let by_score = WeightedIndex::new(&weights).ok();
        let target = round.population;
        let cap = target.saturating_mul(self.params.max_attempts_per_candidate);
        let (mut next, mut in_next) = (Vec::new(), HashSet::new());
        let mut tried = 0;
        while next.len() < target && tried < cap {
            let k = (target - next.len()).min(cap - tried);
            tried += k;
            // Plans, drawn serially: (parent, mutant).
            let drawing = Instant::now();
            let mut plans: Vec<(usize, Option<(MutatorKind, Trace)>)> = Vec::with_capacity(k);
            for _ in 0..k {
                let parent = pop[match &by_score {
                    Some(d) => d.sample(rng),
                    None => rng.gen_range(0..pop.len()),
                }];
                let mutant = if rng.gen::<f64>() < self.params.mutation_probability {
                    let m = &round.entries[parent].member;
                    mutator::mutate_sites(&m.trace, &m.sites, rng)
                } else {
                    None
                };
                plans.push((parent, mutant));
            }
            self.times.mutate += drawing.elapsed();
            let looking_up = Instant::now();
            // The memo answers for mutants met before; the rest are replayed, each distinct
            // one once (a wave often draws the same mutant of a popular parent again).
            let mut sources = Vec::new();
            let mut in_wave: HashMap<MemoKey, usize> = HashMap::new();
            let mut looked_up: Vec<(usize, Option<Lookup>)> = Vec::with_capacity(k);
            for (parent, mutant) in plans {
                let Some((kind, trace)) = mutant else {
                    looked_up.push((parent, None));
                    continue;
                };
                let key = memo_key(round.entries[parent].member.structure, &trace);
                let known = self.memo.get(&key).filter(|m| match m {
                    Memo::Invalid => true,
                    Memo::Valid(h) => round.index.contains_key(h),
                });
                let answer = match known {
                    Some(m) => Answer::Known(m.clone()),
                    None => Answer::Evaluated(*in_wave.entry(key.clone()).or_insert_with(|| {
                        let regrow_at = (kind == MutatorKind::SketchChoice)
                            .then(|| changed_at(&round.entries[parent].member.trace, &trace))
                            .flatten();
                        sources.push(Source::Mutant { trace, regrow_at });
                        sources.len() - 1
                    })),
                };
                looked_up.push((parent, Some((kind, key, answer))));
            }
            self.times.dedup += looking_up.elapsed();
            let mut evaluated: Vec<Option<Evaluated>> = self
                .evaluate(round, sources)
                .into_iter()
                .map(Some)
                .collect();
            let admitting = Instant::now();
            let before = next.len();
            for (parent, mutant) in looked_up {
                let child = match mutant {
                    None => Some(parent),
                    Some((kind, key, answer)) => {
                        let evaluated = match answer {
                            Answer::Known(m) => Err(m),
                            // A repeat of a mutant of this wave finds the memo written.
                            Answer::Evaluated(slot) => evaluated[slot].take().ok_or_else(|| {
                                self.memo.get(&key).cloned().unwrap_or(Memo::Invalid)
                            }),
                        };
                        let child = match evaluated {
                            Err(Memo::Invalid) => None,
                            Err(Memo::Valid(h)) => round.index.get(&h).copied(),
                            Ok(Evaluated::New {
                                trace,
                                sites,
                                hash,
                                lowered,
                            }) => {
                                self.memo.insert(key, Memo::Valid(hash.clone()));
                                // A regrown mutant has instructions of its own.
                                let parent_structure = round.entries[parent].member.structure;
                                let structure =
                                    if same_structure(&self.structures[parent_structure], &trace) {
                                        parent_structure
                                    } else {
                                        self.structure_of(&trace)
                                    };
                                let m = Arc::new(Member {
                                    trace,
                                    sites,
                                    hash,
                                    lowered: *lowered,
                                    structure,
                                });
                                let lineage = round.entries[parent].lineage;
                                Some(round.admit(m, Origin::Mutant, lineage).0)
                            }
                            Ok(Evaluated::InRound(i)) => {
                                let h = round.entries[i].member.hash.clone();
                                self.memo.insert(key, Memo::Valid(h));
                                Some(i)
                            }
                            Ok(_) => {
                                self.memo.insert(key, Memo::Invalid);
                                None
                            }
                        };
                        self.stats.record(kind, child.is_some());
                        child
                    }
                };
                match child {
                    Some(c) if in_next.insert(c) => next.push(c),
                    Some(_) => out.duplicates += 1,
                    None => {}
                }
            }
            self.times.dedup += admitting.elapsed();
            if next.len() == before {
                break;
            }
        }
        next
    }

    // ----- the batch --------------------------------------------------------------------

    /// The batch: the best-scored candidates of the round not yet seen, first a
    /// `thread_tile_share` of the batch from each class of outputs per thread, then the
    /// rest by score, no tiling taking more than its `tiling_share` of them and no branch
    /// more than its `branch_share`, and an `eps_greedy` share of fresh samples; a batch
    /// the caps would leave short is filled by score without them.
    fn pick_batch(
        &mut self,
        round: &Round,
        n: usize,
        is_known: &mut dyn FnMut(&Trace) -> bool,
        out: &mut Proposal,
    ) -> Vec<usize> {
        let n_random = ((n as f64) * self.params.eps_greedy).round() as usize;
        let per_tiling = ((n as f64) * self.params.tiling_share).ceil().max(1.0) as usize;
        let per_branch = ((n as f64) * self.params.branch_share).ceil().max(1.0) as usize;
        let per_class = ((n as f64) * self.params.thread_tile_share).ceil() as usize;
        let mut by_score: Vec<usize> = (0..round.entries.len()).collect();
        by_score.sort_by(|a, b| {
            let s = |i: &usize| round.entries[*i].score.unwrap_or(0.0);
            s(b).total_cmp(&s(a))
        });
        let fresh: Vec<usize> = (0..round.entries.len())
            .filter(|i| round.entries[*i].origin == Origin::Fresh)
            .collect();
        let mut picks = Vec::new();
        let mut of_tiling: HashMap<TilingKey, usize> = HashMap::new();
        let mut of_branch: HashMap<Branch, usize> = HashMap::new();
        let mut take = |from: &[usize], count: usize, capped: bool, picks: &mut Vec<usize>| {
            let goal = picks.len() + count;
            for i in from {
                if picks.len() >= goal {
                    break;
                }
                let e = &round.entries[*i];
                if self.seen.contains(&e.member.hash) {
                    continue;
                }
                let tiling = tiling_key(&e.member);
                let branch = Branch::of(&e.member.trace, &e.member.lowered);
                if capped
                    && (of_tiling.get(&tiling).copied().unwrap_or(0) >= per_tiling
                        || of_branch.get(&branch).copied().unwrap_or(0) >= per_branch)
                {
                    continue;
                }
                self.seen.insert(e.member.hash.clone());
                if is_known(&e.member.trace) {
                    out.known += 1;
                    continue;
                }
                *of_tiling.entry(tiling).or_insert(0) += 1;
                *of_branch.entry(branch).or_insert(0) += 1;
                picks.push(*i);
            }
        };
        let best = n - n_random.min(n);
        if per_class > 0 {
            let bounds = &self.params.thread_tile_classes;
            let classes: Vec<TileClass> = round
                .entries
                .par_iter()
                .map(|e| TileClass::of(&e.member.lowered, bounds))
                .collect();
            for class in TileClass::all(bounds) {
                let of_class: Vec<usize> = by_score
                    .iter()
                    .copied()
                    .filter(|i| classes[*i] == class)
                    .collect();
                take(
                    &of_class,
                    per_class.min(best - picks.len()),
                    true,
                    &mut picks,
                );
            }
        }
        take(&by_score, best - picks.len(), true, &mut picks);
        take(&fresh, n_random.min(n), false, &mut picks);
        let short = n - picks.len();
        take(&by_score, short, false, &mut picks);
        picks
    }
}

/// A candidate's class of outputs per thread of its main computation (output elements
/// of a block over its threads, [`BlockShape`]), by which
/// [`EvolutionarySearch::pick_batch`] gives each class its `thread_tile_share`: the
/// index of the first of the space's `thread_tile_classes` bounds that the candidate's
/// outputs per thread do not exceed, or the number of bounds past the last (with the
/// bounds [16, 64]: small register tiles, medium, and large ones such as cuBLAS's
/// 128 x 128 blocks of 16 x 8 a thread).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileClass(pub usize);

impl TileClass {
    pub fn of(lowered: &Lowered, bounds: &[usize]) -> TileClass {
        let shape = BlockShape::of(lowered);
        let per_thread = shape.outputs / shape.threads.max(1);
        TileClass(
            bounds
                .iter()
                .take_while(|b| per_thread > **b as i64)
                .count(),
        )
    }

    /// Every class the bounds make, smallest register tiles first.
    pub fn all(bounds: &[usize]) -> impl Iterator<Item = TileClass> {
        (0..=bounds.len()).map(TileClass)
    }

    /// The class's outputs per thread, as `..=16`, `17..=64` or `65..`.
    pub fn range(self, bounds: &[usize]) -> String {
        let low = self.0.checked_sub(1).map(|i| bounds[i] + 1);
        match (low, bounds.get(self.0)) {
            (None, Some(high)) => format!("..={high}"),
            (Some(low), Some(high)) => format!("{low}..={high}"),
            (Some(low), None) => format!("{low}.."),
            (None, None) => "..".into(),
        }
    }
}

/// What makes two candidates one tiling for [`EvolutionarySearch::pick_batch`]: the
/// sketch's structure and the tile decisions (the other decisions aside).
type TilingKey = (usize, Vec<Vec<i64>>);

fn tiling_key(m: &Member) -> TilingKey {
    let tiles = m
        .trace
        .insts
        .iter()
        .filter_map(|inst| match &inst.decision {
            Some(Decision::Tile(t)) => Some(t.clone()),
            _ => None,
        })
        .collect();
    (m.structure, tiles)
}

/// A branch of the sketches, what makes candidates one for
/// [`EvolutionarySearch::pick_batch`]'s `branch_share`: whether the trace rewrites a
/// convolution as its GEMM (`im2col`) and splits a reduction (`rfactor`: split-K), and how
/// many kernels the program launches (operands padded, transposed or stored channels last
/// by kernels of their own add theirs). Variants that differ in how a copy is scheduled
/// (a tiled transpose or a direct one) or tiled are one branch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Branch {
    pub gemm_view: bool,
    pub split_k: bool,
    pub kernels: usize,
}

impl Branch {
    pub fn of(trace: &Trace, lowered: &Lowered) -> Branch {
        let has = |kind: InstKind| trace.insts.iter().any(|i| i.kind == kind);
        Branch {
            gemm_view: has(InstKind::Im2col),
            split_k: has(InstKind::Rfactor),
            kernels: lowered.kernels.len(),
        }
    }
}

impl std::fmt::Display for Branch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let view = if self.gemm_view { "view" } else { "loops" };
        let split = if self.split_k { " split-K" } else { "" };
        write!(f, "{view}{split}, {} kernels", self.kernels)
    }
}

/// Whether two traces have the same instructions and rvs, their decisions aside.
fn same_structure(a: &Trace, b: &Trace) -> bool {
    a.insts.len() == b.insts.len()
        && a.rvs == b.rvs
        && a.insts.iter().zip(&b.insts).all(|(x, y)| {
            x.kind == y.kind && x.inputs == y.inputs && x.attrs == y.attrs && x.outputs == y.outputs
        })
}

/// The replay memo's key: a trace's structure and its decisions.
type MemoKey = (usize, Vec<Decision>);

/// A mutant after the memo lookup: its mutator, its memo key, and where its answer is.
type Lookup = (MutatorKind, MemoKey, Answer);

/// Where a mutant's answer comes from: the memo, or the evaluation of this wave's
/// source at an index (shared by the wave's repeats of one mutant).
enum Answer {
    Known(Memo),
    Evaluated(usize),
}

/// The instruction whose decision `mutant` changed from `parent`'s.
fn changed_at(parent: &Trace, mutant: &Trace) -> Option<usize> {
    parent
        .insts
        .iter()
        .zip(&mutant.insts)
        .position(|(a, b)| a.decision != b.decision)
}

fn memo_key(structure: usize, trace: &Trace) -> MemoKey {
    (
        structure,
        trace.decisions().into_iter().map(|(_, d)| d).collect(),
    )
}

impl SearchStrategy for EvolutionarySearch {
    fn name(&self) -> &'static str {
        "evolutionary"
    }

    fn propose(&mut self, n: usize, is_known: &mut dyn FnMut(&Trace) -> bool) -> Proposal {
        let mut out = Proposal::default();
        if n == 0 {
            return out;
        }
        if self.sketches.is_empty() {
            out.instantiation_failures += 1;
            out.exhausted = true;
            return out;
        }
        let start = Instant::now();
        self.times = RoundTimes::default();
        let mut rng = ChaCha8Rng::seed_from_u64(splitmix(self.seed ^ splitmix(self.round)));
        self.round += 1;
        let mut round = Round {
            population: self.params.population_for(n),
            ..Round::default()
        };
        let mut pop = self.initial_population(&mut round, &mut rng, &mut out);
        for _ in 0..self.params.generations {
            self.score(&mut round, &mut out);
            pop = self.next_generation(&mut round, &pop, &mut rng, &mut out);
            self.last.generations.push(pop.len());
        }
        self.last.distinct = round.entries.len();
        self.score(&mut round, &mut out);
        let picking = Instant::now();
        let picks = self.pick_batch(&round, n, is_known, &mut out);
        let sources: Vec<_> = picks
            .par_iter()
            .map(|i| postproc::generate(&round.entries[*i].member.lowered, &self.target))
            .collect();
        for (i, source) in picks.into_iter().zip(sources) {
            let m = &round.entries[i].member;
            match source {
                Ok(source) => out.candidates.push(Candidate {
                    trace: m.trace.clone(),
                    ir_hash: m.hash.clone(),
                    verified: Verified {
                        lowered: m.lowered.clone(),
                        source,
                    },
                }),
                Err(r) => out.rejected.push((m.trace.clone(), r)),
            }
        }
        out.exhausted = out.candidates.len() + out.rejected.len() < n;
        self.times.batch += picking.elapsed();
        // Thousands of lowered programs: freed on every thread, not the caller's alone.
        round.entries.into_par_iter().for_each(drop);
        self.times.total = start.elapsed();
        out
    }

    fn feedback(&mut self, results: &[MeasuredResult]) {
        for r in results {
            self.seen.insert(r.ir_hash.clone());
            let seconds = r.median_seconds.filter(|s| s.is_finite() && *s > 0.0);
            match self.measured.get_mut(&r.ir_hash) {
                Some(m) => {
                    if let Some(s) = seconds {
                        m.seconds = Some(m.seconds.map_or(s, |old| old.min(s)));
                    }
                }
                None => {
                    self.measured.insert(
                        r.ir_hash.clone(),
                        Measured {
                            trace: r.trace.clone(),
                            seconds,
                            member: None,
                        },
                    );
                }
            }
        }
    }

    fn set_scorer(&mut self, scorer: Option<Arc<dyn Scorer>>) {
        self.scorer = scorer;
    }

    fn seed_traces(&mut self, traces: &[Trace]) {
        self.pending_transfer.extend_from_slice(traces);
    }

    fn uses_model(&self) -> bool {
        self.scorer.is_some()
    }

    fn ranks_with_a_model(&self) -> bool {
        true
    }

    fn mutator_stats(&self) -> Vec<(&'static str, usize, usize)> {
        self.stats.rows()
    }
}
