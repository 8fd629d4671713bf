//! Tuning a whole network: one [`Session`] per task, and Ansor's gradient task scheduler
//! (`crate::network::scheduler`) giving each round to the task whose improvement lowers
//! the network's estimated latency (sum of weight x best latency) most, after a warm-up
//! round over every task. The [`Tuner`]'s trial budget is the network's; its batch is a
//! round; `patience` and the failure limit close a task, not the run. One cost model,
//! trained on the records of every task (and of other workloads), serves all tasks: that
//! and the warm start of each session (other workloads' best traces replayed) is the
//! transfer between tasks.

use super::learn::Learner;
use super::report::{StopReason, TuneReport};
use super::session::{RoundPlan, Session};
use super::warm_start::Seeds;
use super::{time_seed, TuneError, Tuner};
use crate::database::Database;
use crate::network::{choose, estimated_latency, Choice, SchedulerParams, Task, TaskHistory};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::time::{Duration, Instant};

/// One round of a network run, as the progress display and the report show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetworkRound {
    pub round: usize,
    /// The index of the task that had it.
    pub task: usize,
    /// Why the scheduler chose it (`warm-up`, `gradient`, `explore`, `tie`).
    pub reason: &'static str,
    /// Candidates measured in the round.
    pub trials: usize,
    /// Candidates measured in the run so far.
    pub total_trials: usize,
    /// The task's best latency after the round.
    pub task_best_seconds: Option<f64>,
    /// The network's estimated latency after the round (once every task has a best).
    pub estimated_seconds: Option<f64>,
    /// Seconds since the run started when the round's results were in.
    pub elapsed_seconds: f64,
}

/// One task's outcome.
#[derive(Clone, Debug)]
pub struct TaskOutcome {
    /// A short name (`Task::label`).
    pub label: String,
    pub workload_key: String,
    pub weight: u32,
    pub report: TuneReport,
    /// Why the task took no more rounds, if it was closed before the run ended.
    pub closed: Option<StopReason>,
}

/// The outcome of a network run.
#[derive(Clone, Debug)]
pub struct NetworkReport {
    pub stop: StopReason,
    pub tasks: Vec<TaskOutcome>,
    pub rounds: Vec<NetworkRound>,
    /// From the start to the first round: every task opened (its space, the database's
    /// records fed to its strategy) and the cost model loaded.
    pub opened: Duration,
    pub elapsed: Duration,
}

impl NetworkReport {
    /// Candidates measured in the run.
    pub fn trials(&self) -> usize {
        self.tasks.iter().map(|t| t.report.trials).sum()
    }

    /// Sum of weight x best latency, once every task has a best.
    pub fn estimated_seconds(&self) -> Option<f64> {
        estimated_latency(
            self.tasks
                .iter()
                .map(|t| (t.weight, t.report.best.as_ref().map(|b| b.median_seconds))),
        )
    }

    /// The JSON form `tessel tune --network --report-json` writes.
    pub fn to_json(&self, network: &str) -> serde_json::Value {
        let tasks: Vec<serde_json::Value> = self
            .tasks
            .iter()
            .map(|t| {
                let best = t.report.best.as_ref().map(|b| b.median_seconds);
                serde_json::json!({
                    "task": t.label,
                    "weight": t.weight,
                    "trials": t.report.trials,
                    "rounds": t.report.rounds,
                    "best_seconds": best,
                    "weighted_seconds": best.map(|b| f64::from(t.weight) * b),
                    "closed": t.closed.map(StopReason::describe),
                    "report": t.report.to_json(&t.label, &t.workload_key),
                })
            })
            .collect();
        serde_json::json!({
            "network": network,
            "stop": self.stop,
            "stop_reason": self.stop.describe(),
            "trials": self.trials(),
            "elapsed_seconds": self.elapsed.as_secs_f64(),
            "opened_seconds": self.opened.as_secs_f64(),
            "estimated_seconds": self.estimated_seconds(),
            "tasks": tasks,
            "rounds": self.rounds,
        })
    }
}

/// A network run's state between rounds.
pub(super) struct NetworkRun<'t> {
    pub tasks: &'t [Task],
    pub sessions: Vec<Session<'t>>,
    pub histories: Vec<TaskHistory>,
    /// Why each closed task takes no more rounds.
    pub closed: Vec<Option<StopReason>>,
    pub learner: Learner,
    pub notes: Vec<String>,
    pub params: SchedulerParams,
    pub rng: ChaCha8Rng,
    pub rounds: Vec<NetworkRound>,
    /// Candidates measured so far.
    pub total: usize,
    pub start: Instant,
}

