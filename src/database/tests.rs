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
