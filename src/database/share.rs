//! Sharing records as files: export (an SQLite copy or JSONL text) and import (merge).
//!
//! An imported file is untrusted. Before any of its records is merged:
//!
//! 1. the file is opened read-only (`SQLITE_OPEN_READ_ONLY`, so it is never modified),
//!    with `SQLITE_DBCONFIG_DEFENSIVE` on, triggers and views disabled and
//!    `PRAGMA trusted_schema = OFF`, so its schema cannot run code of its own;
//! 2. `PRAGMA quick_check` must answer `ok` (a truncated or corrupted file fails here, or
//!    earlier, as not a database);
//! 3. `user_version` must be a schema version this build knows (1..=[`SCHEMA_VERSION`]);
//! 4. every record goes through [`check_imported`]: a known target kind and status, a
//!    workload text that parses, is canonical and hashes to the record's key, a trace
//!    JSON that parses, decides every sampling instruction, replays on the workload and
//!    whose program passes the verifier, and for an `ok` record run times and median
//!    within [`MIN_SECS`](super::MIN_SECS)..[`MAX_SECS`](super::MAX_SECS), the median
//!    being that of the run times; the dedup key is recomputed, never read;
//!    (records are checked in parallel, each workload parsed and lowered once);
//! 5. the accepted records are merged in one `BEGIN IMMEDIATE` transaction; a workload
//!    whose stored text differs from the file's is refused. The transaction is rolled
//!    back on any error, and in [`ImportMode::AllOrNothing`] when a record was refused,
//!    so the database is either unchanged or holds every accepted record.
//!
//! Merged records are marked as imported, with the file's name, the SHA-256 of its bytes
//! and the time of the import: their run times are the file's claim until
//! `tessel db verify` measures them here. [`Database::import_file`] tells the three file
//! forms apart by their first bytes (SQLite header, gzip magic, else JSON Lines).

use super::store::{filter_sql, insert_record, Origin, RECORD_COLUMNS};
use super::types::{Committed, Filter, ImportMode, ImportReport, ImportSource, Rejection};
use super::validate::{check_imported, RawRecord, WorkloadCache};
use super::{now_unix, Context, Database, DatabaseError, Result, SCHEMA_VERSION};
use crate::schedule::json::to_json;
use rayon::prelude::*;
use rusqlite::config::DbConfig;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

/// One record in the JSONL form: self-contained, with its workload text and target.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRecord {
    workload_key: String,
    workload: String,
    target: JsonTarget,
    trace: serde_json::Value,
    status: String,
    error: Option<String>,
    run_secs: Vec<f64>,
    median_secs: Option<f64>,
    tessel_version: String,
    created_at: i64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonTarget {
    kind: String,
    arch: String,
    device: String,
    toolchain: String,
}

