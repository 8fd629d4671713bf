//! Tuning a network end to end on the CPU with the real worker: the task scheduler's
//! rounds, the estimated latency, resuming from the database; the CLI's `tune --network`,
//! `--shard` into two databases merged with `db import`, and `report`.

use std::process::Command;
use std::time::Duration;
use tessel::database::{Database, Filter};
use tessel::measure::worker::Measurer;
use tessel::measure::TimingConfig;
use tessel::network::{Network, Task};
use tessel::search::StrategyKind;
use tessel::tune::{TaskOutcome, TuneTarget, Tuner};

const TINY: &str = r#"name = "tiny"
[[task]]
workload = "matmul:m=8,n=8,k=8"
weight = 3

[[task]]
workload = "conv2d_relu_nchw:n=1,c=2,h=4,w=4,k=2,r=3,s=3,pad=1"
weight = 2

[[task]]
workload = """
workload dense_bias
input X: f32[4, 8]
input W: f32[8, 8]
input bias: f32[8]
T_dense[i, j] = sum(X[i, k] * W[j, k], k)
T_add[i, j] = T_dense[i, j] + bias[j]
"""
weight = 1
"#;

/// Two GEMMs of other shapes and a conv.
const KIN: &str = r#"name = "kin"
[[task]]
workload = "matmul:m=8,n=8,k=8"
weight = 1

[[task]]
workload = "matmul:m=16,n=8,k=24"
weight = 1

[[task]]
workload = "conv2d_nchw:n=1,c=2,h=4,w=4,k=2,r=3,s=3,pad=1"
weight = 1
"#;

/// Quick timing: the tests check the loop, not the kernels.
fn quick() -> TimingConfig {
    TimingConfig {
        warmup_seconds: 0.0,
        min_runs: 2,
        max_runs: 3,
        max_seconds: 0.005,
        flush_cache: false,
        give_up_above_seconds: None,
        give_up_factor: None,
        settled_spread: None,
        enough_seconds: None,
    }
}

/// Every candidate `t` measured or rejected is in the database, once.
fn assert_records_are_the_trials(db: &Database, t: &TaskOutcome, task: &Task) {
    let stored = db
        .records(&Filter {
            workload: Some(task.workload.key()),
            target: None,
            best_only: false,
        })
        .unwrap();
    let rejected = t.report.rejected.values().sum::<usize>();
    assert_eq!(stored.len(), t.report.trials + rejected, "{}", t.label);
}

fn tuner(db: &mut Database, trials: usize) -> Tuner<'_> {
    Tuner::new(TuneTarget::cpu())
        .with_measurer(
            Measurer::new(env!("CARGO_BIN_EXE_tessel")).with_timeout(Duration::from_secs(30)),
        )
        .with_timing(quick())
        .with_strategy(StrategyKind::Random)
        .with_trials(trials)
        .with_batch(2)
        .with_seed(5)
        .with_db(db)
}

