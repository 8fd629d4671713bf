//! Times the cost model: featurizing and scoring 2,048 lowered candidates (what the
//! evolutionary search asks of it per generation), and training on a record database.
//!
//! `cargo bench --bench cost_model` (plain timing, no harness). With
//! `TESSEL_BENCH_DB=FILE` it also featurizes every CUDA record of FILE (through the
//! feature cache: run it twice to see both the cold and the cached figure) and trains
//! each model kind on them; the model that scores is then the one trained on FILE.

use std::time::Instant;
use tessel::cost_model::dataset::TrainingSet;
use tessel::cost_model::{DeviceSpec, Model, ModelKind, ModelScorer, Scorer};
use tessel::database::{Database, TargetKind};
use tessel::search::{RandomSearch, SearchSpace, SearchStrategy, TargetLimits};
use tessel::target::cuda::CudaLimits;

const CANDIDATES: usize = 2048;

fn main() {
    let dev = DeviceSpec::cuda("sm_90a");
    let w = tessel::workload::from_cli("matmul:1024x1024x1024", |_| {
        Err(std::io::Error::other("no files"))
    })
    .expect("preset");
    let program = tessel::database::canonical_program(&w).expect("program");
    let mut search = RandomSearch::new(
        SearchSpace::cuda_default(),
        TargetLimits::Cuda(CudaLimits::sm90_default()),
        program,
        1,
    );
    let start = Instant::now();
    let proposal = search.propose(CANDIDATES, &mut |_| false);
    let lowered: Vec<_> = proposal
        .candidates
        .iter()
        .map(|c| c.verified.lowered.clone())
        .collect();
    println!(
        "sampled {} candidates of matmul 1024^3 in {:.2} s (not part of the figures)",
        lowered.len(),
        start.elapsed().as_secs_f64()
    );

    let model = match std::env::var_os("TESSEL_BENCH_DB") {
        Some(path) => train_on_database(&path),
        None => {
            // No database: a model of the usual size, trained on the sampled candidates
            // with their thread counts as labels (the figure is the scoring time).
            let features: Vec<Vec<f32>> = lowered
                .iter()
                .map(|l| tessel::cost_model::featurize(l, &dev))
                .collect();
            let labels = lowered
                .iter()
                .map(|l| 1.0 / l.kernels.first().map_or(1, |k| k.threads()) as f64)
                .collect();
            let set = TrainingSet {
                record_ids: (0..features.len() as i64).collect(),
                latency: vec![Some(1.0); features.len()],
                group: vec![0; features.len()],
                groups: vec![tessel::cost_model::dataset::Group {
                    workload_key: w.key(),
                    target: tessel::database::TargetKey {
                        kind: TargetKind::Cuda,
                        arch: "sm_90a".into(),
                        device: "bench".into(),
                        toolchain: "none".into(),
                    },
                }],
                features,
                labels,
            };
            Model::train(&set).expect("train")
        }
    };
    let scorer = ModelScorer::new(model, dev);
    let refs: Vec<_> = lowered.iter().collect();
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        let scores = scorer.score(&refs);
        best = best.min(start.elapsed().as_secs_f64());
        assert_eq!(scores.len(), refs.len());
    }
    println!(
        "featurize + score {} candidates: {:.1} ms (best of 5, {} threads)",
        refs.len(),
        best * 1e3,
        rayon::current_num_threads()
    );
}

fn train_on_database(path: &std::ffi::OsStr) -> Model {
    let mut db = Database::open(path).expect("database");
    let start = Instant::now();
    let f =
        tessel::model_cmd::featurize_records(&mut db, TargetKind::Cuda, "sm_90a").expect("records");
    println!(
        "featurized {} records ({} skipped) in {:.1} s",
        f.records,
        f.skipped,
        start.elapsed().as_secs_f64()
    );
    let mut main = None;
    for kind in ModelKind::all() {
        let start = Instant::now();
        let m = Model::train_kind(&f.set, kind).expect("train");
        println!(
            "trained {} on {} samples in {:.1} s",
            kind.name(),
            f.set.len(),
            start.elapsed().as_secs_f64()
        );
        if kind == ModelKind::DEFAULT {
            main = Some(m);
        }
    }
    main.expect("the default kind is in ModelKind::all")
}
