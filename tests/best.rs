//! `tessel best` and `tessel db`: a record committed through the library is found by the
//! command line on this machine's CPU target, printed in every form, exported, imported
//! into another database and found there identically.

use tessel::database::{target_key, Database, NewRecord};
use tessel::schedule::text;

mod cli_util;
use cli_util::tessel;

#[test]
fn best_finds_the_record_and_survives_export_and_import() {
    let dir = tempfile::tempdir().unwrap();
    let db_a = dir.path().join("a.db");
    let db_b = dir.path().join("b.db");
    let spec = "matmul:128x128x16";
    let (a, b) = (db_a.to_str().unwrap(), db_b.to_str().unwrap());

    // Nothing yet: a clear message and a non-zero exit.
    let (ok, _, err) = tessel(&["best", spec, "--target", "cpu", "--db", a]);
    assert!(!ok);
    assert!(err.contains("no successful record"), "{err}");

    // A record on this machine's CPU target; traces name the canonical blocks (t2).
    let w = tessel::workload::preset(spec).unwrap();
    let sched = std::fs::read_to_string("examples/schedules/cpu_matmul.sched")
        .unwrap()
        .replace("get_block(\"C\")", "get_block(\"t2\")");
    let trace = text::parse(&sched).unwrap();
    let key = target_key(&tessel::target::cpu_fingerprint().unwrap()).unwrap();
    let mut db = Database::open(&db_a).unwrap();
    db.commit(&NewRecord::ok(
        &w,
        key,
        trace.clone(),
        vec![1.0e-4, 1.2e-4, 1.1e-4],
    ))
    .unwrap();
    drop(db);

    let (ok, out, err) = tessel(&["best", spec, "--target", "cpu", "--db", a]);
    assert!(ok, "{err}");
    assert_eq!(text::parse(&out).unwrap(), trace);
    assert!(err.contains("measured  on this target"), "{err}");
    let (ok, c, _) = tessel(&["best", spec, "--target", "cpu", "--db", a, "--emit", "c"]);
    assert!(ok && c.contains("#pragma omp parallel for"));
    let (ok, ir, _) = tessel(&["best", spec, "--target", "cpu", "--db", a, "--emit", "ir"]);
    assert!(ok && ir.contains("T.parallel"));

    // A CUDA lookup never answers with a CPU record.
    let (ok, _, err) = tessel(&["best", spec, "--target", "cuda", "--db", a]);
    assert!(!ok, "{err}");

    let out_file = dir.path().join("share.db");
    let (ok, out, err) = tessel(&[
        "db",
        "export",
        "--out",
        out_file.to_str().unwrap(),
        "--db",
        a,
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("exported 1 records"), "{out}");
    let (ok, out, err) = tessel(&["db", "import", out_file.to_str().unwrap(), "--db", b]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with("accepted 1, duplicates 0, rejected 0"),
        "{out}"
    );
    let (_, from_a, _) = tessel(&["best", spec, "--target", "cpu", "--db", a]);
    let (_, from_b, _) = tessel(&["best", spec, "--target", "cpu", "--db", b]);
    assert_eq!(from_a, from_b);
    let (ok, out, _) = tessel(&["db", "stats", "--db", b]);
    assert!(ok && out.starts_with("1 records"), "{out}");

    // A file that is not a database is refused and nothing changes.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"not sqlite at all, just text").unwrap();
    let (ok, _, err) = tessel(&["db", "import", junk.to_str().unwrap(), "--db", b]);
    assert!(!ok);
    assert!(!err.is_empty());
    let (_, again, _) = tessel(&["best", spec, "--target", "cpu", "--db", b]);
    assert_eq!(again, from_a);
}
