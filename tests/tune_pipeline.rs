//! The pipelined tuning loop on the CPU, with the real worker: every outcome recorded
//! exactly once, the stop reasons, deterministic proposals, records fed back.

use std::sync::Arc;
use std::time::Duration;
use tessel::cost_model::{FEATURE_NAMES, FEATURE_SET_VERSION};
use tessel::database::{Database, Filter, Record, TargetKind};
use tessel::measure::worker::Measurer;
use tessel::measure::TimingConfig;
use tessel::search::StrategyKind;
use tessel::tune::{ModelPolicy, StopReason, StoredModels, TuneReport, TuneTarget, Tuner};
use tessel::workload::{preset, Workload};

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

fn tuner(db: &mut Database, strategy: StrategyKind, trials: usize, batch: usize) -> Tuner<'_> {
    Tuner::new(TuneTarget::cpu())
        .with_measurer(
            Measurer::new(env!("CARGO_BIN_EXE_tessel")).with_timeout(Duration::from_secs(30)),
        )
        .with_timing(quick())
        .with_strategy(strategy)
        .with_trials(trials)
        .with_batch(batch)
        .with_overlap(true)
        .with_seed(11)
        .with_db(db)
}

fn records(db: &Database, w: &Workload) -> Vec<Record> {
    db.records(&Filter {
        workload: Some(w.key()),
        target: None,
        best_only: false,
    })
    .unwrap()
}

/// Every candidate measured or rejected in `r` is one record, and the rounds add up.
fn assert_every_outcome_recorded_once(db: &Database, w: &Workload, r: &TuneReport, before: usize) {
    let recs = records(db, w);
    let rejected: usize = r.rejected.values().sum();
    let rejected_at_proposal: usize = r.round_stats.iter().map(|s| s.proposed - s.measured).sum();
    assert_eq!(
        recs.len(),
        before + r.trials + rejected_at_proposal,
        "{r:?}"
    );
    assert!(rejected_at_proposal <= rejected);
    let mut traces: Vec<String> = recs.iter().map(|x| format!("{:?}", x.trace)).collect();
    traces.sort();
    traces.dedup();
    assert_eq!(traces.len(), recs.len(), "a trace recorded twice");
    assert_eq!(
        r.round_stats.iter().map(|s| s.measured).sum::<usize>(),
        r.trials
    );
    assert_eq!(r.round_stats.iter().map(|s| s.ok).sum::<usize>(), r.ok);
    assert_eq!(r.round_stats.len(), r.rounds);
}

#[test]
fn the_pipelined_loop_spends_the_trial_budget_and_records_everything_once() {
    let w = preset("matmul:16x16x16").unwrap();
    for strategy in [StrategyKind::Random, StrategyKind::Evolutionary] {
        let mut db = Database::open_in_memory().unwrap();
        let r = tuner(&mut db, strategy, 5, 2).tune(&w).unwrap();
        assert_eq!(r.stop, StopReason::TrialBudget, "{strategy:?}");
        assert_eq!(r.trials, 5);
        assert_eq!(r.rounds, 3);
        assert_eq!(r.strategy, strategy.name());
        assert!(r.ok > 0 && r.best.is_some());
        assert_every_outcome_recorded_once(&db, &w, &r, 0);
        // Batches 2 and 3 (of 2, 2 and 1) were proposed while the batch before them was
        // measured.
        assert!(r.round_stats[1..]
            .iter()
            .all(|s| s.overlapped_propose_seconds > 0.0));
        for s in &r.round_stats {
            assert!(s.seconds.total() <= r.elapsed.as_secs_f64());
        }
        assert!(r.stage_seconds.total() <= r.elapsed.as_secs_f64());
        // Opening, the rounds' stages and closing do not overlap one another.
        let parts = r.opening.as_secs_f64() + r.stage_seconds.total() + r.closing.as_secs_f64();
        assert!(
            parts <= r.elapsed.as_secs_f64() + 1e-6,
            "{parts} > {:?}",
            r.elapsed
        );
        assert!(r.opening > Duration::ZERO);
        // The report says how the mutators fared: random search mutates nothing.
        match strategy {
            StrategyKind::Random => assert!(r.mutators.is_empty()),
            _ => {
                assert!(r.mutators.iter().any(|m| m.mutator == "tile_size"));
                assert!(r
                    .mutators
                    .iter()
                    .all(|m| m.tried > 0 && m.accepted <= m.tried));
            }
        }
        let json = r.to_json("matmul:16x16x16", "key");
        assert_eq!(
            json["mutators"].as_array().map(|m| m.len()),
            Some(r.mutators.len())
        );
    }
}

#[test]
fn the_time_limit_stops_the_pipelined_loop_between_rounds() {
    let w = preset("matmul:16x16x16").unwrap();
    let mut db = Database::open_in_memory().unwrap();
    let r = tuner(&mut db, StrategyKind::Evolutionary, 10_000, 2)
        .with_time_limit(Duration::from_millis(1000))
        .tune(&w)
        .unwrap();
    assert_eq!(r.stop, StopReason::TimeLimit);
    assert!(r.trials > 0 && r.trials < 10_000);
    assert_every_outcome_recorded_once(&db, &w, &r, 0);
}

