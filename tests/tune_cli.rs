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
