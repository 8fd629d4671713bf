//! The record database end to end: commits and lookups, sharing through files, real
//! concurrent and killed writer processes, and untrusted files that must be refused.
//!
//! The process tests re-run this test executable as a child (`child_writer`, selected
//! with `--exact` and given its job through `TESSEL_TEST_*` environment variables); run
//! without those variables, `child_writer` does nothing.

use rusqlite::Connection;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tessel::database::{
    canonical_program, Committed, Database, DatabaseError, Filter, ImportMode, Match, NewRecord,
    Status, TargetKey, TargetKind, SCHEMA_VERSION,
};
use tessel::schedule::{AnnArg, IntArg, Schedule, Target, Trace};
use tessel::workload::{preset, Workload};

fn matmul() -> Workload {
    preset("matmul:16x16x16").unwrap()
}

fn target(kind: TargetKind, arch: &str, device: &str) -> TargetKey {
    TargetKey {
        kind,
        arch: arch.into(),
        device: device.into(),
        toolchain: "nvrtc 13.0, driver 13.0".into(),
    }
}

fn h100() -> TargetKey {
    target(TargetKind::Cuda, "sm_90a", "NVIDIA H100 80GB HBM3")
}

fn h200() -> TargetKey {
    target(TargetKind::Cuda, "sm_90a", "NVIDIA H200")
}

/// A valid trace of the canonical matmul: its `i` loop split by a sampled tile, tagged
/// with annotation `tag = n` so that traces differ.
fn trace(w: &Workload, tile: [i64; 2], tag: &str, n: i64) -> Trace {
    let mut s = Schedule::new(canonical_program(w).unwrap(), 0);
    let b = s.get_block("t2").unwrap();
    let loops = s.get_loops(b).unwrap();
    let t = s
        .sample_perfect_tile(loops[0], 2, 16, Some(tile.to_vec()))
        .unwrap();
    s.split(loops[0], &[Some(IntArg::Rv(t[0])), Some(IntArg::Rv(t[1]))])
        .unwrap();
    s.annotate(Target::Block(b), tag, AnnArg::Int(n)).unwrap();
    s.trace().clone()
}

fn ok(w: &Workload, t: &TargetKey, n: i64, secs: f64) -> NewRecord {
    NewRecord::ok(
        w,
        t.clone(),
        trace(w, [4, 4], "tag", n),
        vec![secs, secs * 1.1, secs * 0.9],
    )
}

fn sha(path: &Path) -> Vec<u8> {
    Sha256::digest(std::fs::read(path).unwrap()).to_vec()
}

fn jsonl(db: &Database) -> String {
    let mut out = Vec::new();
    db.export_jsonl(&mut out, &Filter::default()).unwrap();
    String::from_utf8(out).unwrap()
}

/// A database file with three ok records on the H100, one on the H200 and a failure.
fn populated(dir: &Path) -> PathBuf {
    let path = dir.join("source.db");
    let mut db = Database::open(&path).unwrap();
    let w = matmul();
    for (n, secs) in [(1, 3e-5), (2, 1e-5), (3, 2e-5)] {
        db.commit(&ok(&w, &h100(), n, secs)).unwrap();
    }
    db.commit(&ok(&w, &h200(), 4, 5e-6)).unwrap();
    let fail = NewRecord::failed(
        &w,
        h100(),
        trace(&w, [2, 8], "tag", 5),
        Status::CompileError,
        "ptxas: too many registers",
    );
    db.commit(&fail).unwrap();
    path
}

