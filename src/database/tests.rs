//! Unit tests of the store's internals: schema creation, refusal of foreign files,
//! the key-collision check, the median.

use super::*;
use crate::schedule::Trace;
use crate::workload::preset;

fn target() -> TargetKey {
    TargetKey {
        kind: TargetKind::Cpu,
        arch: "x86_64-avx2".into(),
        device: "AMD EPYC 7B13".into(),
        toolchain: "gcc 12.2".into(),
    }
}

#[test]
fn a_new_database_has_the_current_schema() {
    let db = Database::open_in_memory().unwrap();
    let v: i64 = db
        .conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let tables: Vec<String> = db
        .conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(
        tables,
        [
            "imports",
            "models",
            "record_features",
            "records",
            "targets",
            "workloads"
        ]
    );
}

#[test]
fn a_file_uses_wal_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    drop(Database::open(&path).unwrap());
    let db = Database::open(&path).unwrap();
    let mode: String = db
        .conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_foreign_sqlite_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE notes (x TEXT)")
        .unwrap();
    let err = Database::open(&path).unwrap_err();
    assert!(matches!(err, DatabaseError::NotTessel { .. }), "{err}");
}

#[test]
fn a_lookup_confirms_the_canonical_text() {
    let mut db = Database::open_in_memory().unwrap();
    let w = preset("matmul:8x8x8").unwrap();
    let rec = NewRecord::ok(&w, target(), Trace::default(), vec![1e-6]);
    db.commit(&rec).unwrap();
    assert!(db.best(&w, &target()).unwrap().is_some());
    db.conn
        .execute(
            "UPDATE workloads SET canonical_text = 'tessel-workload v1\n'",
            [],
        )
        .unwrap();
    let err = db.best(&w, &target()).unwrap_err();
    assert!(matches!(err, DatabaseError::KeyMismatch { .. }), "{err}");
    let err = db.commit(&rec).unwrap_err();
    assert!(matches!(err, DatabaseError::KeyMismatch { .. }), "{err}");
}

#[test]
fn median_of_odd_even_and_bad_inputs() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[1.0, f64::NAN]), None);
}

/// A version-2 database with one record, written as version 2 wrote it.
fn version_2_file(dir: &std::path::Path, w: &crate::workload::Workload) -> std::path::PathBuf {
    let path = dir.join("v2.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(MIGRATIONS[0]).unwrap();
    conn.execute_batch(MIGRATIONS[1]).unwrap();
    conn.pragma_update(None, "user_version", 2).unwrap();
    let t = target();
    conn.execute(
        "INSERT INTO workloads (key, canonical_text, format_version) VALUES (?1, ?2, 1)",
        rusqlite::params![w.key(), w.canonical_text()],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO targets (kind, arch, device, toolchain) VALUES ('cpu', ?1, ?2, ?3)",
        rusqlite::params![t.arch, t.device, t.toolchain],
    )
    .unwrap();
    let json = crate::schedule::json::to_json(&Trace::default());
    conn.execute(
        "INSERT INTO records (workload_key, target_id, trace_json, dedup_key, status, \
         run_secs, median_secs, tessel_version, created_at) \
         VALUES (?1, 1, ?2, ?3, 'ok', '[1e-6]', 1e-6, '0.1.0', 0)",
        rusqlite::params![w.key(), json, sha256_hex(&json)],
    )
    .unwrap();
    path
}

#[test]
fn records_of_version_2_become_unknown_and_rank_after_those_measured_here() {
    let dir = tempfile::tempdir().unwrap();
    let w = preset("matmul:8x8x8").unwrap();
    let mut db = Database::open(version_2_file(dir.path(), &w)).unwrap();
    let old = db.best(&w, &target()).unwrap().unwrap().record;
    assert_eq!(old.provenance, Provenance::Unknown);
    assert_eq!(old.median_secs, Some(1e-6));
    // Slower, but measured here: a lookup prefers it for this exact target.
    let trace = crate::schedule::text::parse("b0 = get_block(\"t2\")\n").unwrap();
    db.commit(&NewRecord::ok(&w, target(), trace.clone(), vec![2e-6]))
        .unwrap();
    let best = db.best(&w, &target()).unwrap().unwrap().record;
    assert_eq!((best.trace, best.provenance), (trace, Provenance::Local));
    let stats = db.stats().unwrap();
    assert_eq!(stats.workloads[0].targets[0].measured_here, 1);
    assert_eq!(stats.workloads[0].targets[0].best_median_secs, Some(1e-6));
}

#[test]
fn file_forms_are_told_apart_by_their_first_bytes() {
    assert_eq!(
        FileFormat::sniff(b"SQLite format 3\0\x10\0"),
        FileFormat::Sqlite
    );
    assert_eq!(FileFormat::sniff(&[0x1f, 0x8b, 8, 0]), FileFormat::JsonlGz);
    assert_eq!(FileFormat::sniff(b"{\"workload_key\""), FileFormat::Jsonl);
    assert_eq!(FileFormat::sniff(b""), FileFormat::Jsonl);
}

#[test]
fn seeds_are_the_fastest_ok_traces_of_each_workload_in_order() {
    let mut db = Database::open_in_memory().unwrap();
    let own = preset("matmul:8x8x8").unwrap();
    let (a, b) = (
        preset("matmul:16x8x8").unwrap(),
        preset("matmul:8x16x8").unwrap(),
    );
    // Trace n: a split of the first loop by n (distinct traces, one record each).
    let trace = |n: u32| {
        crate::schedule::text::parse(&format!(
            "b0 = get_block(\"t2\")\ni0, i1, r0 = get_loops(b0)\ni0_0, i0_1 = split(i0, factors=[None, {n}])\n"
        ))
        .unwrap()
    };
    for (w, secs) in [
        (&own, 1e-7),
        (&a, 4e-6),
        (&b, 2e-6),
        (&a, 1e-6),
        (&a, 3e-6),
        (&b, 5e-6),
    ] {
        let n = (secs * 1e7) as u32 + if std::ptr::eq(w, &b) { 100 } else { 0 };
        db.commit(&NewRecord::ok(w, target(), trace(n), vec![secs]))
            .unwrap();
    }
    // A failure is no seed, however it ranks.
    db.commit(&NewRecord::failed(
        &a,
        target(),
        trace(1),
        Status::CompileError,
        "no",
    ))
    .unwrap();
    let seeds = db.best_traces(TargetKind::Cpu, 2).unwrap();
    // Grouped by workload key, fastest first in each group, two per workload.
    let mut expected = vec![
        (own.key(), vec![trace(1)]),
        (a.key(), vec![trace(10), trace(30)]),
        (b.key(), vec![trace(120), trace(150)]),
    ];
    expected.sort_by(|x, y| x.0.cmp(&y.0));
    let expected: Vec<(String, Trace)> = expected
        .into_iter()
        .flat_map(|(k, t)| t.into_iter().map(move |t| (k.clone(), t)))
        .collect();
    assert_eq!(seeds, expected);
    // Of another kind of target: none.
    assert!(db.best_traces(TargetKind::Cuda, 2).unwrap().is_empty());
}
