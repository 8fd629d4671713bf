//! A network tuned on several devices at once: one measurement worker per device, each on
//! its own thread, measuring a different task's batch at a time. The scheduler's loop
//! stays on the calling thread, which owns the database (one writer) and the cost model:
//! whenever a worker is idle it chooses a task among those not in flight, proposes its
//! batch and hands the job over; whenever a worker is done it records the outcomes and
//! feeds them back, exactly as a round on one worker does ([`Session::prepare`] and
//! [`Session::finish`] are the two halves of [`Session::round`]).
//!
//! With one worker the network tuner takes `Session::round` instead, which also proposes
//! a task's next batch while its batch is measured.

use super::measure::{self, Measured};
use super::network::NetworkRun;
use super::report::StopReason;
use super::session::{Prepared, RoundPlan};
use super::{TuneError, Tuner};
use crate::database::Database;
use crate::measure::worker::{MeasureError, Measurer};
use crate::measure::Job;
use crate::network::{choose, Choice, Task};
use crate::tune::NetworkRound;
use std::collections::BTreeMap;
use std::sync::mpsc;

/// The devices `--devices` names: every one the driver shows, or a list of ordinals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Devices {
    All,
    List(Vec<usize>),
}

/// A `--devices` value that is neither `all` nor distinct ordinals.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not `all` or a list of distinct device numbers (e.g. 0,1)")]
pub struct DevicesError(pub String);

impl std::str::FromStr for Devices {
    type Err = DevicesError;
    fn from_str(s: &str) -> Result<Devices, DevicesError> {
        if s.trim() == "all" {
            return Ok(Devices::All);
        }
        let bad = || DevicesError(s.to_string());
        let list: Vec<usize> = s
            .split(',')
            .map(|x| x.trim().parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let mut sorted = list.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != list.len() {
            return Err(bad());
        }
        Ok(Devices::List(list))
    }
}

impl Devices {
    /// The ordinals, each checked to be the same kind of device as `target` (records
    /// are filed under one fingerprint).
    pub fn ordinals(&self, target: &super::TuneTarget) -> Result<Vec<usize>, TuneError> {
        let super::TuneTarget::Cuda { fingerprint, .. } = target else {
            return Err(TuneError::Target("--devices names CUDA devices".into()));
        };
        let list = match self {
            Devices::All => (0..crate::target::cuda::device_count()
                .map_err(|e| TuneError::Target(e.to_string()))?)
                .collect(),
            Devices::List(l) => l.clone(),
        };
        for &d in &list {
            let info = crate::target::cuda::CudaDeviceInfo::query(d)
                .map_err(|e| TuneError::Target(format!("device {d}: {e}")))?;
            if &info.fingerprint() != fingerprint {
                return Err(TuneError::Target(format!(
                    "device {d} ({}) is not the same device as device 0: tune each kind apart",
                    info.name
                )));
            }
        }
        Ok(list)
    }
}

/// A worker's result: which worker, which task, what it measured.
type Done = (usize, usize, Result<Measured, MeasureError>);

/// A batch out on a worker.
struct InFlight {
    prepared: Prepared,
    choice: Choice,
    before: usize,
}

impl Tuner<'_> {
    /// Runs `run` with one thread per worker until the budget, the time limit or the
    /// open tasks run out; returns why it stopped.
    pub(super) fn on_devices(
        &mut self,
        db: &mut Database,
        run: &mut NetworkRun,
        workers: Vec<Measurer>,
        on_round: &mut dyn FnMut(&NetworkRound, &Task),
    ) -> Result<StopReason, TuneError> {
        std::thread::scope(|s| {
            let (done_tx, done_rx) = mpsc::channel::<Done>();
            let mut jobs = Vec::with_capacity(workers.len());
            for (w, mut m) in workers.into_iter().enumerate() {
                let (tx, rx) = mpsc::channel::<(usize, Job)>();
                let done = done_tx.clone();
                s.spawn(move || {
                    for (task, job) in rx {
                        if done
                            .send((w, task, measure::measure(&mut m, &job)))
                            .is_err()
                        {
                            break;
                        }
                    }
                });
                jobs.push(tx);
            }
            drop(done_tx);
            self.dispatch_loop(db, run, &jobs, &done_rx, on_round)
            // Dropping `jobs` ends the workers' threads once their batch is measured.
        })
    }