#[test]
fn best_prefers_exact_then_same_arch_never_other_kind() {
    let mut db = Database::open_in_memory().unwrap();
    let w = matmul();
    db.commit(&ok(&w, &h100(), 1, 3e-5)).unwrap();
    db.commit(&ok(&w, &h100(), 2, 1e-5)).unwrap();
    db.commit(&ok(&w, &h200(), 3, 5e-6)).unwrap();
    let best = db.best(&w, &h100()).unwrap().unwrap();
    assert_eq!(best.matched, Match::Exact);
    assert_eq!(best.record.median_secs, Some(1e-5));

    let other_h100 = target(TargetKind::Cuda, "sm_90a", "NVIDIA H100 PCIe");
    let fallback = db.best(&w, &other_h100).unwrap().unwrap();
    assert_eq!(
        fallback.matched,
        Match::Fallback {
            measured_on: h200()
        }
    );
    assert!(fallback.is_fallback());

    let ampere = target(TargetKind::Cuda, "sm_80", "NVIDIA A100");
    assert_eq!(db.best(&w, &ampere).unwrap(), None);
    let cpu = TargetKey {
        kind: TargetKind::Cpu,
        arch: "sm_90a".into(),
        device: "NVIDIA H100 80GB HBM3".into(),
        toolchain: "nvrtc 13.0, driver 13.0".into(),
    };
    assert_eq!(db.best(&w, &cpu).unwrap(), None, "never across kinds");

    let top = db.top_k(&w, &h100(), 10).unwrap();
    let medians: Vec<_> = top.iter().map(|l| l.record.median_secs.unwrap()).collect();
    assert_eq!(
        medians,
        vec![1e-5, 3e-5, 5e-6],
        "exact first, each group fastest first"
    );
    assert!(top[2].is_fallback());
}

#[test]
fn failures_are_kept_and_never_returned() {
    let mut db = Database::open_in_memory().unwrap();
    let w = matmul();
    let t = trace(&w, [2, 8], "tag", 1);
    let fail = NewRecord::failed(&w, h100(), t.clone(), Status::WrongAnswer, "max error 3.5");
    assert!(db.measured_keys(&w, &h100()).unwrap().is_empty());
    assert!(matches!(db.commit(&fail).unwrap(), Committed::Stored(_)));
    let key = tessel::database::trace_key(&t);
    assert_eq!(db.measured_keys(&w, &h100()).unwrap(), [key].into());
    assert!(db.measured_keys(&w, &h200()).unwrap().is_empty());
    assert_eq!(db.best(&w, &h100()).unwrap(), None);
    assert_eq!(
        db.stats().unwrap().by_status,
        vec![(Status::WrongAnswer, 1)]
    );
}

#[test]
fn a_duplicate_is_reported_not_stored() {
    let mut db = Database::open_in_memory().unwrap();
    let w = matmul();
    let Committed::Stored(id) = db.commit(&ok(&w, &h100(), 1, 1e-5)).unwrap() else {
        panic!("first commit must store");
    };
    assert_eq!(
        db.commit(&ok(&w, &h100(), 1, 2e-5)).unwrap(),
        Committed::Duplicate(id)
    );
    assert!(matches!(
        db.commit(&ok(&w, &h200(), 1, 2e-5)).unwrap(),
        Committed::Stored(_)
    ));
    assert_eq!(db.stats().unwrap().records, 2);
}

#[test]
fn commit_refuses_impossible_records() {
    let mut db = Database::open_in_memory().unwrap();
    let w = matmul();
    for runs in [
        vec![],
        vec![1e-12],
        vec![-1.0],
        vec![f64::NAN],
        vec![7200.0],
    ] {
        let mut r = ok(&w, &h100(), 1, 1e-5);
        r.run_secs = runs.clone();
        let err = db.commit(&r).unwrap_err();
        assert!(
            matches!(err, DatabaseError::InvalidRecord(_)),
            "{runs:?}: {err}"
        );
    }
    let mut r = ok(&w, &h100(), 1, 1e-5);
    r.workload_key = "0".repeat(64);
    assert!(matches!(
        db.commit(&r),
        Err(DatabaseError::InvalidRecord(_))
    ));
    assert_eq!(db.stats().unwrap().records, 0);
}

