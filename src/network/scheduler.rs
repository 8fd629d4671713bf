//! Ansor's gradient task scheduler (Zheng et al., OSDI 2020, section 6; TVM's
//! `GradientBasedTaskScheduler`): which task of a network gets the next round of tuning.
//!
//! The objective is the network's estimated latency, `f = sum_i w_i g_i` with `g_i` the
//! best latency of task `i` and `w_i` its weight. Every task first gets one round (the
//! warm-up). Then, with probability `epsilon` a random open task gets the round
//! (exploration); otherwise the task whose next round is expected to lower `f` most,
//! that is the most negative
//!
//! ```text
//! df/dt_i ~= w_i * (alpha * backward_i + (1 - alpha) * forward_i)
//! backward_i = (g_i(t_i) - g_i(t_i - window)) / window      (its curve's recent slope)
//! forward_i  = min(g_i - g_i / t_i,                          (as much again as so far)
//!                  beta * flops_i / best FLOP/s of similar tasks) - g_i
//! ```
//!
//! with `t_i` the rounds the task had, those of earlier runs (its records in the database,
//! in rounds of this run's size) included, and the backward slope read from this run's
//! rounds. A task whose best is known before the run (a resumed run, a task tuned before)
//! needs no warm-up round. Similar tasks compute the same thing on other shapes
//! ([`TaskHistory::group`]); a task with no similar one has no second estimate.
//! A task without a measured latency counts as [`UNMEASURED`] seconds, as in Ansor, so
//! it is preferred until something passes (or the tuner closes it). When every gradient
//! is equal the round goes to a random open task.
//!
//! [`Policy::RoundRobin`] instead gives equal shares, the baseline to compare with.
//!
//! The choice is a pure function of the histories and a random source, tested without
//! measuring anything.

use rand::Rng;

/// The latency a task without any passing candidate counts as (Ansor's 1e10).
pub const UNMEASURED: f64 = 1e10;

/// How rounds are allocated after the warm-up.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Ansor's gradient (the default).
    #[default]
    Gradient,
    /// Equal shares: the open task with the fewest rounds (the baseline the gradient
    /// scheduler is compared with).
    RoundRobin,
}

/// The scheduler's parameters (Ansor's defaults).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct SchedulerParams {
    pub policy: Policy,
    /// Weight of the backward (observed) slope against the forward estimate: 0.2.
    pub alpha: f64,
    /// How optimistic the estimate from similar tasks is: 2.
    pub beta: f64,
    /// Rounds the backward slope spans: 3.
    pub window: usize,
    /// Probability of a random round: 0.05.
    pub epsilon: f64,
}

impl Default for SchedulerParams {
    fn default() -> Self {
        SchedulerParams {
            policy: Policy::Gradient,
            alpha: 0.2,
            beta: 2.0,
            window: 3,
            epsilon: 0.05,
        }
    }
}

/// The round sizes a network run picks its default from, largest first.
pub const BATCHES: [usize; 4] = [64, 32, 16, 8];

/// The candidates per round of a network run that names none: the largest of
/// [`BATCHES`] whose warm-up (one round for each of `tasks`) takes at most a quarter of
/// the `trials`, so the scheduler has the rest to allocate; the smallest if none does.
/// ResNet-50's 24 tasks get rounds of 16 from 3,000 trials, of 64 from 6,144.
pub fn default_batch(trials: usize, tasks: usize) -> usize {
    let smallest = BATCHES[BATCHES.len() - 1];
    BATCHES
        .into_iter()
        .find(|b| b.saturating_mul(tasks).saturating_mul(4) <= trials)
        .unwrap_or(smallest)
}

/// What the scheduler knows of one task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskHistory {
    /// How many times the network runs it.
    pub weight: f64,
    /// Floating-point operations of one run.
    pub flops: f64,
    /// Tasks with equal groups compute the same thing on other shapes.
    pub group: String,
    /// The best latency in seconds after each round the task had in this run (`None`
    /// while nothing passed); its length is the number of rounds.
    pub curve: Vec<Option<f64>>,
    /// Its best latency before this run, when the database had one (a resumed run, or a
    /// task tuned before): such a task needs no warm-up round.
    pub before: Option<f64>,
    /// The rounds it had before this run (the records the database had of it, in rounds
    /// of this run's size): they count in `t_i`, so a task tuned at length elsewhere is
    /// not expected to gain as if it were new.
    pub prior_rounds: usize,
    /// Whether it can take more rounds (not once its space is exhausted or it failed
    /// too often).
    pub open: bool,
}