    fn dispatch_loop(
        &mut self,
        db: &mut Database,
        run: &mut NetworkRun,
        jobs: &[mpsc::Sender<(usize, Job)>],
        done: &mpsc::Receiver<Done>,
        on_round: &mut dyn FnMut(&NetworkRound, &Task),
    ) -> Result<StopReason, TuneError> {
        let mut idle: Vec<usize> = (0..jobs.len()).rev().collect();
        let mut in_flight: BTreeMap<usize, InFlight> = BTreeMap::new();
        // Candidates handed out, measured or not: the budget counts them.
        let mut handed_out = run.total;
        loop {
            self.say_network(&mut run.sessions, &mut run.notes);
            let mut stop = None;
            while let Some(&w) = idle.last() {
                stop = self.network_stop(handed_out, run.start);
                if stop.is_some() {
                    break;
                }
                // Tasks in flight are not chosen again until their batch is back.
                let mut view = run.histories.clone();
                for t in in_flight.keys() {
                    view[*t].open = false;
                }
                let Some(choice) = choose(&view, &run.params, &mut run.rng) else {
                    stop = Some(StopReason::SpaceExhausted);
                    break;
                };
                let i = choice.task();
                let plan = RoundPlan {
                    batch: self.batch,
                    budget_left: self.trials - handed_out,
                    overlap: false,
                };
                let before = run.sessions[i].report.trials;
                let Some(prepared) = run.sessions[i].prepare(db, &run.learner, plan)? else {
                    self.after_round(
                        run,
                        choice,
                        before,
                        Some(StopReason::SpaceExhausted),
                        on_round,
                    );
                    continue;
                };
                handed_out += prepared.job.candidates.len();
                jobs[w]
                    .send((i, prepared.job.clone()))
                    .map_err(|_| TuneError::Target(format!("measurement worker {w} is gone")))?;
                idle.pop();
                in_flight.insert(
                    i,
                    InFlight {
                        prepared,
                        choice,
                        before,
                    },
                );
            }
            if in_flight.is_empty() {
                return Ok(stop.unwrap_or(StopReason::SpaceExhausted));
            }
            let (w, i, measured) = done
                .recv()
                .map_err(|_| TuneError::Target("every measurement worker is gone".into()))?;
            idle.push(w);
            let Some(back) = in_flight.remove(&i) else {
                return Err(TuneError::Target(format!(
                    "measurement worker {w} returned a batch of task {i} that was not out"
                )));
            };
            let s = &mut run.sessions[i];
            s.finish(
                db,
                &mut run.learner,
                &mut run.notes,
                back.prepared,
                measured?,
            )?;
            self.after_round(run, back.choice, back.before, None, on_round);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lists_parse_or_say_why_not() {
        assert_eq!("all".parse(), Ok(Devices::All));
        assert_eq!("0".parse(), Ok(Devices::List(vec![0])));
        assert_eq!("1, 0".parse(), Ok(Devices::List(vec![1, 0])));
        assert_eq!("0,0".parse::<Devices>(), Err(DevicesError("0,0".into())));
        assert_eq!("gpu0".parse::<Devices>(), Err(DevicesError("gpu0".into())));
    }

    #[test]
    fn devices_are_refused_on_the_cpu() {
        let e = Devices::All
            .ordinals(&super::super::TuneTarget::cpu())
            .unwrap_err();
        assert_eq!(e.to_string(), "target: --devices names CUDA devices");
    }
}