#[test]
fn export_then_import_answers_best_identically() {
    let dir = tempfile::tempdir().unwrap();
    let source = Database::open(populated(dir.path())).unwrap();
    let file = dir.path().join("shared.db");
    assert_eq!(source.export(&file, &Filter::default()).unwrap(), 5);
    assert!(matches!(
        source.export(&file, &Filter::default()),
        Err(DatabaseError::Exists { .. })
    ));
    let before = sha(&file);

    let mut dest = Database::open(dir.path().join("dest.db")).unwrap();
    let report = dest.import(&file, ImportMode::AllOrNothing).unwrap();
    assert!(report.merged);
    assert_eq!(report.accepted.len(), 5, "{report:?}");
    assert!(report.rejected.is_empty() && report.duplicates.is_empty());
    assert_eq!(sha(&file), before, "the imported file is never modified");

    let w = matmul();
    let other = target(TargetKind::Cuda, "sm_90a", "NVIDIA GH200");
    for t in [h100(), h200(), other] {
        let a = source.best(&w, &t).unwrap().unwrap();
        let b = dest.best(&w, &t).unwrap().unwrap();
        assert_eq!((a.matched, a.record.trace), (b.matched, b.record.trace));
        assert_eq!(a.record.median_secs, b.record.median_secs);
    }
    assert_eq!(jsonl(&source), jsonl(&dest));

    let again = dest.import(&file, ImportMode::AllOrNothing).unwrap();
    assert_eq!((again.accepted.len(), again.duplicates.len()), (0, 5));
}

#[test]
fn export_filters_best_only() {
    let dir = tempfile::tempdir().unwrap();
    let source = Database::open(populated(dir.path())).unwrap();
    let file = dir.path().join("best.db");
    let filter = Filter {
        workload: Some(matmul().key()),
        target: Some(h100()),
        best_only: true,
    };
    assert_eq!(source.export(&file, &filter).unwrap(), 1);
    let mut dest = Database::open_in_memory().unwrap();
    dest.import(&file, ImportMode::AllOrNothing).unwrap();
    let best = dest.best(&matmul(), &h100()).unwrap().unwrap();
    assert_eq!(best.record.median_secs, Some(1e-5));
    assert_eq!(dest.stats().unwrap().by_target, vec![(h100(), 1)]);
}

#[test]
fn jsonl_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let source = Database::open(populated(dir.path())).unwrap();
    let text = jsonl(&source);
    assert_eq!(text.lines().count(), 5);
    let mut dest = Database::open_in_memory().unwrap();
    let report = dest
        .import_jsonl(text.as_bytes(), ImportMode::AllOrNothing)
        .unwrap();
    assert_eq!(report.accepted, vec![1, 2, 3, 4, 5]);
    assert_eq!(jsonl(&dest), text);
    let w = matmul();
    assert_eq!(
        source.best(&w, &h100()).unwrap().unwrap().record.trace,
        dest.best(&w, &h100()).unwrap().unwrap().record.trace
    );
}

#[test]
fn newer_schema_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated(dir.path());
    let file = dir.path().join("future.db");
    Database::open(&path)
        .unwrap()
        .export(&file, &Filter::default())
        .unwrap();
    Connection::open(&file)
        .unwrap()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    let before = sha(&file);
    let err = Database::open(&file).unwrap_err();
    assert!(
        matches!(err, DatabaseError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1),
        "{err}"
    );
    let mut dest = Database::open_in_memory().unwrap();
    let err = dest.import(&file, ImportMode::SkipRejected).unwrap_err();
    assert!(
        matches!(err, DatabaseError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1),
        "{err}"
    );
    assert_eq!(sha(&file), before);
    assert_eq!(dest.stats().unwrap().records, 0);
}

/// Imports `file` into a database holding one record, expecting nothing to change.
fn assert_refused(file: &Path) -> String {
    let mut dest = Database::open_in_memory().unwrap();
    let w = matmul();
    dest.commit(&ok(&w, &h100(), 99, 1e-3)).unwrap();
    let before_db = jsonl(&dest);
    let before_file = sha(file);
    let outcome = dest.import(file, ImportMode::AllOrNothing);
    assert_eq!(jsonl(&dest), before_db, "nothing partial is merged");
    assert_eq!(sha(file), before_file, "the source is never modified");
    match outcome {
        Err(e) => e.to_string(),
        Ok(report) => {
            assert!(!report.merged && !report.rejected.is_empty(), "{report:?}");
            format!("{:?}", report.rejected)
        }
    }
}