fn io_err(path: &Path, source: std::io::Error) -> DatabaseError {
    DatabaseError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Database {
    /// Writes the records `filter` selects, with their workloads and targets, to a new
    /// SQLite file at `path` (refused if it exists), through `VACUUM INTO`: a consistent
    /// snapshot, never a copy of the live file. The file appears only when complete.
    /// Returns the number of records written.
    pub fn export(&self, path: impl AsRef<Path>, filter: &Filter) -> Result<u64> {
        let path = path.as_ref();
        if path.exists() {
            return Err(DatabaseError::Exists {
                path: path.to_path_buf(),
            });
        }
        let mut partial = path.as_os_str().to_owned();
        partial.push(format!(".partial-{}", std::process::id()));
        let partial = PathBuf::from(partial);
        let _ = std::fs::remove_file(&partial);
        let result = self.export_to(&partial, filter);
        let renamed = result.and_then(|n| {
            std::fs::rename(&partial, path)
                .map(|()| n)
                .map_err(|e| io_err(path, e))
        });
        if renamed.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        renamed
    }

    fn export_to(&self, partial: &Path, filter: &Filter) -> Result<u64> {
        let target = partial.to_str().ok_or_else(|| {
            io_err(
                partial,
                std::io::Error::other("export path is not valid UTF-8"),
            )
        })?;
        self.conn
            .execute("VACUUM INTO ?1", [target])
            .ctx("writing the export (VACUUM INTO)")?;
        let mut out = Connection::open(partial).ctx("opening the export")?;
        if *filter != Filter::default() {
            let (where_sql, args) = filter_sql(filter);
            let tx = out.transaction().ctx("filtering the export")?;
            tx.execute(
                &format!(
                    "DELETE FROM records WHERE id NOT IN (SELECT r.id FROM records r \
                     JOIN targets t ON t.id = r.target_id WHERE {where_sql})"
                ),
                rusqlite::params_from_iter(args),
            )
            .ctx("filtering the export")?;
            tx.execute_batch(
                "DELETE FROM workloads WHERE key NOT IN (SELECT workload_key FROM records);
                 DELETE FROM targets WHERE id NOT IN (SELECT target_id FROM records);",
            )
            .ctx("filtering the export")?;
            tx.commit().ctx("filtering the export")?;
            out.execute_batch("VACUUM").ctx("compacting the export")?;
        }
        let _: String = out
            .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
            .ctx("finishing the export")?;
        let n: i64 = out
            .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
            .ctx("counting exported records")?;
        out.close().map_err(|(_, e)| e).ctx("closing the export")?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Writes the records `filter` selects as JSON Lines, one self-contained object per
    /// record (workload text, target, trace, outcome), in (workload, target, trace)
    /// order so that two exports diff well. Returns the number of records written.
    pub fn export_jsonl(&self, out: &mut impl Write, filter: &Filter) -> Result<u64> {
        let records = self.records(filter)?;
        let mut texts = std::collections::HashMap::new();
        let sink = Path::new("<jsonl output>");
        for r in &records {
            if !texts.contains_key(&r.workload_key) {
                let text = self.workload_text(&r.workload_key)?.unwrap_or_default();
                texts.insert(r.workload_key.clone(), text);
            }
            let trace: serde_json::Value =
                serde_json::from_str(&to_json(&r.trace)).map_err(|e| DatabaseError::Corrupt {
                    id: r.id,
                    detail: format!("trace JSON: {e}"),
                })?;
            let line = JsonRecord {
                workload_key: r.workload_key.clone(),
                workload: texts.get(&r.workload_key).cloned().unwrap_or_default(),
                target: JsonTarget {
                    kind: r.target.kind.name().into(),
                    arch: r.target.arch.clone(),
                    device: r.target.device.clone(),
                    toolchain: r.target.toolchain.clone(),
                },
                trace,
                status: r.status.name().into(),
                error: r.error.clone(),
                run_secs: r.run_secs.clone(),
                median_secs: r.median_secs,
                tessel_version: r.tessel_version.clone(),
                created_at: r.created_at,
            };
            let text = serde_json::to_string(&line).map_err(|e| DatabaseError::Corrupt {
                id: r.id,
                detail: e.to_string(),
            })?;
            writeln!(out, "{text}").map_err(|e| io_err(sink, e))?;
        }
        out.flush().map_err(|e| io_err(sink, e))?;
        Ok(records.len() as u64)
    }

    /// Merges the records of the SQLite file at `path` (an export of another database),
    /// after the checks of the [module documentation](self). The file is opened
    /// read-only and never modified. A file that is not a readable tessel database of a
    /// known version is an error and merges nothing; refused records are listed in the
    /// report with their id in the file.
    pub fn import(&mut self, path: impl AsRef<Path>, mode: ImportMode) -> Result<ImportReport> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
        let source = import_source(path, &bytes);
        let rows = read_untrusted(path)?;
        self.merge(rows, mode, source)
    }

    /// Merges a file in any of the three forms: an SQLite export, JSON Lines, or JSON
    /// Lines compressed with gzip. The form is read from the first bytes unless `format`
    /// forces one. The records are checked as by [`Database::import`] and marked as
    /// imported from this file (its name, SHA-256 and the time).
    pub fn import_file(
        &mut self,
        path: impl AsRef<Path>,
        format: Option<FileFormat>,
        mode: ImportMode,
    ) -> Result<ImportReport> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
        let source = import_source(path, &bytes);
        let rows = match format.unwrap_or_else(|| FileFormat::sniff(&bytes)) {
            FileFormat::Sqlite => read_untrusted(path)?,
            FileFormat::Jsonl => jsonl_rows(&bytes[..])?,
            FileFormat::JsonlGz => {
                let mut text = Vec::new();
                flate2::read::MultiGzDecoder::new(&bytes[..])
                    .read_to_end(&mut text)
                    .map_err(|e| io_err(path, e))?;
                jsonl_rows(&text[..])?
            }
        };
        self.merge(rows, mode, source)
    }

    /// Merges records in the JSONL form written by [`Database::export_jsonl`], with the
    /// same checks as [`Database::import`]; records are named by their line number and
    /// marked as imported from `<stream>` with the SHA-256 of what was read.
    pub fn import_jsonl(
        &mut self,
        mut input: impl BufRead,
        mode: ImportMode,
    ) -> Result<ImportReport> {
        let mut bytes = Vec::new();
        input
            .read_to_end(&mut bytes)
            .map_err(|e| io_err(Path::new("<jsonl input>"), e))?;
        let source = import_source(Path::new("<stream>"), &bytes);
        let rows = jsonl_rows(&bytes[..])?;
        self.merge(rows, mode, source)
    }

    /// Checks every record (in parallel), then merges the accepted ones in one
    /// transaction, marked as imported from `source`.
    fn merge(
        &mut self,
        rows: Vec<(i64, std::result::Result<RawRecord, String>)>,
        mode: ImportMode,
        source: ImportSource,
    ) -> Result<ImportReport> {
        let mut report = ImportReport::default();
        let cache = WorkloadCache::build(rows.iter().filter_map(|(_, r)| r.as_ref().ok()));
        let checked: Vec<_> = rows
            .into_par_iter()
            .map(|(source_id, raw)| (source_id, raw.and_then(|r| check_imported(r, &cache))))
            .collect();
        let mut valid = Vec::new();
        for (source_id, checked) in checked {
            match checked {
                Ok(rec) => valid.push((source_id, rec)),
                Err(reason) => report.rejected.push(Rejection { source_id, reason }),
            }
        }
        let tx = self.write()?;
        tx.execute(
            "INSERT INTO imports (file, sha256, imported_at) VALUES (?1, ?2, ?3)",
            rusqlite::params![source.file, source.sha256, source.imported_at],
        )
        .ctx("recording the import")?;
        let origin = Origin::Imported(tx.last_insert_rowid());
        for (source_id, rec) in valid {
            match insert_record(&tx, &rec, origin) {
                Ok(Committed::Stored(_)) => report.accepted.push(source_id),
                Ok(Committed::Duplicate(_)) => report.duplicates.push(source_id),
                Err(e @ DatabaseError::KeyMismatch { .. }) => report.rejected.push(Rejection {
                    source_id,
                    reason: e.to_string(),
                }),
                Err(e) => return Err(e),
            }
        }
        report.rejected.sort_by_key(|r| r.source_id);
        if mode == ImportMode::AllOrNothing && !report.rejected.is_empty() {
            tx.rollback().ctx("rolling back the import")?;
            return Ok(report);
        }
        tx.commit().ctx("committing the import")?;
        report.merged = true;
        Ok(report)
    }
}

