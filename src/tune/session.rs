//! One workload's tuning state between rounds: its strategy, the job its batches share,
//! the report so far and the batch proposed ahead. [`Tuner`](super::Tuner) runs one
//! session round after round; the network tuner (`super::network`) keeps one per task
//! and gives each round to the task its scheduler chooses.

use super::learn::Learner;
use super::measure::{self, JobTemplate, Measured};
use super::propose::{Proposed, Proposer};
use super::record::Recorder;
use super::report::{MutatorUse, RoundStats, StopReason, TuneReport};
use super::warm_start::Seeds;
use super::{best_in_db, empty_report, has_design_space, TuneError, Tuner};
use crate::database::{Database, TargetKey};
use crate::ir::Program;
use crate::measure::worker::{Compiling, Measurer};
use crate::measure::{Job, TimingConfig};
use crate::schedule::Trace;
use crate::search::Proposal;
use crate::workload::Workload;
use std::time::{Duration, Instant};

/// How one round may run.
#[derive(Copy, Clone, Debug)]
pub(crate) struct RoundPlan {
    /// Candidates to measure in a round.
    pub batch: usize,
    /// Candidates the session may still measure (this round and later ones).
    pub budget_left: usize,
    /// Whether the next batch is proposed while this one is measured.
    pub overlap: bool,
}

/// A batch proposed and recorded as proposed, ready to measure: what the round knows so
/// far.
pub(crate) struct Prepared {
    proposal: Proposal,
    round: RoundStats,
    start: Instant,
}

/// A session's proposer out on a measurement worker's thread (`super::devices`): the
/// worker proposes up to `n` candidates and measures them.
pub(crate) struct Lent {
    pub proposer: Proposer,
    pub n: usize,
    pub give_up_above: Option<f64>,
    /// When the round began.
    pub start: Instant,
}

/// One workload being tuned.
pub(crate) struct Session<'w> {
    pub w: &'w Workload,
    key: TargetKey,
    /// Candidates slower than this many times the best known are given up after their
    /// probe runs (see `Tuner::with_give_up_factor`).
    give_up_factor: Option<f64>,
    /// The strategy, what it must not propose again and the job template; `None` while
    /// lent to a measurement worker.
    proposer: Option<Proposer>,
    /// The canonical program the candidates schedule (other tasks' traces are fitted to it).
    program: Program,
    /// Other tasks' traces that came while the proposer was lent, handed over on its return.
    seeds_waiting: Vec<Trace>,
    pub report: TuneReport,
    /// The batch proposed while the last one was measured.
    pending: Option<Proposed>,
    /// On CUDA, the worker compiling `pending` since it was proposed.
    compiling: Option<Compiling>,
    pub stale_rounds: usize,
    pub failures_in_a_row: usize,
    /// Candidates the model had scored when the last batch was handed over.
    scored_mark: usize,
    /// The learner's model generation installed in the strategy.
    pub model_generation: usize,
    /// Wall time spent on this session (opening it and its rounds).
    pub busy: Duration,
}

impl Tuner<'_> {
    /// Opens a session for `w`: the canonical program, its design space, the job its
    /// batches share, the strategy fed with what the database knows (`seeds`: the other
    /// workloads' best traces, read once for the sessions a run opens together).
    pub(crate) fn open<'w>(
        &self,
        db: &Database,
        w: &'w Workload,
        seed: u64,
        seeds: &mut Seeds,
    ) -> Result<Session<'w>, TuneError> {
        let opening = Instant::now();
        // Candidates schedule the canonical program (tensors t0, t1, ...) so that their
        // records replay anywhere.
        let canonical = crate::workload::parse(&w.canonical_text())?;
        let program = canonical.to_program();
        let key = self.target.key()?;
        let space = match self.space.clone() {
            Some(space) => self.target.adapt_space(space)?,
            None => self.target.default_space()?,
        };
        has_design_space(&space, &program, seed)?;
        let limits = self.target.limits();
        let timing = TimingConfig {
            give_up_factor: self.give_up_factor,
            ..self.timing.clone()
        };
        let template = JobTemplate::new(
            &canonical,
            self.target.device(),
            &space,
            &limits,
            &timing,
            self.compile_timeout,
            seed,
        )?;
        let mut strategy = self.strategy.build(space, limits, program.clone(), seed);
        let mut report = empty_report(&key, strategy.name(), w);
        report.best = best_in_db(db, w, &key)?;
        let warm = super::warm_start::warm_start(&mut *strategy, db, w, &program, &key, seeds)?;
        report.fed_back_at_start = warm.fed_back;
        report.seed_traces = warm.seeds;
        let known = db.measured_keys(w, &key)?;
        Ok(Session {
            w,
            key,
            give_up_factor: self.give_up_factor,
            proposer: Some(Proposer::new(strategy, known, template)),
            program,
            seeds_waiting: Vec::new(),
            report,
            pending: None,
            compiling: None,
            stale_rounds: 0,
            failures_in_a_row: 0,
            scored_mark: 0,
            model_generation: 0,
            busy: opening.elapsed(),
        })
    }
}