#[test]
fn damaged_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shared.db");
    Database::open(populated(dir.path()))
        .unwrap()
        .export(&file, &Filter::default())
        .unwrap();
    let bytes = std::fs::read(&file).unwrap();

    let text = dir.path().join("text.db");
    std::fs::write(&text, "tessel records, honest\n".repeat(100)).unwrap();
    let why = assert_refused(&text);
    assert!(why.contains("not a readable SQLite database"), "{why}");

    let truncated = dir.path().join("truncated.db");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let why = assert_refused(&truncated);
    assert!(!why.is_empty());

    // Damage the records table's root page (the middle of the file may be another
    // table's, or free, since the schema grew).
    let corrupted = dir.path().join("corrupted.db");
    let (root, page): (i64, i64) = {
        let conn = rusqlite::Connection::open(&file).unwrap();
        let root = conn
            .query_row(
                "SELECT rootpage FROM sqlite_schema WHERE name = 'records'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let page = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        (root, page)
    };
    let mut flipped = bytes.clone();
    let start = usize::try_from((root - 1) * page).unwrap();
    for b in &mut flipped[start + 8..start + usize::try_from(page).unwrap()] {
        *b = !*b;
    }
    std::fs::write(&corrupted, &flipped).unwrap();
    let why = assert_refused(&corrupted);
    assert!(!why.is_empty());
}

/// An export of the populated database with `sql` run on it.
fn tampered(dir: &Path, name: &str, sql: &str) -> PathBuf {
    let file = dir.join(name);
    Database::open(dir.join("source.db"))
        .unwrap()
        .export(&file, &Filter::default())
        .unwrap();
    Connection::open(&file).unwrap().execute_batch(sql).unwrap();
    file
}

#[test]
fn bad_records_are_refused_with_their_id() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    let w = matmul();
    let overflowing = tessel::schedule::json::to_json(
        &trace(&w, [4, 4], "tag", 2).with_decision(2, tessel::schedule::Decision::Tile(vec![4, 8])),
    );
    let cases = [
        (
            "noreplay.db",
            "UPDATE records SET trace_json = replace(trace_json, '\"t2\"', '\"nope\"') WHERE id = 2"
                .to_string(),
            "does not replay",
        ),
        (
            "fast.db",
            "UPDATE records SET run_secs = '[1e-12]', median_secs = 1e-12 WHERE id = 2".into(),
            "impossible",
        ),
        (
            "negative.db",
            "UPDATE records SET run_secs = '[-1.0]', median_secs = -1.0 WHERE id = 2".into(),
            "impossible",
        ),
        (
            "median.db",
            "UPDATE records SET median_secs = 1.0 WHERE id = 2".into(),
            "not the median",
        ),
        (
            "oob.db",
            format!(
                "UPDATE records SET trace_json = '{}' WHERE id = 2",
                overflowing.replace('\'', "''")
            ),
            "does not replay",
        ),
        (
            "status.db",
            "PRAGMA ignore_check_constraints = ON; \
             UPDATE records SET status = 'great' WHERE id = 2"
                .into(),
            "unknown status",
        ),
        (
            "key.db",
            "PRAGMA foreign_keys = OFF; \
             UPDATE workloads SET canonical_text = canonical_text || ' '"
                .into(),
            "canonical",
        ),
    ];
    for (name, sql, expected) in cases {
        let file = tampered(dir.path(), name, &sql);
        let why = assert_refused(&file);
        assert!(why.contains(expected), "{name}: {why}");

        let mut dest = Database::open_in_memory().unwrap();
        let report = dest.import(&file, ImportMode::SkipRejected).unwrap();
        assert!(report.merged);
        assert!(
            report.rejected.iter().any(|r| r.source_id == 2),
            "{name}: {report:?}"
        );
        assert_eq!(
            report.accepted.len() + report.rejected.len(),
            5,
            "{name}: {report:?}"
        );
    }
}

#[test]
fn jsonl_bad_lines_are_refused_by_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let source = Database::open(populated(dir.path())).unwrap();
    let mut lines: Vec<String> = jsonl(&source).lines().map(String::from).collect();
    let bad = lines
        .iter()
        .position(|l| l.contains("\"status\":\"ok\""))
        .unwrap();
    let mut record: serde_json::Value = serde_json::from_str(&lines[bad]).unwrap();
    record["run_secs"] = serde_json::json!([-1.0]);
    record["median_secs"] = serde_json::json!(-1.0);
    lines[bad] = record.to_string();
    lines.push("{not json".into());
    let text = lines.join("\n");
    let mut dest = Database::open_in_memory().unwrap();
    let report = dest
        .import_jsonl(text.as_bytes(), ImportMode::AllOrNothing)
        .unwrap();
    assert!(!report.merged);
    let ids: Vec<i64> = report.rejected.iter().map(|r| r.source_id).collect();
    assert_eq!(ids, vec![bad as i64 + 1, 6]);
    assert!(
        report.rejected[0].reason.contains("impossible"),
        "{report:?}"
    );
    assert!(
        report.rejected[1].reason.contains("not a record"),
        "{report:?}"
    );
    assert_eq!(dest.stats().unwrap().records, 0);
}

