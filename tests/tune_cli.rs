//! End to end on the CPU: `tessel tune` measures candidates and records them, `tessel best`
//! prints the best schedule from the database, a second run skips what was measured.

mod cli_util;
use cli_util::tessel;

#[test]
fn tune_then_best_on_the_cpu() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("t.sqlite");
    let db = db.to_str().expect("utf-8 path");
    let w = "matmul:64x64x64";
    let (ok, out, err) = tessel(&[
        "tune", w, "--target", "cpu", "--trials", "8", "--batch", "8", "--db", db, "--seed", "3",
    ]);
    assert!(ok, "tune failed:\n{out}\n{err}");
    assert!(out.contains("stopped   trial budget spent"), "{out}");
    assert!(out.contains("trials    8 measured"), "{out}");
    assert!(err.contains("round   1"), "no progress line:\n{err}");
    assert!(out.contains("sample_perfect_tile"), "no best trace:\n{out}");

    let (ok, out, err) = tessel(&["best", w, "--target", "cpu", "--db", db]);
    assert!(ok, "best failed:\n{out}\n{err}");
    assert!(out.starts_with("b0 = get_block(\"t2\")"), "{out}");
    assert!(err.contains("measured  on this target"), "{err}");

    // The same seed proposes the same candidates: all already measured.
    let (ok, out, err) = tessel(&[
        "tune",
        w,
        "--target",
        "cpu",
        "--trials",
        "8",
        "--batch",
        "8",
        "--db",
        db,
        "--seed",
        "3",
        "--time-limit",
        "0",
        "--retrain",
        "all",
    ]);
    assert!(ok, "second tune failed:\n{out}\n{err}");
    assert!(out.contains("stopped   time limit reached"), "{out}");

    let (ok, _, err) = tessel(&["best", "matmul:32x32x32", "--target", "cpu", "--db", db]);
    assert!(!ok);
    assert!(
        err.contains("no successful record for matmul:32x32x32"),
        "{err}"
    );
}

#[test]
fn an_unknown_retraining_is_refused_naming_the_choices() {
    let (ok, _, err) = tessel(&["tune", "matmul:16x16x16", "--retrain", "sometimes"]);
    assert!(!ok);
    assert!(
        err.contains("--retrain") && err.contains("focused") && err.contains("all"),
        "{err}"
    );
}

#[test]
fn report_json_has_the_documented_keys_and_stage_times_within_the_elapsed_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("t.sqlite");
    let json = dir.path().join("report.json");
    let (ok, out, err) = tessel(&[
        "tune",
        "matmul:16x16x16",
        "--target",
        "cpu",
        "--trials",
        "6",
        "--batch",
        "3",
        "--strategy",
        "random",
        "--seed",
        "1",
        "--db",
        db.to_str().expect("utf-8 path"),
        "--report-json",
        json.to_str().expect("utf-8 path"),
    ]);
    assert!(ok, "tune failed:\n{out}\n{err}");
    assert_eq!(err.matches("no cost model for cpu/").count(), 1, "{err}");
    assert!(err.contains("cand/s"), "{err}");
    let text = std::fs::read_to_string(&json).expect("the report was written");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let w = &doc["workloads"][0];
    assert_eq!(w["strategy"], "random");
    assert!(w["model"].is_null());
    assert_eq!(w["trials"], 6);
    let elapsed = w["elapsed_seconds"].as_f64().expect("elapsed_seconds");
    let rounds = w["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 2);
    let mut sum = 0.0;
    for r in rounds {
        for key in ["proposed", "scored", "measured", "failures", "best_seconds"] {
            assert!(r.get(key).is_some(), "round lacks {key}: {r}");
        }
        let s = &r["seconds"];
        for key in ["propose", "compile", "check_time", "record", "learn"] {
            sum += s[key].as_f64().unwrap_or_else(|| panic!("no {key} in {s}"));
        }
        // The timed runs are part of checking and timing, and every round timed some.
        let timed = r["timed_run_seconds"].as_f64().expect("timed_run_seconds");
        let check = s["check_time"].as_f64().expect("check_time");
        assert!(
            timed > 0.0 && timed <= check,
            "timed runs {timed} s, checking {check} s"
        );
    }
    assert!(w["timed_run_seconds"].as_f64().expect("total timed runs") > 0.0);
    assert!(
        sum > 0.0 && sum <= elapsed,
        "stages {sum} s, elapsed {elapsed} s"
    );
}

#[test]
fn confirm_times_the_fastest_again_and_keeps_the_second_timing() {
    use tessel::database::{target_key, Database, Provenance};
    let dir = tempfile::tempdir().expect("tempdir");
    let tune = |db: &str, confirm: &str| {
        let (ok, out, err) = tessel(&[
            "tune",
            "matmul:48x40x56",
            "--target",
            "cpu",
            "--trials",
            "12",
            "--batch",
            "12",
            "--seed",
            "5",
            "--db",
            db,
            "--confirm",
            confirm,
        ]);
        assert!(ok, "tune failed:\n{out}\n{err}");
        out
    };
    let w = tessel::workload::preset("matmul:48x40x56").unwrap();
    let key = target_key(&tessel::target::cpu_fingerprint().unwrap()).unwrap();
    let count = |db: &Database| db.stats().unwrap().records;

    let on = dir.path().join("on.sqlite");
    let out = tune(on.to_str().unwrap(), "2");
    let line = out
        .lines()
        .find(|l| l.starts_with("confirmed "))
        .unwrap_or_else(|| panic!("no confirmation:\n{out}"));
    assert!(line.contains(" -> "), "{line}");
    let db = Database::open(&on).unwrap();
    // Timed again, not new trials: still the 12 records, the 2 fastest re-measured with
    // their first timing kept as the claim.
    assert_eq!(count(&db), 12);
    // At least the first pass's 2 records were timed twice (later passes take the
    // records a slower second timing let into the 2 fastest).
    let twice: Vec<f64> = db
        .top_k(&w, &key, 12)
        .unwrap()
        .into_iter()
        .filter_map(|l| match l.record.provenance {
            Provenance::Verified {
                source: None,
                claimed_median_secs: Some(first),
            } => Some(first),
            _ => None,
        })
        .collect();
    let n: usize = line["confirmed ".len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        n >= 2 && twice.len() == n,
        "{n} confirmed, {} timed twice: {line}",
        twice.len()
    );
    assert!(twice.iter().all(|first| *first > 0.0));
    // The best reported is the database's best after the second timings.
    let best = db.best(&w, &key).unwrap().unwrap().record;
    let reported = out
        .lines()
        .find(|l| l.starts_with("best "))
        .unwrap_or_else(|| panic!("{out}"));
    let us = format!("{:.1} us", best.median_secs.unwrap() * 1e6);
    assert!(reported.contains(&us), "{reported} against {us}");

    let off = dir.path().join("off.sqlite");
    let out = tune(off.to_str().unwrap(), "0");
    assert!(!out.contains("confirmed "), "{out}");
    let db = Database::open(&off).unwrap();
    assert_eq!(count(&db), 12);
    assert_eq!(
        db.best(&w, &key).unwrap().unwrap().record.provenance,
        Provenance::Local
    );
}
