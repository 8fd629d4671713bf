//! The cost model end to end on a small fixture database: candidates sampled from the CUDA
//! design space of three small matmuls, given synthetic but deterministic latencies that
//! are a known function of their launch configuration (the fixture's "device" likes 128
//! threads per block and many blocks, and fails above 512 threads).

use super::model::{Model, ModelError, ModelKind};
use super::FEATURE_SET_VERSION;
use crate::database::{Database, NewRecord, Status, StoredModel, TargetKey, TargetKind};
use crate::model_cmd;
use crate::search::{RandomSearch, SearchSpace, SearchStrategy, TargetLimits};
use crate::target::cuda::CudaLimits;

const ARCH: &str = "sm_90a";

pub(crate) fn target() -> TargetKey {
    TargetKey {
        kind: TargetKind::Cuda,
        arch: ARCH.into(),
        device: "fixture GPU".into(),
        toolchain: "none".into(),
    }
}

/// The fixture's latency of a candidate: a function of threads per block and blocks of
/// its largest kernel; `None` (a runtime error) above `max_threads` threads.
fn synthetic_latency(l: &crate::lower::Lowered, max_threads: f64) -> Option<f64> {
    let k = l
        .kernels
        .iter()
        .max_by_key(|k| k.grid.iter().product::<i64>() * k.threads())?;
    let threads = k.threads() as f64;
    let blocks = k.grid.iter().product::<i64>() as f64;
    if threads > max_threads {
        return None;
    }
    let t = threads.log2() - 7.0;
    Some(1e-4 * (1.0 + t * t) * (1.0 + 16.0 / blocks))
}

/// A database with ~40 candidates of each of three matmuls.
pub(crate) fn fixture_db() -> Database {
    fixture_db_failing_above(512.0)
}

/// The fixture with candidates of more than `max_threads` threads per block failing.
fn fixture_db_failing_above(max_threads: f64) -> Database {
    let mut db = Database::open_in_memory().unwrap();
    // One kernel a candidate, as the synthetic latency above judges one: a transposing
    // kernel of its own (a copy over as many threads as the operand has elements) would
    // be the kernel judged, and its fixed 128 threads would decide every failure.
    let mut space = SearchSpace::cuda_default();
    space.transpose_kernels = false;
    let limits = TargetLimits::Cuda(CudaLimits::sm90_default());
    for (seed, spec) in ["matmul:64x64x64", "matmul:128x64x32", "matmul:32x128x128"]
        .iter()
        .enumerate()
    {
        let w =
            crate::workload::from_cli(spec, |_| Err(std::io::Error::other("no files"))).unwrap();
        let program = crate::database::canonical_program(&w).unwrap();
        let mut search = RandomSearch::new(space.clone(), limits.clone(), program, seed as u64);
        let proposal = search.propose(40, &mut |_| false);
        for c in proposal.candidates {
            let record = match synthetic_latency(&c.verified.lowered, max_threads) {
                Some(l) => NewRecord::ok(&w, target(), c.trace, vec![l]),
                None => NewRecord::failed(
                    &w,
                    target(),
                    c.trace,
                    Status::RuntimeError,
                    "too many threads",
                ),
            };
            db.commit(&record).unwrap();
        }
    }
    db
}

#[test]
fn trains_stores_and_ranks_held_out_workloads_better_than_random() {
    let mut db = fixture_db();
    let report = model_cmd::train(&mut db, TargetKind::Cuda, None, ModelKind::Gbdt).unwrap();
    assert_eq!(report.arch, ARCH);
    assert!(report.records >= 60, "{} records", report.records);
    let stored = db.load_model(TargetKind::Cuda, ARCH).unwrap().unwrap();
    assert_eq!(stored.feature_set_version, FEATURE_SET_VERSION);
    assert_eq!(stored.records_trained_on, report.records as u64);
    let model = Model::from_stored(&stored, TargetKind::Cuda, ARCH).unwrap();
    assert_eq!(model.kind(), ModelKind::Gbdt);

    let (f, eval) = model_cmd::eval(
        &mut db,
        TargetKind::Cuda,
        None,
        &[ModelKind::Gbdt],
        7,
        crate::cost_model::eval::Subset::All,
    )
    .unwrap();
    // The second featurization came from the cache.
    assert_eq!(f.set.len(), report.records);
    assert_eq!(eval.groups.len(), 3);
    let gbdt = eval.mean["gbdt"];
    let random = eval.mean["random"];
    assert!(
        gbdt.pairwise > random.pairwise + 0.15,
        "gbdt {gbdt:?} random {random:?}"
    );
    assert!(gbdt.top5 >= random.top5, "gbdt {gbdt:?} random {random:?}");
    let json = model_cmd::eval_json(&f, &eval);
    assert_eq!(json["workloads"].as_array().unwrap().len(), 3);
    assert!(json["mean"]["top1"].is_number() && json["mean"]["baselines"]["random"].is_object());
}