const CHILD_DB: &str = "TESSEL_TEST_DB";
const CHILD_TAG: &str = "TESSEL_TEST_TAG";
const CHILD_COUNT: &str = "TESSEL_TEST_COUNT";

/// The child half of the process tests: commits `TESSEL_TEST_COUNT` records tagged
/// `TESSEL_TEST_TAG` to `TESSEL_TEST_DB`, printing `committed N` after each. Does nothing
/// when `TESSEL_TEST_DB` is unset (an ordinary test run).
#[test]
fn child_writer() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
    let tag = std::env::var(CHILD_TAG).unwrap();
    let count: i64 = std::env::var(CHILD_COUNT).unwrap().parse().unwrap();
    let mut db = Database::open(&path).unwrap();
    let w = matmul();
    let mut stdout = std::io::stdout();
    for n in 0..count {
        let r = NewRecord::ok(&w, h100(), trace(&w, [4, 4], &tag, n), vec![1e-5]);
        assert!(matches!(db.commit(&r).unwrap(), Committed::Stored(_)));
        writeln!(stdout, "committed {n}").unwrap();
        stdout.flush().unwrap();
    }
}

fn spawn_writer(db: &Path, tag: &str, count: i64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_writer", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DB, db)
        .env(CHILD_TAG, tag)
        .env(CHILD_COUNT, count.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The tags of the annotations in the stored records, with their values.
fn stored_tags(db: &Database) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = db
        .records(&Filter::default())
        .unwrap()
        .iter()
        .filter_map(|r| {
            let inst = r.trace.insts.last()?;
            let key = match inst.attr("key")? {
                tessel::schedule::Operand::Str(s) => s.clone(),
                _ => return None,
            };
            match inst.attr("value")? {
                tessel::schedule::Operand::Int(v) => Some((key, *v)),
                _ => None,
            }
        })
        .collect();
    out.sort();
    out
}

#[test]
fn two_writer_processes_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    drop(Database::open(&path).unwrap());
    let children: Vec<_> = ["a", "b"]
        .iter()
        .map(|tag| spawn_writer(&path, tag, 60))
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
    }
    let db = Database::open(&path).unwrap();
    let mut expected: Vec<(String, i64)> = ["a", "b"]
        .iter()
        .flat_map(|t| (0..60).map(move |n| (t.to_string(), n)))
        .collect();
    expected.sort();
    assert_eq!(stored_tags(&db), expected);
}