impl Session<'_> {
    /// The proposer; an error if it is out on a worker (the network tuner never chooses a
    /// task whose batch is in flight).
    fn proposer(&mut self) -> Result<&mut Proposer, TuneError> {
        self.proposer.as_mut().ok_or_else(|| {
            TuneError::Target(format!(
                "{}: a round began while the last one was still out",
                self.w.key()
            ))
        })
    }

    /// Hands the learner's newest model to the strategy if it does not have it yet.
    pub fn take_model(&mut self, learner: &Learner) -> Result<(), TuneError> {
        if self.model_generation < learner.generation() {
            learner.install_current(&mut *self.proposer()?.strategy);
            self.model_generation = learner.generation();
        }
        Ok(())
    }

    /// The latency above which a candidate's timing stops after its probe runs: the give-up
    /// factor times the best known (the database's or this session's).
    fn give_up_above(&self) -> Option<f64> {
        self.give_up_factor
            .zip(self.report.best.as_ref())
            .map(|(f, b)| f * b.median_seconds)
    }

    /// Stage 1 of a round: the batch to measure (proposed now, or ahead while the last
    /// one was measured) and its job; `None` when the strategy had nothing new.
    pub fn prepare(
        &mut self,
        db: &mut Database,
        learner: &Learner,
        plan: RoundPlan,
    ) -> Result<Option<(Prepared, Job)>, TuneError> {
        let start = Instant::now();
        self.take_model(learner)?;
        let mut round = self.next_round();
        let n = plan.batch.min(plan.budget_left);
        let proposed = match self.pending.take() {
            Some(p) => {
                round.overlapped_propose_seconds = p.took.as_secs_f64();
                p
            }
            None => {
                let p = self.proposer()?.propose(n);
                round.seconds.propose = p.took.as_secs_f64();
                p
            }
        };
        let Some(prepared) = self.accept(db, learner, proposed.proposal, n, round, start)? else {
            return Ok(None);
        };
        let give_up = self.give_up_above();
        let job = self.proposer()?.job(&prepared.proposal, give_up);
        Ok(Some((prepared, job)))
    }

    /// Lends the proposer to a measurement worker, which proposes up to `n` candidates
    /// for this session and measures them; [`Session::take_back`] ends the loan.
    pub fn lend(&mut self, learner: &Learner, n: usize) -> Result<Lent, TuneError> {
        let start = Instant::now();
        self.take_model(learner)?;
        let give_up_above = self.give_up_above();
        let proposer = self
            .proposer
            .take()
            .ok_or_else(|| TuneError::Target(format!("{}: lent twice", self.w.key())))?;
        Ok(Lent {
            proposer,
            n,
            give_up_above,
            start,
        })
    }

    /// Ends a loan: the proposer comes back with what it proposed, which is recorded as
    /// [`Session::prepare`] records a batch; `None` when it had nothing new.
    pub fn take_back(
        &mut self,
        db: &mut Database,
        learner: &Learner,
        lent: Lent,
        proposed: Proposed,
    ) -> Result<Option<Prepared>, TuneError> {
        let mut proposer = lent.proposer;
        proposer
            .strategy
            .seed_traces(&std::mem::take(&mut self.seeds_waiting));
        self.proposer = Some(proposer);
        let mut round = self.next_round();
        round.seconds.propose = proposed.took.as_secs_f64();
        self.accept(db, learner, proposed.proposal, lent.n, round, lent.start)
    }

    /// Seeds the strategy with another task's trace found during this run, fitted to this
    /// workload's loops (as [`super::warm_start`] does with the database's at the start),
    /// where it replays here. A trace for a strategy out on a worker waits for its return.
    pub fn seed(&mut self, trace: &Trace) {
        let fitted = super::warm_start::fit(vec![trace.clone()], &self.program);
        self.report.seed_traces += fitted.len();
        match self.proposer.as_mut() {
            Some(p) => p.strategy.seed_traces(&fitted),
            None => self.seeds_waiting.extend(fitted),
        }
    }

    fn next_round(&self) -> RoundStats {
        RoundStats {
            round: self.report.rounds + 1,
            ..RoundStats::default()
        }
    }

    /// Records what proposing a batch of at most `n` produced besides candidates; the
    /// batch to measure, or `None` when it has no candidate.
    fn accept(
        &mut self,
        db: &mut Database,
        learner: &Learner,
        mut proposal: Proposal,
        n: usize,
        mut round: RoundStats,
        start: Instant,
    ) -> Result<Option<Prepared>, TuneError> {
        // A batch proposed ahead may be more than the budget left by now (in a network,
        // other tasks had rounds since).
        proposal.candidates.truncate(n);
        round.scored = learner.scored() - self.scored_mark;
        self.scored_mark = learner.scored();
        let recording = Instant::now();
        Recorder {
            workload: self.w,
            target: &self.key,
        }
        .proposal(db, &proposal, &mut self.report, &mut round)?;
        let proposer = self.proposer()?;
        for (trace, _) in &proposal.rejected {
            proposer.recorded(trace);
        }
        round.seconds.record += recording.elapsed().as_secs_f64();
        if proposal.candidates.is_empty() {
            self.busy += start.elapsed();
            return Ok(None);
        }
        self.report.rounds += 1;
        Ok(Some(Prepared {
            proposal,
            round,
            start,
        }))
    }

    /// Stages 5 and 6 of a round: records the outcomes of a prepared batch and feeds
    /// them to the strategy and the learner.
    pub fn finish(
        &mut self,
        db: &mut Database,
        learner: &mut Learner,
        notes: &mut Vec<String>,
        prepared: Prepared,
        measured: Measured,
    ) -> Result<(), TuneError> {
        let Prepared {
            proposal,
            mut round,
            start,
            ..
        } = prepared;
        round.seconds.compile = measured.compile.as_secs_f64();
        round.seconds.device_wait = measured.device_wait.as_secs_f64();
        round.seconds.check_time = measured.check_time.as_secs_f64();
        round.given_up = measured.given_up;
        self.report.given_up += measured.given_up;
        round.long_enough = measured.long_enough;
        self.report.long_enough += measured.long_enough;
        round.timed_run_seconds = measured.timed_runs.as_secs_f64();
        self.report.timed_run_seconds += round.timed_run_seconds;
        // 5. record.
        let best_before = self.report.best.as_ref().map(|b| b.median_seconds);
        let recording = Instant::now();
        let results = Recorder {
            workload: self.w,
            target: &self.key,
        }
        .outcomes(
            db,
            &proposal.candidates,
            measured.outcomes,
            &mut self.report,
            &mut round,
            &mut self.failures_in_a_row,
        )?;
        round.seconds.record += recording.elapsed().as_secs_f64();
        let proposer = self.proposer()?;
        for c in &proposal.candidates {
            proposer.recorded(&c.trace);
        }
        // 6. learn.
        let learning = Instant::now();
        learner.after_round(db, &mut *proposer.strategy, &results, notes)?;
        self.report.mutators = MutatorUse::from_stats(proposer.strategy.mutator_stats());
        self.model_generation = learner.generation();
        round.seconds.learn = learning.elapsed().as_secs_f64();
        if round.best_seconds.is_some() && round.best_seconds != best_before {
            self.stale_rounds = 0;
        } else {
            self.stale_rounds += 1;
        }
        let report = &mut self.report;
        report.stage_seconds.add(&round.seconds);
        report.overlapped_propose_seconds += round.overlapped_propose_seconds;
        report.round_stats.push(round);
        self.busy += start.elapsed();
        report.elapsed = self.busy;
        Ok(())
    }

    /// One round on `measurer`: prepare, measure (proposing the next batch meanwhile when
    /// `plan.overlap`, and on CUDA starting a worker that compiles it as soon as it is
    /// proposed, so that its compiles overlap this batch's checking and timing), finish.
    /// Returns `Some(SpaceExhausted)` when the strategy had nothing new to propose.
    pub fn round(
        &mut self,
        db: &mut Database,
        measurer: &mut Measurer,
        learner: &mut Learner,
        notes: &mut Vec<String>,
        plan: RoundPlan,
    ) -> Result<Option<StopReason>, TuneError> {
        // 1. propose.
        let Some((mut prepared, job)) = self.prepare(db, learner, plan)? else {
            return Ok(Some(StopReason::SpaceExhausted));
        };
        // 2-4. build, check, time; the next batch is proposed meanwhile.
        let following = plan.batch.min(
            plan.budget_left
                .saturating_sub(prepared.proposal.candidates.len()),
        );
        let this = match self.compiling.take() {
            Some(compiling) => measure::Start::Compiled(compiling),
            None => measure::Start::Fresh,
        };
        let compile_ahead = matches!(job.device, crate::measure::Device::Cuda { .. });
        let mut ahead = measurer.clone();
        let give_up = self.give_up_above();
        let proposer = self.proposer()?;
        let (measured, next) = std::thread::scope(|s| {
            let proposer = (plan.overlap && following > 0).then(|| {
                s.spawn(move || {
                    let next = proposer.propose(following);
                    // A worker that cannot start now is started again next round.
                    let compiling = (compile_ahead && !next.proposal.candidates.is_empty())
                        .then(|| ahead.start_compiling(&proposer.job(&next.proposal, give_up)))
                        .and_then(Result::ok);
                    Ok((next, compiling))
                })
            });
            let measured = measure::measure(measurer, &job, this);
            let waited = Instant::now();
            let next = proposer.map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(TuneError::Target("the proposer panicked".into())))
            });
            (measured, next.map(|n| (n, waited.elapsed())))
        });
        let measured = measured?;
        if let Some((next, waited)) = next {
            let (next, compiling) = next?;
            // Proposing that outlasted the measurement held up the loop.
            prepared.round.seconds.propose += waited.as_secs_f64();
            self.pending = Some(next);
            self.compiling = compiling;
        }
        // 5-6. record, learn.
        self.finish(db, learner, notes, prepared, measured)?;
        debug_assert!({
            let r = self
                .report
                .round_stats
                .last()
                .map_or(0.0, |r| r.seconds.total());
            r <= self.busy.as_secs_f64() + 1e-6
        });
        Ok(None)
    }
}
