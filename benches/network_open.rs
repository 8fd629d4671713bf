//! Time to open a network's tasks (their spaces, each fed the database's records and
//! seeded with the other workloads' best traces) on a CUDA target, without a GPU: the
//! network is tuned with 0 trials on a target built from the records' own fingerprint,
//! so nothing is proposed or measured. `--db` is opened as it is (a copy is not made:
//! nothing is written with 0 trials).
//!
//! ```text
//! cargo bench --bench network_open -- --db DB [NETWORK_FILE]
//! ```
//!
//! DB: e.g. the shipped records (`tessel db import database/*.all.jsonl.gz --db DB`);
//! NETWORK_FILE defaults to `benches/networks/resnet50-b1.toml`. Prints the opening time of
//! three runs.

use tessel::database::Database;
use tessel::network::Network;
use tessel::target::cuda::CudaLimits;
use tessel::target::TargetFingerprint;
use tessel::tune::{TuneTarget, Tuner};

fn main() {
    let mut db_path = None;
    let mut file = "benches/networks/resnet50-b1.toml".to_string();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--db" => db_path = it.next(),
            _ if a.starts_with("--") => {}
            _ => file = a,
        }
    }
    let db_path = db_path.expect("--db DB");
    let text = std::fs::read_to_string(&file).expect("read the network file");
    let net = Network::parse(&text, &file).expect("a network file");
    let mut db = Database::open(std::path::Path::new(&db_path)).expect("open the database");
    // The shipped records' H100 target (its records are fed back to their tasks).
    let target = TuneTarget::Cuda {
        arch: "sm_90a".into(),
        limits: CudaLimits::sm90_default(),
        fingerprint: TargetFingerprint {
            kind: "cuda".into(),
            arch: "sm_90a".into(),
            device: "NVIDIA H100 80GB HBM3".into(),
            toolchain: "nvrtc 13.0, driver 13.0".into(),
        },
    };
    println!("threads: {}", rayon::current_num_threads());
    for run in 0..3 {
        let report = Tuner::new(target.clone())
            .with_trials(0)
            .with_db(&mut db)
            .tune_network(&net.tasks, |_, _| {})
            .expect("the network opens");
        println!(
            "run {run}: {} tasks opened in {:.2} s",
            report.tasks.len(),
            report.opened.as_secs_f64()
        );
    }
}