#[test]
fn a_killed_writer_leaves_a_sound_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.db");
    drop(Database::open(&path).unwrap());
    let mut child = spawn_writer(&path, "k", 1_000_000);
    let stdout = child.stdout.take().unwrap();
    let mut committed = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("committed ") {
            committed.push(n.parse::<i64>().unwrap());
            if committed.len() == 40 {
                break;
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let conn = Connection::open(&path).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    drop(conn);
    let db = Database::open(&path).unwrap();
    let stored = stored_tags(&db);
    for n in committed {
        assert!(stored.contains(&("k".to_string(), n)), "record {n} lost");
    }
}

/// Imports a record set shipped in `database/`, all or nothing, expecting `n` records.
fn import_shipped(db: &mut Database, file: &str, n: usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("database")
        .join(file);
    let f = std::fs::File::open(&path).unwrap();
    let report = db
        .import_jsonl(BufReader::new(f), ImportMode::AllOrNothing)
        .unwrap();
    assert!(report.merged, "{file}: {:?}", report.rejected);
    assert_eq!(report.accepted.len(), n, "{file}: {:?}", report.rejected);
}

/// The record set shipped in `database/` still replays and verifies with this version of
/// tessel, and answers a lookup for every suite workload on the GPU it was tuned on.
#[test]
fn the_shipped_best_record_set_imports_and_covers_the_suite() {
    let mut db = Database::open_in_memory().unwrap();
    import_shipped(&mut db, "h200-2026-11-21.best.jsonl", 15);
    let suite = [
        "matmul:1024x1024x1024",
        "matmul:2048x2048x2048",
        "matmul:4096x4096x4096",
        "matmul:128x3072x768",
        "matmul:512x768x3072",
        "matmul:1000x1000x1000",
        "matmul:4096x4096x64",
        "batch_matmul:b=16,m=512,n=512,k=64",
        "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
        "conv2d_nchw:n=1,c=256,h=14,w=14,k=256,r=3,s=3,stride=1,pad=1",
        "conv2d_nchw:n=1,c=512,h=7,w=7,k=512,r=3,s=3,stride=1,pad=1",
        "conv2d_nchw:n=16,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
        "conv2d_relu_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
        "conv2d_nchw:n=1,c=64,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1",
        "conv2d_nchw:n=1,c=256,h=56,w=56,k=64,r=1,s=1,stride=1,pad=0",
    ];
    let target = TargetKey {
        kind: TargetKind::Cuda,
        arch: "sm_90a".into(),
        device: "NVIDIA H200".into(),
        toolchain: "nvrtc 13.0, driver 13.0".into(),
    };
    let mut first = std::collections::BTreeMap::new();
    for spec in suite {
        let w = preset(spec).unwrap();
        let best = db.best(&w, &target).unwrap();
        let best = best.unwrap_or_else(|| panic!("no record for {spec}"));
        assert!(!best.is_fallback(), "{spec}");
        assert!(best.record.median_secs.is_some_and(|s| s > 0.0), "{spec}");
        first.insert(spec, best.record.median_secs.unwrap());
    }
    // The split-K run of 2026-11-22 (9 workloads) merges in: each lookup answers with the
    // faster of the two runs' records, and where split-K won the answer is an rfactor
    // trace that still replays on the workload.
    import_shipped(&mut db, "h200-2026-11-22.best.jsonl", 9);
    let mut improved = 0;
    for spec in suite {
        let w = preset(spec).unwrap();
        let best = db.best(&w, &target).unwrap().unwrap();
        let secs = best.record.median_secs.unwrap();
        assert!(secs <= first[spec], "{spec}: {secs} > {}", first[spec]);
        if secs < first[spec] {
            improved += 1;
            let split_k = best
                .record
                .trace
                .insts
                .iter()
                .any(|i| i.kind == tessel::schedule::InstKind::Rfactor);
            assert!(split_k, "{spec}: the faster record is not split-K");
            tessel::schedule::replay(
                &best.record.trace,
                tessel::database::canonical_program(&w).unwrap(),
                0,
            )
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        }
    }
    assert!(improved >= 7, "{improved} workloads improved");
}

/// The H100 records of 2026-11-22 (eight split-K workloads) answer exactly on the H100;
/// a workload tuned only on the H200 answers on the H100 as a fallback naming the H200.
#[test]
fn the_shipped_h100_records_answer_on_the_h100_and_h200_ones_fall_back() {
    let mut db = Database::open_in_memory().unwrap();
    import_shipped(&mut db, "h200-2026-11-21.best.jsonl", 15);
    import_shipped(&mut db, "h100-2026-11-22.best.jsonl", 8);
    let h100 = TargetKey {
        kind: TargetKind::Cuda,
        arch: "sm_90a".into(),
        device: "NVIDIA H100 80GB HBM3".into(),
        toolchain: "nvrtc 13.0, driver 13.0".into(),
    };
    for spec in [
        "matmul:512x768x3072",
        "matmul:128x3072x768",
        "matmul:1024x1024x1024",
        "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
        "conv2d_relu_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1",
        "conv2d_nchw:n=1,c=64,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1",
        "conv2d_nchw:n=1,c=256,h=14,w=14,k=256,r=3,s=3,stride=1,pad=1",
        "conv2d_nchw:n=1,c=512,h=7,w=7,k=512,r=3,s=3,stride=1,pad=1",
    ] {
        let w = preset(spec).unwrap();
        let best = db.best(&w, &h100).unwrap().unwrap();
        assert!(!best.is_fallback(), "{spec}");
        assert_eq!(best.record.target, h100, "{spec}");
    }
    let w = preset("matmul:2048x2048x2048").unwrap();
    let best = db.best(&w, &h100).unwrap().unwrap();
    match &best.matched {
        tessel::database::Match::Fallback { measured_on } => {
            assert_eq!(measured_on.device, "NVIDIA H200")
        }
        other => panic!("expected a fallback, got {other:?}"),
    }
}

/// The workload specs of the given kinds of entries (`gemm`, `conv`, `tensor_core`) of a
/// set file in `benches/`.
fn set_workloads(file: &str, kinds: &[&str]) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches")
        .join(file);
    let doc: toml::Table = std::fs::read_to_string(path).unwrap().parse().unwrap();
    kinds
        .iter()
        .flat_map(|kind| doc[*kind].as_array().unwrap().clone())
        .map(|e| e["workload"].as_str().unwrap().to_string())
        .collect()
}