impl TaskHistory {
    /// Its best latency so far, in this run or before it.
    pub fn known_best(&self) -> Option<f64> {
        self.curve.last().copied().flatten().or(self.before)
    }

    /// Its best latency so far, [`UNMEASURED`] without one.
    pub fn best(&self) -> f64 {
        self.known_best().unwrap_or(UNMEASURED)
    }

    /// Whether it still needs its warm-up round: none in this run and no best before it.
    fn needs_warm_up(&self) -> bool {
        self.curve.is_empty() && self.before.is_none()
    }

    fn at(&self, round: usize) -> f64 {
        self.curve
            .get(round)
            .copied()
            .flatten()
            .unwrap_or(UNMEASURED)
    }
}

/// Which task gets the next round, and why.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Choice {
    /// The first task that had no round yet.
    WarmUp(usize),
    /// A random open task (probability epsilon).
    Explore(usize),
    /// The task with the most negative gradient.
    Gradient(usize),
    /// A random open task, all gradients being equal.
    Tie(usize),
    /// The open task with the fewest rounds ([`Policy::RoundRobin`]).
    RoundRobin(usize),
}

impl Choice {
    /// The chosen task's index.
    pub fn task(self) -> usize {
        match self {
            Choice::WarmUp(i)
            | Choice::Explore(i)
            | Choice::Gradient(i)
            | Choice::Tie(i)
            | Choice::RoundRobin(i) => i,
        }
    }

    /// A word for progress lines and reports.
    pub fn reason(self) -> &'static str {
        match self {
            Choice::WarmUp(_) => "warm-up",
            Choice::Explore(_) => "explore",
            Choice::Gradient(_) => "gradient",
            Choice::Tie(_) => "tie",
            Choice::RoundRobin(_) => "round-robin",
        }
    }
}

/// The task to tune next, or `None` when no task is open.
pub fn choose(tasks: &[TaskHistory], p: &SchedulerParams, rng: &mut impl Rng) -> Option<Choice> {
    let open: Vec<usize> = (0..tasks.len()).filter(|&i| tasks[i].open).collect();
    if let Some(&i) = open.iter().find(|&&i| tasks[i].needs_warm_up()) {
        return Some(Choice::WarmUp(i));
    }
    if p.policy == Policy::RoundRobin {
        let fewest = open.iter().min_by_key(|&&i| (tasks[i].curve.len(), i))?;
        return Some(Choice::RoundRobin(*fewest));
    }
    if open.is_empty() {
        return None;
    }
    if rng.gen::<f64>() < p.epsilon {
        return Some(Choice::Explore(open[rng.gen_range(0..open.len())]));
    }
    let grads: Vec<f64> = open.iter().map(|&i| gradient(tasks, i, p)).collect();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for g in &grads {
        lo = lo.min(*g);
        hi = hi.max(*g);
    }
    if lo == hi {
        return Some(Choice::Tie(open[rng.gen_range(0..open.len())]));
    }
    let best = grads
        .iter()
        .position(|g| *g == lo)
        .map_or(open[0], |k| open[k]);
    Some(Choice::Gradient(best))
}

/// The estimated change of the network's latency per round given to task `i` (zero or
/// negative; more negative is better). `i` must have had a round or a best before the
/// run.
pub fn gradient(tasks: &[TaskHistory], i: usize, p: &SchedulerParams) -> f64 {
    let t = &tasks[i];
    let best = t.best();
    // The slope over this run's last `window` rounds (the rounds before the run have no
    // curve here).
    let n = t.curve.len();
    let backward = if n > p.window {
        (t.at(n - 1) - t.at(n - 1 - p.window)) / p.window as f64
    } else {
        0.0
    };
    let rounds = (t.prior_rounds + n).max(1);
    let again = best - best / rounds as f64;
    let similar = similar_estimate(tasks, i, p.beta);
    let forward = similar.map_or(again, |s| again.min(s)) - best;
    t.weight * (p.alpha * backward + (1.0 - p.alpha) * forward)
}

/// `beta * flops_i / (the best FLOP/s among tasks of i's group)`, when the group has
/// another task.
fn similar_estimate(tasks: &[TaskHistory], i: usize, beta: f64) -> Option<f64> {
    let group: Vec<&TaskHistory> = tasks.iter().filter(|t| t.group == tasks[i].group).collect();
    if group.len() < 2 {
        return None;
    }
    let best_rate = group
        .iter()
        .map(|t| t.flops / t.best())
        .fold(0.0f64, f64::max);
    (best_rate > 0.0).then(|| beta * tasks[i].flops / best_rate)
}