#[test]
fn the_scheduler_warms_up_every_task_then_spends_the_network_budget() {
    let net = Network::parse(TINY, "tiny.toml").unwrap();
    let mut db = Database::open_in_memory().unwrap();
    let mut seen = Vec::new();
    let report = tuner(&mut db, 10)
        .tune_network(&net.tasks, |r, t| seen.push((r.task, t.label())))
        .unwrap();
    assert_eq!(report.trials(), 10);
    assert_eq!(report.rounds.len(), 5);
    let warm: Vec<(usize, &str)> = report.rounds[..3]
        .iter()
        .map(|r| (r.task, r.reason))
        .collect();
    assert_eq!(warm, [(0, "warm-up"), (1, "warm-up"), (2, "warm-up")]);
    assert_eq!(seen.len(), 5);
    assert_eq!(seen[1], (1, net.tasks[1].label()));
    // Per-task trials add up, every measured candidate is in the database, and the
    // estimated latency is the weighted sum of the tasks' bests.
    let per_task: usize = report.tasks.iter().map(|t| t.report.trials).sum();
    assert_eq!(per_task, 10);
    let mut sum = 0.0;
    for (t, task) in report.tasks.iter().zip(&net.tasks) {
        assert_records_are_the_trials(&db, t, task);
        sum += f64::from(task.weight) * t.report.best.as_ref().unwrap().median_seconds;
    }
    let est = report.estimated_seconds().unwrap();
    assert!((est - sum).abs() <= 1e-12 * sum);
    assert_eq!(report.rounds.last().unwrap().estimated_seconds, Some(est));
    // The timeline: every round comes in after the tasks opened, in order, within the run.
    let opened = report.opened.as_secs_f64();
    let times: Vec<f64> = report.rounds.iter().map(|r| r.elapsed_seconds).collect();
    assert!(opened <= times[0], "{opened} {times:?}");
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(times[4] <= report.elapsed.as_secs_f64(), "{times:?}");
    let json = report.to_json("tiny");
    assert_eq!(json["trials"], 10);
    assert_eq!(json["tasks"].as_array().unwrap().len(), 3);
    assert_eq!(json["opened_seconds"], opened);
    assert_eq!(json["rounds"][4]["elapsed_seconds"], times[4]);

    // An interrupted run resumes: the next run is fed every record and keeps the bests,
    // and goes on without warming up the tasks that have one.
    let again = tuner(&mut db, 2)
        .tune_network(&net.tasks, |_, _| {})
        .unwrap();
    assert!(!again.rounds.is_empty());
    assert!(
        again.rounds.iter().all(|r| r.reason != "warm-up"),
        "{:?}",
        again.rounds
    );
    assert!(again.rounds[0].estimated_seconds.is_some());
    for (first, second) in report.tasks.iter().zip(&again.tasks) {
        let rejected = first.report.rejected.values().sum::<usize>();
        assert_eq!(
            second.report.fed_back_at_start,
            first.report.trials + rejected
        );
        let (a, b) = (first.report.best.as_ref(), second.report.best.as_ref());
        assert!(b.unwrap().median_seconds <= a.unwrap().median_seconds);
    }
}

#[test]
fn two_workers_tune_different_tasks_at_once_into_one_database() {
    // The same code path as several GPUs (`--devices 0,1`), with two CPU workers.
    let worker =
        || Measurer::new(env!("CARGO_BIN_EXE_tessel")).with_timeout(Duration::from_secs(30));
    rounds_in_flight_fill_one_database(|t| t.with_workers(vec![worker(), worker()]));
}

#[test]
fn one_device_proposes_a_round_while_it_measures_another() {
    // As on one GPU: three slots, one proposing, one compiling (a gated job: on the CPU
    // its compiles wait for the device too) and one measuring.
    rounds_in_flight_fill_one_database(|t| t.with_overlap(true));
}

/// A network tuned with rounds in flight at once (however `setup` arranges them) spends
/// its budget exactly, warms every task up first, and stores every outcome once.
fn rounds_in_flight_fill_one_database(setup: impl for<'a> FnOnce(Tuner<'a>) -> Tuner<'a>) {
    let net = Network::parse(TINY, "tiny.toml").unwrap();
    let mut db = Database::open_in_memory().unwrap();
    let report = setup(tuner(&mut db, 8))
        .tune_network(&net.tasks, |_, _| {})
        .unwrap();
    assert_eq!(report.trials(), 8);
    // Every task is warmed up exactly once. (Rounds are reported as they finish, and with
    // rounds in flight one given out after the last warm-up may finish before it, so the
    // order is checked by the one-slot test above, not here.)
    let mut warm: Vec<usize> = report
        .rounds
        .iter()
        .filter(|r| r.reason == "warm-up")
        .map(|r| r.task)
        .collect();
    warm.sort();
    assert_eq!(warm, [0, 1, 2], "{:?}", report.rounds);
    for (t, task) in report.tasks.iter().zip(&net.tasks) {
        assert_records_are_the_trials(&db, t, task);
        assert!(t.report.best.is_some(), "{}", t.label);
    }
    assert!(report.estimated_seconds().is_some());
}

fn tessel(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(args)
        .output()
        .expect("run tessel");
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert!(out.status.success(), "tessel {args:?}\n{so}\n{se}");
    so
}