/// The workload keys of [`set_workloads`].
fn set_keys(file: &str, kinds: &[&str]) -> std::collections::HashSet<String> {
    set_workloads(file, kinds)
        .iter()
        .map(|s| preset(s).unwrap().key())
        .collect()
}

/// The training set's records (`benches/training.toml`, tuned on the H100 on 2026-11-25)
/// import and answer for every training workload, and no training workload is one of the
/// validation set's (`benches/validation.toml`): transfer and the cost model learn from
/// shapes the validation figures never include.
#[test]
fn the_shipped_training_records_cover_the_training_set_and_none_of_the_validation_set() {
    let training = set_workloads("training.toml", &["gemm", "conv"]);
    let validation = set_keys("validation.toml", &["gemm", "conv"]);
    assert_eq!(training.len(), 40);
    let mut db = Database::open_in_memory().unwrap();
    import_shipped(&mut db, "h100-2026-11-25.best.jsonl", 28);
    let h100 = h100();
    let mut answered = 0;
    for spec in &training {
        let w = preset(spec).unwrap();
        assert!(
            !validation.contains(&w.key()),
            "{spec} is in the validation set"
        );
        if let Some(best) = db.best(&w, &h100).unwrap() {
            assert!(!best.is_fallback(), "{spec}");
            answered += 1;
        }
    }
    // Every conv of the set and its first twelve GEMMs were tuned.
    assert_eq!(answered, 28);
}

/// The tensor-core records of 2026-11-26 (TF32 GEMMs on wgmma, an f16 GEMM) import and
/// answer for their workloads on the H100, and none is a validation workload's shape.
#[test]
fn the_shipped_tf32_records_answer_their_workloads() {
    let mut db = Database::open_in_memory().unwrap();
    import_shipped(&mut db, "h100-2026-11-26.best.jsonl", 5);
    let h100 = h100();
    for spec in [
        "matmul:4096x4096x4096,math=tf32",
        "matmul:2048x2048x2048,math=tf32",
        "matmul:m=1009,n=523,k=311,math=tf32",
        "dense_bias_relu:m=128,n=3072,k=768,math=tf32",
        "matmul:m=4096,n=4096,k=4096,dtype=f16,acc=f32",
    ] {
        let w = preset(spec).unwrap();
        let best = db.best(&w, &h100).unwrap().unwrap();
        assert!(!best.is_fallback(), "{spec}");
        let trace = tessel::schedule::text::print(&best.record.trace);
        assert!(trace.contains("wgmma_sync"), "{spec}: {trace}");
    }
}

/// The 16-bit training set's records (`[[tensor_core]]` of `benches/training.toml`, tuned
/// on the H100 on 2026-11-27) answer every one of its workloads with a tensor-core
/// schedule, and none is one of the validation set's 16-bit GEMMs.
#[test]
fn the_shipped_16_bit_training_records_answer_their_workloads_and_no_validation_one() {
    let training = set_workloads("training.toml", &["tensor_core"]);
    let validation = set_keys("validation.toml", &["tensor_core"]);
    assert_eq!(training.len(), 16);
    let mut db = Database::open_in_memory().unwrap();
    import_shipped(&mut db, "h100-2026-11-27.best.jsonl", 16);
    let h100 = h100();
    for spec in &training {
        let w = preset(spec).unwrap();
        assert!(
            !validation.contains(&w.key()),
            "{spec} is in the validation set"
        );
        let best = db.best(&w, &h100).unwrap().unwrap();
        assert!(!best.is_fallback(), "{spec}");
        let trace = tessel::schedule::text::print(&best.record.trace);
        assert!(trace.contains("mma_sync"), "{spec}: {trace}");
    }
}

