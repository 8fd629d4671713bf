//! A network tuned on one or several devices with rounds in flight at once: a few slots
//! (threads) per device, each working on a different task's round. A slot proposes the
//! task's batch (with the task's proposer, lent to it: the strategy, the keys of what is
//! measured, the job template; see `super::propose`), compiles it in a worker of its own,
//! then checks and times it on its device, which checks and times one round at a time
//! (`Measurer::measure_sharing`): with three slots per device, one proposes while another
//! compiles and the third measures. The scheduler's loop stays on the calling thread,
//! which owns the database (one writer) and the cost model: whenever a slot is idle it
//! chooses a task among those not in flight and lends it that task's proposer; whenever
//! a slot is done it records what was proposed and measured and feeds it back, exactly
//! as a round of a single workload does (`Session::prepare` and `Session::finish`, the
//! two halves of `Session::round`). The scheduler so chooses a round while others are
//! still out, on curves that do not have their results yet.
//!
//! Where the target does not overlap proposing with measuring (the CPU, whose timings a
//! busy proposer would disturb) and there is one device, the network tuner runs one
//! round at a time instead (`super::network`).

use super::measure::{self, Measured};
use super::network::NetworkRun;
use super::propose::Proposed;
use super::report::StopReason;
use super::session::Lent;
use super::{TuneError, Tuner};
use crate::database::Database;
use crate::measure::worker::{MeasureError, Measurer};
use crate::network::{choose, Choice, Task};
use crate::tune::NetworkRound;
use std::collections::BTreeMap;
use std::sync::{mpsc, Mutex};

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

/// What a slot sends back: which slot, which task, the loan, what it proposed and, if
/// that had candidates, what it measured.
struct Done {
    slot: usize,
    task: usize,
    lent: Lent,
    proposed: Proposed,
    measured: Option<Result<Measured, MeasureError>>,
}

/// A task's batch out on a worker.
struct InFlight {
    choice: Choice,
    before: usize,
}

/// A slot's round: propose with the lent proposer, compile what it proposed in the slot's
/// worker, then check and time it on the slot's device, waiting while another slot of
/// the device checks and times.
fn work(
    slot: usize,
    measurer: &mut Measurer,
    device: &Mutex<()>,
    task: usize,
    mut lent: Lent,
) -> Done {
    let proposed = lent.proposer.propose(lent.n);
    let measured = (!proposed.proposal.candidates.is_empty()).then(|| {
        let job = lent.proposer.job(&proposed.proposal, lent.give_up_above);
        measure::measure(measurer, &job, measure::Start::Shared(device))
    });
    Done {
        slot,
        task,
        lent,
        proposed,
        measured,
    }
}

impl Tuner<'_> {
    /// Runs `run` with `slots_per_device` threads per device (each proposing, compiling
    /// and then checking and timing a round of its own task; a device checks and times
    /// one round at a time) until the budget, the time limit or the open tasks run out;
    /// returns why it stopped.
    pub(super) fn on_devices(
        &mut self,
        db: &mut Database,
        run: &mut NetworkRun,
        devices: Vec<Measurer>,
        slots_per_device: usize,
        on_round: &mut dyn FnMut(&NetworkRound, &Task),
    ) -> Result<StopReason, TuneError> {
        let locks: Vec<Mutex<()>> = devices.iter().map(|_| Mutex::new(())).collect();
        std::thread::scope(|s| {
            let (done_tx, done_rx) = mpsc::channel::<Done>();
            let mut slots = Vec::new();
            for (measurer, device) in devices.iter().zip(&locks) {
                for _ in 0..slots_per_device.max(1) {
                    let slot = slots.len();
                    let (tx, rx) = mpsc::channel::<(usize, Lent)>();
                    let done = done_tx.clone();
                    let mut measurer = measurer.clone();
                    s.spawn(move || {
                        for (task, lent) in rx {
                            let back = work(slot, &mut measurer, device, task, lent);
                            if done.send(back).is_err() {
                                break;
                            }
                        }
                    });
                    slots.push(tx);
                }
            }
            drop(done_tx);
            self.dispatch_loop(db, run, &slots, &done_rx, on_round)
            // Dropping `slots` ends their threads once their round is measured.
        })
    }

    fn dispatch_loop(
        &mut self,
        db: &mut Database,
        run: &mut NetworkRun,
        slots: &[mpsc::Sender<(usize, Lent)>],
        done: &mpsc::Receiver<Done>,
        on_round: &mut dyn FnMut(&NetworkRound, &Task),
    ) -> Result<StopReason, TuneError> {
        let mut idle: Vec<usize> = (0..slots.len()).rev().collect();
        let mut in_flight: BTreeMap<usize, InFlight> = BTreeMap::new();
        // Candidates handed out, measured or not: the budget counts them (a batch out
        // counts as its full size until it is back).
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
                let n = self.batch.min(self.trials - handed_out);
                let before = run.sessions[i].report.trials;
                let lent = run.sessions[i].lend(&run.learner, n)?;
                handed_out += n;
                slots[w]
                    .send((i, lent))
                    .map_err(|_| TuneError::Target(format!("tuning slot {w} is gone")))?;
                idle.pop();
                in_flight.insert(i, InFlight { choice, before });
            }
            if in_flight.is_empty() {
                return Ok(stop.unwrap_or(StopReason::SpaceExhausted));
            }
            let back = done
                .recv()
                .map_err(|_| TuneError::Target("every tuning slot is gone".into()))?;
            let (w, i) = (back.slot, back.task);
            idle.push(w);
            let Some(out) = in_flight.remove(&i) else {
                return Err(TuneError::Target(format!(
                    "tuning slot {w} returned a batch of task {i} that was not out"
                )));
            };
            handed_out -= back.lent.n - back.proposed.proposal.candidates.len().min(back.lent.n);
            let s = &mut run.sessions[i];
            let prepared = s.take_back(db, &run.learner, back.lent, back.proposed)?;
            let exhausted = match (prepared, back.measured) {
                (Some(prepared), Some(measured)) => {
                    s.finish(db, &mut run.learner, &mut run.notes, prepared, measured?)?;
                    None
                }
                (None, _) => Some(StopReason::SpaceExhausted),
                (Some(_), None) => {
                    return Err(TuneError::Target(format!(
                        "tuning slot {w} did not measure a batch of task {i}"
                    )))
                }
            };
            self.after_round(run, out.choice, out.before, exhausted, on_round);
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