#[test]
fn two_shards_merged_cover_the_network_and_report_writes_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.toml");
    std::fs::write(&file, TINY).unwrap();
    let file = file.to_str().unwrap();
    let db = |i: usize| dir.path().join(format!("shard{i}.sqlite"));
    for i in 0..2 {
        let shard = format!("{i}/2");
        let out = tessel(&[
            "tune",
            "--network",
            file,
            "--shard",
            &shard,
            "--trials",
            "4",
            "--batch",
            "2",
            "--strategy",
            "random",
            "--seed",
            "3",
            "--target",
            "cpu",
            "--db",
            db(i).to_str().unwrap(),
        ]);
        assert!(out.contains(&format!("tiny shard {i}/2 on cpu")), "{out}");
    }
    // The shards tuned disjoint tasks that cover the network.
    let net = Network::parse(TINY, "tiny.toml").unwrap();
    let keys = |i: usize| {
        let d = Database::open(db(i)).unwrap();
        net.tasks
            .iter()
            .filter(|t| {
                !d.records(&Filter {
                    workload: Some(t.workload.key()),
                    target: None,
                    best_only: false,
                })
                .unwrap()
                .is_empty()
            })
            .map(|t| t.workload.key())
            .collect::<Vec<_>>()
    };
    let (a, b) = (keys(0), keys(1));
    assert!(a.iter().all(|k| !b.contains(k)), "{a:?} {b:?}");
    assert_eq!(a.len() + b.len(), 3);
    // Merged, the report covers every task.
    tessel(&[
        "db",
        "import",
        db(1).to_str().unwrap(),
        "--db",
        db(0).to_str().unwrap(),
    ]);
    let out_dir = dir.path().join("report");
    let table = tessel(&[
        "report",
        "--network",
        file,
        "--target",
        "cpu",
        "--db",
        db(0).to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(table.contains("estimated network latency"), "{table}");
    assert!(!table.contains("latency - "), "{table}");
    for f in [
        "index.html",
        "task01.svg",
        "task02.svg",
        "task03.svg",
        "network.svg",
    ] {
        assert!(out_dir.join(f).exists(), "{f} missing:\n{table}");
    }
    // Without workloads or a network: every workload the database holds records of.
    let all = tessel(&["report", "--target", "cpu", "--db", db(0).to_str().unwrap()]);
    for name in [
        "matmul:8x8x8",
        "conv2d_relu_nchw:",
        "custom: inputs f32[4, 8]",
    ] {
        assert_eq!(
            all.lines().filter(|l| l.starts_with(name)).count(),
            1,
            "{name}:\n{all}"
        );
    }
}

#[test]
fn a_best_found_during_the_run_seeds_the_other_tasks_it_fits() {
    let net = Network::parse(KIN, "kin.toml").unwrap();
    let mut db = Database::open_in_memory().unwrap();
    let report = tuner(&mut db, 6)
        .with_strategy(StrategyKind::Evolutionary)
        .tune_network(&net.tasks, |_, _| {})
        .unwrap();
    // A fresh database seeds nothing at the start: every seed came from the run.
    let seeds: Vec<usize> = report.tasks.iter().map(|t| t.report.seed_traces).collect();
    assert!(seeds[0] >= 1 && seeds[1] >= 1, "{seeds:?}");
    assert_eq!(
        seeds[2], 0,
        "a GEMM's trace does not replay on a conv: {seeds:?}"
    );
}

#[test]
fn a_network_tune_times_each_tasks_fastest_again_and_reports_the_bests_after() {
    let net = Network::parse(TINY, "tiny.toml").unwrap();
    let mut db = Database::open_in_memory().unwrap();
    let report = tuner(&mut db, 6)
        .with_confirm(1)
        .tune_network(&net.tasks, |_, _| {})
        .unwrap();
    for (t, task) in report.tasks.iter().zip(&net.tasks) {
        assert!(!t.report.confirmed.is_empty(), "{}", t.label);
        for c in &t.report.confirmed {
            assert!(c.first_seconds > 0.0 && c.ratio().is_some(), "{c:?}");
        }
        // Timed again, not new records; the task's best is the database's after it.
        assert_records_are_the_trials(&db, t, task);
        let best = db.best(&task.workload, &t.report.target).unwrap().unwrap();
        assert_eq!(
            t.report.best.as_ref().unwrap().median_seconds,
            best.record.median_secs.unwrap(),
            "{}",
            t.label
        );
    }
}