/// The training set's convolutions with a window, tuned again on the H200 on 2026-11-30
/// with the GEMM view and transposing kernels in the space (`benches/record_set.sh`):
/// their best records import and answer every one of them on the H200, some of them
/// with the GEMM view; none is a validation workload's shape.
#[test]
fn the_shipped_windowed_conv_records_answer_their_workloads_some_as_a_gemm() {
    let windowed: Vec<String> = set_workloads("training.toml", &["conv"])
        .into_iter()
        .filter(|s| !s.contains("r=1,s=1"))
        .collect();
    let validation = set_keys("validation.toml", &["conv"]);
    assert_eq!(windowed.len(), 8);
    let mut db = Database::open_in_memory().unwrap();
    import_shipped(&mut db, "h200-2026-11-30.best.jsonl", 8);
    let mut views = 0;
    for spec in &windowed {
        let w = preset(spec).unwrap();
        assert!(
            !validation.contains(&w.key()),
            "{spec} is a validation conv"
        );
        let best = db.best(&w, &h200()).unwrap().unwrap();
        assert!(!best.is_fallback(), "{spec}");
        views += usize::from(tessel::schedule::text::print(&best.record.trace).contains("im2col("));
    }
    assert!(views > 0, "no best record takes the GEMM view");
}

#[test]
fn training_records_are_read_whole_or_since_a_record() {
    let mut db = Database::open_in_memory().unwrap();
    let w = matmul();
    for n in 1..=3 {
        db.commit(&ok(&w, &h100(), n, 1e-5 * n as f64)).unwrap();
    }
    db.commit(&ok(&w, &h200(), 4, 1e-5)).unwrap();
    let all = db.ok_records_of(TargetKind::Cuda, "sm_90a").unwrap();
    assert_eq!(all.len(), 4, "both devices of the arch");
    assert!(all.windows(2).all(|p| p[0].id < p[1].id), "in id order");
    let since = db
        .ok_records_after(TargetKind::Cuda, "sm_90a", all[1].id)
        .unwrap();
    assert_eq!(
        since.iter().map(|r| r.id).collect::<Vec<_>>(),
        all[2..].iter().map(|r| r.id).collect::<Vec<_>>()
    );
    let last = all.last().unwrap().id;
    assert!(db
        .ok_records_after(TargetKind::Cuda, "sm_90a", last)
        .unwrap()
        .is_empty());
}

/// The tuning set (`benches/tuning.toml`, on which changes of the rules and defaults are
/// A/B'd) shares no shape with the validation or the training set, every entry is a
/// workload spec, and no shipped record is of one of its workloads: an A/B on it starts
/// from the same shipped records as a user's tune of an unseen shape.
#[test]
fn the_tuning_set_is_disjoint_from_the_validation_and_training_sets_and_from_the_shipped_records() {
    let kinds = ["gemm", "conv", "tensor_core"];
    let tuning = set_keys("tuning.toml", &kinds);
    assert_eq!(tuning.len(), 24 + 8 + 16);
    assert!(tuning.is_disjoint(&set_keys("validation.toml", &kinds)));
    assert!(tuning.is_disjoint(&set_keys("training.toml", &kinds)));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("database");
    let mut shipped = std::collections::HashSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".best.jsonl") {
            continue;
        }
        for line in BufReader::new(std::fs::File::open(&path).unwrap()).lines() {
            let record: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            let key = record["workload_key"].as_str().unwrap().to_string();
            assert!(
                !tuning.contains(&key),
                "{}: {key} is a tuning workload",
                path.display()
            );
            shipped.insert(key);
        }
    }
    // The keys compared are of one kind: the training set's workloads are found.
    let training = set_keys("training.toml", &kinds);
    assert!(shipped.intersection(&training).count() >= 28, "{shipped:?}");
}
