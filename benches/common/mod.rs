//! What the benches share: the CUDA cost model stored in a database, as a scorer.

use std::sync::Arc;
use tessel::cost_model::{DeviceSpec, Model, ModelScorer, Scorer};
use tessel::database::{Database, TargetKind};

/// The CUDA model stored in `db` for `arch` (or the database's only CUDA arch).
pub fn cuda_scorer(db: &str, arch: Option<&str>) -> Arc<dyn Scorer> {
    let db = Database::open(db).expect("open the database");
    let arch = tessel::model_cmd::resolve_arch(&db, TargetKind::Cuda, arch).expect("one CUDA arch");
    let stored = db
        .load_model(TargetKind::Cuda, &arch)
        .expect("read the model")
        .expect("a CUDA model in the database: run tessel model train --target cuda");
    let model = Model::from_stored(&stored, TargetKind::Cuda, &arch).expect("a usable model");
    println!("cost model: {} for cuda {arch}", model.kind().name());
    Arc::new(ModelScorer::new(model, DeviceSpec::cuda(&arch)))
}