/// The forms of a file `tessel db import` reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// An SQLite database written by [`Database::export`].
    Sqlite,
    /// JSON Lines written by [`Database::export_jsonl`].
    Jsonl,
    /// The same, compressed with gzip (`.jsonl.gz`).
    JsonlGz,
}

impl FileFormat {
    /// The form of a file starting with `bytes`: the SQLite header, the gzip magic, else
    /// JSON Lines (whose parse then says what is wrong with anything else).
    pub fn sniff(bytes: &[u8]) -> FileFormat {
        if bytes.starts_with(b"SQLite format 3\0") {
            FileFormat::Sqlite
        } else if bytes.starts_with(&[0x1f, 0x8b]) {
            FileFormat::JsonlGz
        } else {
            FileFormat::Jsonl
        }
    }
}

/// The provenance of records imported from `path` whose bytes are `bytes`, now.
fn import_source(path: &Path, bytes: &[u8]) -> ImportSource {
    ImportSource {
        file: path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        sha256: Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        imported_at: now_unix(),
    }
}

/// The records of a JSONL text, by line number; a line that is not a record is a
/// rejection of that line. Lines are parsed in parallel.
fn jsonl_rows(input: &[u8]) -> Result<Vec<(i64, std::result::Result<RawRecord, String>)>> {
    let text = std::str::from_utf8(input).map_err(|e| {
        io_err(
            Path::new("<jsonl input>"),
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    Ok(text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|(i, line)| (i64::try_from(i + 1).unwrap_or(i64::MAX), jsonl_record(line)))
        .collect())
}

/// One JSONL line as a raw record.
fn jsonl_record(line: &str) -> std::result::Result<RawRecord, String> {
    serde_json::from_str::<JsonRecord>(line)
        .map_err(|e| format!("not a record: {e}"))
        .map(|j| RawRecord {
            workload_key: j.workload_key,
            canonical_text: j.workload,
            kind: j.target.kind,
            arch: j.target.arch,
            device: j.target.device,
            toolchain: j.target.toolchain,
            trace_json: j.trace.to_string(),
            status: j.status,
            error: j.error,
            run_secs: j.run_secs,
            median_secs: j.median_secs,
            tessel_version: j.tessel_version,
            created_at: j.created_at,
        })
}

/// Opens an untrusted file read-only and defensively, checks it, and reads its records
/// as loosely typed rows (a wrong type refuses that record, not the file).
fn read_untrusted(path: &Path) -> Result<Vec<(i64, std::result::Result<RawRecord, String>)>> {
    let not_db = |detail: String| DatabaseError::NotADatabase {
        path: path.to_path_buf(),
        detail,
    };
    if !path.is_file() {
        return Err(io_err(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        ));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| not_db(e.to_string()))?;
    for (cfg, on) in [
        (DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false),
        (DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false),
    ] {
        conn.set_db_config(cfg, on)
            .ctx("configuring the import connection")?;
    }
    conn.pragma_update(None, "trusted_schema", false)
        .ctx("turning trusted_schema off")?;
    let version = super::user_version(&conn, path)?;
    let mut stmt = conn
        .prepare("PRAGMA quick_check")
        .map_err(|e| not_db(e.to_string()))?;
    let problems: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect())
        .map_err(|e| not_db(format!("quick_check: {e}")))?;
    if problems != ["ok"] {
        return Err(not_db(format!("quick_check: {}", problems.join("; "))));
    }
    if version > SCHEMA_VERSION {
        return Err(DatabaseError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version < 1 {
        return Err(DatabaseError::NotTessel {
            path: path.to_path_buf(),
            detail: format!("user_version is {version}"),
        });
    }
    let columns =
        RECORD_COLUMNS.replacen("r.workload_key,", "r.workload_key, w.canonical_text,", 1);
    let sql = format!(
        "SELECT {columns} FROM records r LEFT JOIN workloads w ON w.key = r.workload_key \
         LEFT JOIN targets t ON t.id = r.target_id ORDER BY r.id"
    );
    let not_tessel = |e: rusqlite::Error| DatabaseError::NotTessel {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let mut stmt = conn.prepare(&sql).map_err(not_tessel)?;
    let n = stmt.column_count();
    let rows = stmt
        .query_map([], |r| {
            (0..n)
                .map(|i| r.get::<_, Value>(i))
                .collect::<rusqlite::Result<Vec<Value>>>()
        })
        .map_err(not_tessel)?;
    let mut out = Vec::new();
    for row in rows {
        let vals = row.map_err(|e| not_db(format!("reading records: {e}")))?;
        let id = match vals.first() {
            Some(Value::Integer(id)) => *id,
            other => return Err(not_db(format!("record id {other:?}"))),
        };
        out.push((id, raw_record(&vals)));
    }
    Ok(out)
}

/// Converts one untyped row (the columns of [`RECORD_COLUMNS`] with the workload text
/// after the key) into a [`RawRecord`], or says which column has the wrong type.
fn raw_record(v: &[Value]) -> std::result::Result<RawRecord, String> {
    const NAMES: [&str; 14] = [
        "id",
        "workload_key",
        "workload text",
        "target kind",
        "target arch",
        "target device",
        "target toolchain",
        "trace_json",
        "status",
        "error_text",
        "run_secs",
        "median_secs",
        "tessel_version",
        "created_at",
    ];
    let text = |i: usize| match v.get(i) {
        Some(Value::Text(s)) => Ok(s.clone()),
        Some(Value::Null) if i == 2 => Err("its workload is missing from the file".to_string()),
        Some(Value::Null) if (3..=6).contains(&i) => {
            Err("its target is missing from the file".to_string())
        }
        other => Err(format!("{} is not text ({other:?})", NAMES[i])),
    };
    let opt_text = |i: usize| match v.get(i) {
        Some(Value::Null) => Ok(None),
        _ => text(i).map(Some),
    };
    let opt_real = |i: usize| match v.get(i) {
        Some(Value::Null) => Ok(None),
        Some(Value::Real(x)) => Ok(Some(*x)),
        Some(Value::Integer(x)) => Ok(Some(*x as f64)),
        other => Err(format!("{} is not a number ({other:?})", NAMES[i])),
    };
    let created_at = match v.get(13) {
        Some(Value::Integer(x)) => *x,
        other => return Err(format!("created_at is not an integer ({other:?})")),
    };
    let runs = text(10)?;
    let run_secs: Vec<f64> =
        serde_json::from_str(&runs).map_err(|e| format!("run_secs is not a JSON array: {e}"))?;
    Ok(RawRecord {
        workload_key: text(1)?,
        canonical_text: text(2)?,
        kind: text(3)?,
        arch: text(4)?,
        device: text(5)?,
        toolchain: text(6)?,
        trace_json: text(7)?,
        status: text(8)?,
        error: opt_text(9)?,
        run_secs,
        median_secs: opt_real(11)?,
        tessel_version: text(12)?,
        created_at,
    })
}