#[test]
fn a_small_space_is_exhausted_with_either_strategy() {
    let w = preset("matmul:2x1x1").unwrap();
    for strategy in [StrategyKind::Random, StrategyKind::Evolutionary] {
        let mut db = Database::open_in_memory().unwrap();
        let r = tuner(&mut db, strategy, 10_000, 16).tune(&w).unwrap();
        assert_eq!(r.stop, StopReason::SpaceExhausted, "{strategy:?}");
        assert!(r.trials > 0);
        assert_every_outcome_recorded_once(&db, &w, &r, 0);
    }
}

#[test]
fn the_same_seed_proposes_the_same_candidates_with_random_search() {
    let w = preset("matmul:16x16x16").unwrap();
    let traces = |seed: u64| {
        let mut db = Database::open_in_memory().unwrap();
        let r = tuner(&mut db, StrategyKind::Random, 3, 3)
            .with_seed(seed)
            .tune(&w)
            .unwrap();
        assert_eq!(r.trials, 3);
        let mut t: Vec<String> = records(&db, &w)
            .iter()
            .map(|x| tessel::schedule::text::print(&x.trace))
            .collect();
        t.sort();
        t
    };
    let a = traces(5);
    assert_eq!(a, traces(5));
    assert_ne!(a, traces(6));
}

#[test]
fn a_second_run_is_fed_the_first_runs_records_and_skips_them() {
    let w = preset("matmul:16x16x16").unwrap();
    let mut db = Database::open_in_memory().unwrap();
    let first = tuner(&mut db, StrategyKind::Random, 3, 3).tune(&w).unwrap();
    let stored = records(&db, &w).len();
    assert_eq!(first.fed_back_at_start, 0);
    let second = tuner(&mut db, StrategyKind::Random, 3, 3).tune(&w).unwrap();
    assert_eq!(second.fed_back_at_start, stored);
    // The same seed samples the first run's candidates again: the database has them.
    assert!(second.already_measured >= first.trials, "{second:?}");
    assert_every_outcome_recorded_once(&db, &w, &second, stored);
    // The first run's best is known from the start.
    assert!(second.best.is_some());
}

#[test]
fn without_a_model_the_tuner_says_so_once() {
    let w = preset("matmul:16x16x16").unwrap();
    let mut db = Database::open_in_memory().unwrap();
    let mut heard = Vec::new();
    let r = tuner(&mut db, StrategyKind::Evolutionary, 4, 2)
        .with_notes(|n| heard.push(n.to_string()))
        .tune(&w)
        .unwrap();
    assert_eq!(r.model, None);
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(heard[0].starts_with("no cost model for cpu/"), "{heard:?}");
    assert!(heard[0].contains("proposing without one"), "{heard:?}");
    assert_eq!(r.notes, heard);
    assert!(r.round_stats.iter().all(|s| s.scored == 0));
}

#[test]
fn other_workloads_best_traces_seed_the_search() {
    let mut db = Database::open_in_memory().unwrap();
    let a = preset("matmul:16x16x16").unwrap();
    tuner(&mut db, StrategyKind::Random, 3, 3).tune(&a).unwrap();
    let b = preset("matmul:16x32x16").unwrap();
    let r = tuner(&mut db, StrategyKind::Random, 2, 2).tune(&b).unwrap();
    assert!(r.seed_traces >= 1 && r.seed_traces <= tessel::tune::warm_start::SEEDS_PER_WORKLOAD);
}

#[test]
fn a_model_trained_while_tuning_is_stored_with_the_features_it_computed() {
    // The training reads the records through a connection of its own (a file database)
    // and featurizes them on its thread; the run stores the model and caches the features.
    let dir = tempfile::tempdir().unwrap();
    let mut db = Database::open(dir.path().join("records.db")).unwrap();
    let w = preset("matmul:32x32x32").unwrap();
    let policy = ModelPolicy {
        min_records: 8,
        retrain_every: 8,
        ..ModelPolicy::default()
    };
    let r = tuner(&mut db, StrategyKind::Evolutionary, 24, 8)
        .with_models(Arc::new(StoredModels::default()), policy)
        .tune(&w)
        .unwrap();
    let used = r.model.clone().expect("a model was trained");
    assert!(used.trained_this_run >= 1, "{used:?}");
    assert!(!used.loaded);
    let arch = r.target.arch.clone();
    let stored = db
        .load_model(TargetKind::Cpu, &arch)
        .unwrap()
        .expect("stored");
    assert_eq!(stored.records_trained_on, used.records_trained_on as u64);

    let ok = db.ok_records_after(TargetKind::Cpu, &arch, 0).unwrap();
    let ids: Vec<i64> = ok.iter().map(|x| x.id).collect();
    let cached = db
        .cached_features(&ids, FEATURE_SET_VERSION, FEATURE_NAMES.len())
        .unwrap();
    assert!(
        cached.len() >= policy.min_records,
        "{} cached",
        cached.len()
    );
    assert!(cached.len() <= ids.len());
    assert!(cached.keys().all(|id| ids.contains(id)));

    // The next run starts from the stored model.
    let again = tuner(&mut db, StrategyKind::Evolutionary, 8, 8)
        .with_models(Arc::new(StoredModels::default()), policy)
        .tune(&w)
        .unwrap();
    assert!(again.model.expect("a model").loaded);
}