#[test]
fn model_bytes_round_trip() {
    let mut db = fixture_db();
    let f = model_cmd::featurize_records(&mut db, TargetKind::Cuda, ARCH).unwrap();
    for kind in [ModelKind::Gbdt, ModelKind::GbdtRankFail, ModelKind::Linear] {
        let m = Model::train_kind(&f.set, kind).unwrap();
        let back = Model::from_bytes(&m.to_bytes()).unwrap();
        assert_eq!(back.kind(), kind);
        // JSON keeps every float to within an ulp.
        let (a, b) = (back.predict(&f.set.features), m.predict(&f.set.features));
        assert!(a
            .iter()
            .zip(&b)
            .all(|(x, y)| (x - y).abs() <= 1e-12 * (1.0 + y.abs())));
    }
}

/// Failures (here: above 32 threads per block, which rules out the 128 threads the
/// fixture's latency favours, so the failures look fast) are ranked below every candidate
/// that runs, on a workload the ranker and the failure
/// classifier never saw.
#[test]
fn the_combined_scorer_ranks_failing_candidates_last() {
    let mut db = fixture_db_failing_above(32.0);
    let f = model_cmd::featurize_records(&mut db, TargetKind::Cuda, ARCH).unwrap();
    let mut failures = 0;
    for held in f.set.workloads() {
        let (test, train): (Vec<usize>, Vec<usize>) =
            (0..f.set.len()).partition(|i| f.set.workload_of(*i) == held);
        let (test, train) = (f.set.subset(&test), f.set.subset(&train));
        let model = Model::train_kind(&train, ModelKind::GbdtRankFail).unwrap();
        let scores = model.predict(&test.features);
        let worst_ok = (0..test.len())
            .filter(|i| test.latency[*i].is_some())
            .map(|i| scores[i])
            .fold(f64::INFINITY, f64::min);
        for i in (0..test.len()).filter(|i| test.latency[*i].is_none()) {
            failures += 1;
            assert!(
                scores[i] < worst_ok,
                "{held}: a failure scores {} >= the worst ok {worst_ok}",
                scores[i]
            );
        }
    }
    assert!(failures > 0, "the fixture has failures");
}

/// Averaging rankers of two seeds scores the mean of the two rankers' scores.
#[test]
fn a_bagged_ranker_averages_its_members() {
    use super::model::{train_ranker, train_ranker_bagged, RANK_PARAMS};
    let mut db = fixture_db();
    let f = model_cmd::featurize_records(&mut db, TargetKind::Cuda, ARCH).unwrap();
    let params = super::gbdt::GbdtParams {
        trees: 20,
        ..RANK_PARAMS
    };
    let a = train_ranker(&f.set, &params).unwrap();
    let b = train_ranker(
        &f.set,
        &super::gbdt::GbdtParams {
            seed: 1,
            ..params.clone()
        },
    )
    .unwrap();
    let bag = train_ranker_bagged(&f.set, &params, 2, &|| false).unwrap();
    assert_eq!(bag.trees.len(), 40);
    assert!(bag.is_well_formed());
    for x in &f.set.features {
        let mean = (a.predict_one(x) + b.predict_one(x)) / 2.0;
        assert!((bag.predict_one(x) - mean).abs() < 1e-9);
    }
    assert_eq!(
        train_ranker_bagged(&f.set, &params, 1, &|| false).unwrap(),
        a
    );
}

#[test]
fn the_combined_score_ranks_expected_failures_after_the_others() {
    use super::model::{combined_score, FAILURE_OFFSET};
    // Log-odds 0 is a probability of 1/2: not above the threshold 1/2.
    assert_eq!(combined_score(1.0, 0.0, 0.5), 1.0);
    // Log-odds 1 is 0.73: ranked after every candidate below the threshold.
    assert_eq!(combined_score(1.0, 1.0, 0.5), 1.0 - FAILURE_OFFSET);
    assert!(combined_score(50.0, 1.0, 0.5) < combined_score(-50.0, -1.0, 0.5));
    // Among expected failures the ranker's order stays.
    assert!(combined_score(2.0, 3.0, 0.5) > combined_score(1.0, 5.0, 0.5));
}

