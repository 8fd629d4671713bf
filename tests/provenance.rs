//! Records say where they came from, and an imported claim can be checked here: a CPU
//! record exported, tampered with (a slow schedule claimed to run in 2 ns), gzipped and
//! imported is served by `tessel best` marked as imported; `tessel db verify` measures it
//! on this machine, flags the claim, and `tessel best` then answers with a record measured
//! here and a latency that is not the claim.

use std::io::Write;
use tessel::database::{target_key, Database, NewRecord, Provenance};
use tessel::schedule::{text, Trace};

mod cli_util;
use cli_util::tessel;

/// The claimed run time of the tampered record.
const CLAIM: f64 = 2e-9;

#[test]
fn a_tampered_import_is_served_as_imported_until_verify_measures_it_here() {
    let dir = tempfile::tempdir().unwrap();
    let (sender, receiver) = (dir.path().join("sender.db"), dir.path().join("mine.db"));
    let (a, b) = (sender.to_str().unwrap(), receiver.to_str().unwrap());
    let spec = "matmul:64x64x64";
    let w = tessel::workload::preset(spec).unwrap();
    let key = target_key(&tessel::target::cpu_fingerprint().unwrap()).unwrap();

    // The sender's database: the unscheduled program (slow) and a tiled, parallel
    // schedule, each with the run times the sender claims.
    let tiled = text::parse(
        &std::fs::read_to_string("examples/schedules/cpu_matmul.sched")
            .unwrap()
            .replace("get_block(\"C\")", "get_block(\"t2\")"),
    )
    .unwrap();
    let mut db = Database::open(&sender).unwrap();
    for (trace, claimed) in [(Trace::default(), 1e-3), (tiled, 1e-4)] {
        db.commit(&NewRecord::ok(&w, key.clone(), trace, vec![claimed]))
            .unwrap();
    }
    drop(db);

    // Exported, the slow one claimed to take 2 ns, gzipped.
    let jsonl = dir.path().join("shared.jsonl");
    let (ok, _, err) = tessel(&[
        "db",
        "export",
        "--format",
        "jsonl",
        "--out",
        jsonl.to_str().unwrap(),
        "--db",
        a,
    ]);
    assert!(ok, "{err}");
    let tampered: Vec<String> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|line| {
            let mut r: serde_json::Value = serde_json::from_str(line).unwrap();
            if r["trace"]["insts"].as_array().is_none_or(Vec::is_empty) {
                r["run_secs"] = serde_json::json!([CLAIM, CLAIM, CLAIM]);
                r["median_secs"] = serde_json::json!(CLAIM);
            }
            r.to_string()
        })
        .collect();
    let gz = dir.path().join("shared.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::default(),
    );
    writeln!(enc, "{}", tampered.join("\n")).unwrap();
    enc.finish().unwrap();

    // Imported as is (the form told from the bytes), served as an imported claim.
    let (ok, out, err) = tessel(&["db", "import", gz.to_str().unwrap(), "--db", b]);
    assert!(ok && out.starts_with("accepted 2,"), "{out}{err}");
    let (ok, trace, err) = tessel(&["best", spec, "--target", "cpu", "--db", b]);
    assert!(ok, "{err}");
    assert_eq!(text::parse(&trace).unwrap(), Trace::default(), "{err}");
    assert!(err.contains("claimed   for this target"), "{err}");
    assert!(err.contains("imported from shared.jsonl.gz"), "{err}");

    // Verified here: the 2 ns claim is flagged, the measurements stored.
    let (ok, out, err) = tessel(&["db", "verify", "--target", "cpu", "--top", "2", "--db", b]);
    assert!(ok, "{err}");
    let naive = out
        .lines()
        .find(|l| l.contains("claimed 0.0 us"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(naive.contains("OFF by more than 2x"), "{out}");
    assert!(out.contains("verified  2 records"), "{out}");

    // Now the answer was measured here, and its latency is no longer the claim.
    let (ok, _, err) = tessel(&["best", spec, "--target", "cpu", "--db", b]);
    assert!(ok, "{err}");
    assert!(err.contains("measured  on this target"), "{err}");
    assert!(err.contains("measured here by `tessel db verify`"), "{err}");
    let db = Database::open(&receiver).unwrap();
    let best = db.best(&w, &key).unwrap().unwrap().record;
    assert!(matches!(best.provenance, Provenance::Verified { .. }));
    let median = best.median_secs.unwrap();
    assert!(median > 2.0 * CLAIM * 10.0, "{median}");
    let naive = db
        .top_k(&w, &key, 2)
        .unwrap()
        .into_iter()
        .find(|l| l.record.trace == Trace::default())
        .unwrap()
        .record;
    assert!(
        matches!(naive.provenance, Provenance::Verified { claimed_median_secs: Some(c), .. } if c == CLAIM)
    );
    assert!(naive.median_secs.unwrap() > 2.0 * CLAIM);
}