/// A new best of task `from`, found in this run, seeds the other open tasks' searches
/// where it replays once fitted to their loops (a GEMM's on another GEMM, not on a conv):
/// the database's bests seed each task when it opens, this one only now exists.
fn transfer_best(run: &mut NetworkRun, from: usize) {
    let Some(best) = run.sessions[from]
        .report
        .best
        .as_ref()
        .filter(|b| b.this_run)
    else {
        return;
    };
    let trace = best.trace.clone();
    for (j, s) in run.sessions.iter_mut().enumerate() {
        if j != from && run.histories[j].open {
            s.seed(&trace);
        }
    }
}

/// The task groups the scheduler's estimate from similar tasks uses: workloads whose
/// canonical text is equal once the numbers (shapes) are taken out.
fn group_of(task: &Task) -> String {
    task.workload
        .canonical_text()
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .collect()
}

impl Tuner<'_> {
    /// Tunes `tasks` as one network within this tuner's trial budget, calling
    /// `on_round` after every round.
    pub fn tune_network(
        &mut self,
        tasks: &[Task],
        mut on_round: impl FnMut(&NetworkRound, &Task),
    ) -> Result<NetworkReport, TuneError> {
        let mut given = self.db.take();
        let report = match given.as_deref_mut() {
            Some(db) => self.run_network(db, tasks, &mut on_round),
            None => self.run_network(&mut Database::open_in_memory()?, tasks, &mut on_round),
        };
        self.db = given;
        report
    }

    fn run_network(
        &mut self,
        db: &mut Database,
        tasks: &[Task],
        on_round: &mut dyn FnMut(&NetworkRound, &Task),
    ) -> Result<NetworkReport, TuneError> {
        let start = Instant::now();
        let seed = self.seed.unwrap_or_else(time_seed);
        let mut sessions = Vec::with_capacity(tasks.len());
        // Nothing is measured before every task is open: the seeds are read once.
        let mut seeds = Seeds::new(self.target.kind());
        for (i, t) in tasks.iter().enumerate() {
            sessions.push(self.open(db, &t.workload, seed.wrapping_add(i as u64), &mut seeds)?);
        }
        let Some(target) = sessions.first().map(|s| s.report.target.clone()) else {
            return Err(TuneError::Target("the network has no task".into()));
        };
        let mut notes = Vec::new();
        let focus: Vec<String> = tasks.iter().map(|t| t.workload.key()).collect();
        let learner = Learner::start(
            self.models.clone(),
            self.model_policy,
            db,
            &target,
            &focus,
            &mut notes,
        )?;
        let mut run = NetworkRun {
            tasks,
            histories: tasks
                .iter()
                .zip(&sessions)
                .map(|(t, s)| TaskHistory {
                    weight: f64::from(t.weight),
                    flops: t.workload.flops(),
                    group: group_of(t),
                    curve: Vec::new(),
                    before: s.report.best.as_ref().map(|b| b.median_seconds),
                    prior_rounds: s.report.fed_back_at_start.div_ceil(self.batch.max(1)),
                    open: true,
                })
                .collect(),
            sessions,
            closed: vec![None; tasks.len()],
            learner,
            notes,
            params: SchedulerParams {
                policy: self.task_policy,
                ..SchedulerParams::default()
            },
            rng: ChaCha8Rng::seed_from_u64(seed),
            rounds: Vec::new(),
            total: 0,
            start,
        };
        let opened = start.elapsed();
        let overlap = self
            .overlap
            .unwrap_or_else(|| self.target.overlaps_by_default());
        let stop = if self.workers.len() > 1 || overlap {
            let devices = if self.workers.len() > 1 {
                self.workers.clone()
            } else {
                vec![self.measurer()?]
            };
            // With overlap, one slot of a device proposes while another compiles and the
            // third measures.
            let slots = if overlap { 3 } else { 1 };
            self.on_devices(db, &mut run, devices, slots, on_round)?
        } else {
            self.one_at_a_time(db, &mut run, on_round)?
        };
        let NetworkRun {
            sessions,
            closed,
            learner,
            mut notes,
            rounds,
            ..
        } = run;
        let model = learner.finish(db, &mut notes);
        let mut sessions = sessions;
        self.say_network(&mut sessions, &mut notes);
        let mut measurer = self.measurer()?;
        let mut outcomes = Vec::with_capacity(tasks.len());
        for ((s, t), closed) in sessions.into_iter().zip(tasks).zip(closed) {
            let mut report = s.report;
            report.model = model.clone();
            report.stop = closed.unwrap_or(stop);
            self.confirm_best(db, &t.workload, &mut measurer, &mut report)?;
            outcomes.push(TaskOutcome {
                label: t.label(),
                workload_key: t.workload.key(),
                weight: t.weight,
                report,
                closed,
            });
        }
        Ok(NetworkReport {
            stop,
            tasks: outcomes,
            rounds,
            opened,
            elapsed: start.elapsed(),
        })
    }

    /// One device, no overlap: each round runs to its end before the next is chosen.
    fn one_at_a_time(
        &mut self,
        db: &mut Database,
        run: &mut NetworkRun,
        on_round: &mut dyn FnMut(&NetworkRound, &Task),
    ) -> Result<StopReason, TuneError> {
        let mut measurer = self.measurer()?;
        loop {
            self.say_network(&mut run.sessions, &mut run.notes);
            if let Some(stop) = self.network_stop(run.total, run.start) {
                return Ok(stop);
            }
            let Some(choice) = choose(&run.histories, &run.params, &mut run.rng) else {
                return Ok(StopReason::SpaceExhausted);
            };
            let i = choice.task();
            let s = &mut run.sessions[i];
            let before = s.report.trials;
            let plan = RoundPlan {
                batch: self.batch,
                budget_left: self.trials - run.total,
                overlap: false,
            };
            let exhausted = s.round(db, &mut measurer, &mut run.learner, &mut run.notes, plan)?;
            self.after_round(run, choice, before, exhausted, on_round);
        }
    }

    /// Whether the whole run stops before the next round.
    pub(super) fn network_stop(&self, total: usize, start: Instant) -> Option<StopReason> {
        if total >= self.trials {
            Some(StopReason::TrialBudget)
        } else if self.time_limit.is_some_and(|t| start.elapsed() >= t) {
            Some(StopReason::TimeLimit)
        } else {
            None
        }
    }

    /// After task `choice.task()` had a round that started at `before` trials: its curve,
    /// whether it stays open, the round shown and kept.
    pub(super) fn after_round(
        &self,
        run: &mut NetworkRun,
        choice: Choice,
        before: usize,
        exhausted: Option<StopReason>,
        on_round: &mut dyn FnMut(&NetworkRound, &Task),
    ) {
        let i = choice.task();
        let s = &run.sessions[i];
        let trials = s.report.trials - before;
        run.total += trials;
        let best = s.report.best.as_ref().map(|b| b.median_seconds);
        let before_best = run.histories[i].known_best();
        run.histories[i].curve.push(best);
        run.closed[i] = exhausted.or_else(|| self.task_stop(s));
        if run.closed[i].is_some() {
            run.histories[i].open = false;
        }
        if best.is_some_and(|b| before_best.is_none_or(|p| b < p)) {
            transfer_best(run, i);
        }
        if exhausted.is_some() {
            // Nothing was measured: no round to show.
            return;
        }
        let r = NetworkRound {
            round: run.rounds.len() + 1,
            task: i,
            reason: choice.reason(),
            trials,
            total_trials: run.total,
            task_best_seconds: best,
            estimated_seconds: estimated_latency(
                run.tasks
                    .iter()
                    .zip(&run.histories)
                    .map(|(t, h)| (t.weight, h.known_best())),
            ),
            elapsed_seconds: run.start.elapsed().as_secs_f64(),
        };
        on_round(&r, &run.tasks[i]);
        run.rounds.push(r);
    }

    /// Why a task takes no more rounds, if it should not: too many failures in a row, or
    /// `patience` rounds without improvement.
    fn task_stop(&self, s: &Session) -> Option<StopReason> {
        if s.failures_in_a_row >= self.max_consecutive_failures {
            Some(StopReason::TooManyFailures)
        } else if self.patience.is_some_and(|p| s.stale_rounds >= p) {
            Some(StopReason::NoImprovement)
        } else {
            None
        }
    }

    /// Notes go to the caller once, and into the first task's report.
    pub(super) fn say_network(&mut self, sessions: &mut [Session], notes: &mut Vec<String>) {
        if let Some(first) = sessions.first_mut() {
            self.say(&mut first.report, notes);
        }
    }
}