fn stored(bytes: Vec<u8>, feature_set_version: u32) -> StoredModel {
    StoredModel {
        target_kind: TargetKind::Cuda,
        arch: ARCH.into(),
        feature_set_version,
        model_kind: "gbdt".into(),
        records_trained_on: 1,
        created_at: 0,
        bytes,
    }
}

#[test]
fn corrupt_stale_and_foreign_models_are_refused() {
    let mut db = Database::open_in_memory().unwrap();
    db.save_model(
        TargetKind::Cuda,
        ARCH,
        &stored(b"garbage".to_vec(), FEATURE_SET_VERSION),
    )
    .unwrap();
    let s = db.load_model(TargetKind::Cuda, ARCH).unwrap().unwrap();
    let err = Model::from_stored(&s, TargetKind::Cuda, ARCH).unwrap_err();
    assert_eq!(err.to_string(), "corrupt model bytes: no header line");

    let header = format!(
        "tessel-cost-model v1 kind=gbdt features={} feature_set={FEATURE_SET_VERSION}\n{{\"Gbdt\":",
        super::FEATURE_NAMES.len()
    );
    let err = Model::from_bytes(header.as_bytes()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("corrupt model bytes: model body: "),
        "{err}"
    );
    let err = Model::from_bytes(b"PK\x03\x04 zip\n{}").unwrap_err();
    assert_eq!(
        err.to_string(),
        "corrupt model bytes: not a tessel cost model (header \"PK\\u{3}\\u{4} zip\")"
    );

    // A model of another feature-set version is found but refused.
    let mut db = Database::open_in_memory().unwrap();
    let other = FEATURE_SET_VERSION + 1;
    db.save_model(TargetKind::Cuda, ARCH, &stored(Vec::new(), other))
        .unwrap();
    let s = db.load_model(TargetKind::Cuda, ARCH).unwrap().unwrap();
    let err = Model::from_stored(&s, TargetKind::Cuda, ARCH).unwrap_err();
    assert!(matches!(err, ModelError::FeatureSet { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "the model was trained on feature set v{other}, this tessel computes \
             v{FEATURE_SET_VERSION}: retrain it (`tessel model train`)"
        )
    );

    // A model of another arch is not this arch's.
    assert!(db.load_model(TargetKind::Cuda, "sm_80").unwrap().is_none());
    assert_eq!(db.model_archs(TargetKind::Cuda).unwrap(), vec![ARCH]);
    let err = Model::from_stored(&s, TargetKind::Cuda, "sm_80").unwrap_err();
    assert_eq!(
        err.to_string(),
        "the stored model is for cuda sm_90a, not cuda sm_80"
    );
}

#[test]
fn a_version_1_database_keeps_its_records_when_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(include_str!("../../database/schema.sql"))
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        let w =
            crate::workload::from_cli("matmul:8x8x8", |_| Err(std::io::Error::other("-"))).unwrap();
        let trace = crate::schedule::Trace::default();
        let json = crate::schedule::json::to_json(&trace);
        conn.execute(
            "INSERT INTO workloads VALUES (?1, ?2, 1)",
            [w.key(), w.canonical_text()],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO targets VALUES (1, 'cuda', 'sm_90a', 'dev', 'tool')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO records VALUES (1, ?1, 1, ?2, ?3, 'ok', NULL, '[0.001]', 0.001, \
             '0.1.0', 0)",
            [w.key(), json, "0".repeat(64)],
        )
        .unwrap();
    }
    let mut db = Database::open(&path).unwrap();
    let records = db.records(&crate::database::Filter::default()).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].median_secs, Some(0.001));
    db.save_model(
        TargetKind::Cuda,
        ARCH,
        &stored(b"x".to_vec(), FEATURE_SET_VERSION),
    )
    .unwrap();
    assert!(db.load_model(TargetKind::Cuda, ARCH).unwrap().is_some());
}

#[test]
fn a_database_without_records_of_the_target_says_so() {
    let mut db = Database::open_in_memory().unwrap();
    let err = model_cmd::train(&mut db, TargetKind::Cpu, None, ModelKind::Gbdt).unwrap_err();
    assert_eq!(err.to_string(), ":memory:: no cpu records to train on");
}
