//! The record database: measured schedules in SQLite, looked up by workload and target,
//! shared between machines as files.
//!
//! * [`Database::open`] creates or opens a database: WAL journal, a busy timeout, every
//!   write in a `BEGIN IMMEDIATE` transaction, the schema version in `PRAGMA
//!   user_version`, upgraded by forward migrations. A file with a newer version than
//!   this build knows is refused before anything is written to it.
//! * [`Database::commit`] stores a record once per (workload, target, trace);
//!   [`Database::measured_keys`] tells the tuner what not to measure again.
//! * [`Database::best`] and [`Database::top_k`] return `ok` records only, fastest
//!   first: measured on the exact target, else on another device of the same kind and
//!   arch, marked as a [`Match::Fallback`]; never across kinds. A lookup matches on the
//!   workload key, then checks that the stored canonical text equals the query's.
//!   Within a group, records measured here (`tune`, `db verify`) come before imported
//!   ones, whose run times are only a file's claim.
//! * [`Database::export`], [`Database::export_jsonl`], [`Database::import_file`] (SQLite,
//!   JSONL or gzipped JSONL, told apart by content) share records as files. An imported
//!   file is untrusted: see [`share`] for the checks, all done before one transaction
//!   merges the records. Each record keeps its [`Provenance`]: measured here, or
//!   imported from a file (name, SHA-256, time).
//! * [`Database::unverified`] and [`Database::store_verification`] (in `provenance`)
//!   replace imported claims by measurements made here (`tessel db verify`).
//!
//! Traces are stored against the *canonical* workload: the program of
//! `workload::parse(canonical_text)`, whose tensors are named `t0, t1, ...`. Tune on
//! [`canonical_program`] so that every machine can replay what it looks up.
//!
//! `database/schema.sql` is the schema, executed verbatim; `database/README.md` says
//! how to share records and the version policy.

mod kernel;
mod models;
mod provenance;
mod share;
mod stats;
mod store;
mod tuning;
mod types;
mod validate;

#[cfg(test)]
mod tests;

pub use kernel::{target_key, ReadyKernel};
pub use models::StoredModel;
pub use provenance::{LocalMeasurement, StoredWorkload};
pub use share::FileFormat;
pub use store::trace_key;
pub use types::{
    utc, Committed, Filter, ImportMode, ImportReport, ImportSource, Lookup, Match, NewRecord,
    Provenance, Record, Rejection, Stats, Status, TargetKey, TargetKind, TargetStats,
    WorkloadStats,
};
pub use validate::{canonical_program, median, MAX_SECS, MIN_SECS};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// The schema version this build writes, stored in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 3;

/// How long a writer waits for another writer's transaction before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The forward migrations: migration `i` takes a database from version `i` to `i + 1`.
/// The first one creates the schema from `database/schema.sql`.
const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    include_str!("../../database/schema.sql"),
    include_str!("../../database/migrations/002_models.sql"),
    include_str!("../../database/migrations/003_provenance.sql"),
];

/// Why a database operation failed.
#[derive(Debug, Error)]
pub enum DatabaseError {
    /// SQLite reported an error while doing `op`.
    #[error("{op}: {source}")]
    Sqlite {
        /// What was being done.
        op: String,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an SQLite database, or is damaged (truncated, corrupted).
    #[error("{path}: not a readable SQLite database: {detail}")]
    NotADatabase {
        /// The file.
        path: PathBuf,
        /// SQLite's diagnosis.
        detail: String,
    },
    /// The file is an SQLite database, but not a tessel one.
    #[error("{path}: not a tessel database: {detail}")]
    NotTessel {
        /// The file.
        path: PathBuf,
        /// What is missing or unexpected.
        detail: String,
    },
    /// The file was written by a newer tessel; it was not modified.
    #[error(
        "{path}: schema version {found} is newer than this tessel supports ({supported}); \
         upgrade tessel to read it (the file was not modified)"
    )]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// [`SCHEMA_VERSION`].
        supported: i64,
    },
    /// The stored canonical text for a key differs from the one asked about: a key
    /// collision or a corrupted database.
    #[error(
        "workload {key}: the stored canonical text differs from the query's \
         (key collision or corrupted database)"
    )]
    KeyMismatch {
        /// The workload key.
        key: String,
    },
    /// A record handed to [`Database::commit`] is not storable.
    #[error("record refused: {0}")]
    InvalidRecord(String),
    /// A stored record could not be read back.
    #[error("record {id}: stored data is unreadable: {detail}")]
    Corrupt {
        /// The record id.
        id: i64,
        /// What is wrong.
        detail: String,
    },
    /// An export would overwrite an existing file.
    #[error("{path}: already exists; export writes a new file")]
    Exists {
        /// The file.
        path: PathBuf,
    },
}

/// Results of this module.
pub type Result<T, E = DatabaseError> = std::result::Result<T, E>;

/// Attaches what was being done to an SQLite error.
pub(crate) trait Context<T> {
    /// Wraps the error as [`DatabaseError::Sqlite`] with `op`.
    fn ctx(self, op: &str) -> Result<T>;
}

impl<T> Context<T> for rusqlite::Result<T> {
    fn ctx(self, op: &str) -> Result<T> {
        self.map_err(|source| DatabaseError::Sqlite {
            op: op.to_string(),
            source,
        })
    }
}

/// A connection to a record database. Reads take `&self`; writes take `&mut self` and
/// run in `BEGIN IMMEDIATE` transactions, so several processes may write at once.
#[derive(Debug)]
pub struct Database {
    conn: Connection,
    path: PathBuf,
}

impl Database {
    /// Opens the database at `path`, creating it (and upgrading an older schema) as
    /// needed. A file that is not a tessel database, or has a newer schema version, is
    /// refused and left untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<Database> {
        let path = path.as_ref().to_path_buf();
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(&path, flags).map_err(|e| DatabaseError::NotADatabase {
                path: path.clone(),
                detail: e.to_string(),
            })?;
        Database::init(conn, path, true)
    }

    /// A fresh database in memory (for tests and throwaway runs).
    pub fn open_in_memory() -> Result<Database> {
        let conn = Connection::open_in_memory().ctx("opening an in-memory database")?;
        Database::init(conn, PathBuf::from(":memory:"), false)
    }

    /// The path it was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn init(mut conn: Connection, path: PathBuf, wal: bool) -> Result<Database> {
        conn.busy_timeout(BUSY_TIMEOUT)
            .ctx("setting the busy timeout")?;
        let found = user_version(&conn, &path)?;
        if found > SCHEMA_VERSION {
            return Err(DatabaseError::NewerSchema {
                path,
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if wal {
            let mode: String = conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .ctx("switching to WAL")?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(DatabaseError::NotTessel {
                    path,
                    detail: format!("cannot use WAL (journal mode stays {mode})"),
                });
            }
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .ctx("setting synchronous")?;
        conn.pragma_update(None, "foreign_keys", true)
            .ctx("enabling foreign keys")?;
        if found < SCHEMA_VERSION {
            migrate(&mut conn, &path)?;
        }
        Ok(Database { conn, path })
    }

    /// Starts a write transaction (`BEGIN IMMEDIATE`: takes the write lock now, so two
    /// writers never deadlock on an upgrade).
    fn write(&mut self) -> Result<rusqlite::Transaction<'_>> {
        self.conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .ctx("starting a write transaction")
    }
}

/// Where the CLI keeps its database: `$TESSEL_DB`, else
/// `$XDG_DATA_HOME/tessel/records.db`, else `~/.local/share/tessel/records.db`.
pub fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TESSEL_DB").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("tessel").join("records.db"))
}

/// Reads `PRAGMA user_version`; the first read of a file, so its failure means the file
/// is not a (readable) database.
fn user_version(conn: &Connection, path: &Path) -> Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| DatabaseError::NotADatabase {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })
}

/// Runs the migrations from the file's version to [`SCHEMA_VERSION`] in one
/// `BEGIN IMMEDIATE` transaction, re-reading the version under the lock (another
/// process may have just done it).
fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .ctx("starting the schema migration")?;
    let found = user_version(&tx, path)?;
    if found > SCHEMA_VERSION {
        return Err(DatabaseError::NewerSchema {
            path: path.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == 0 {
        let objects: i64 = tx
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .ctx("reading the schema")?;
        if objects > 0 {
            return Err(DatabaseError::NotTessel {
                path: path.to_path_buf(),
                detail: format!("user_version is 0 but it holds {objects} schema objects"),
            });
        }
    }
    let start = usize::try_from(found).unwrap_or(0);
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(start) {
        tx.execute_batch(sql)
            .ctx(&format!("migrating to schema version {}", i + 1))?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .ctx("setting user_version")?;
    tx.commit().ctx("committing the schema migration")
}

/// Lowercase hex SHA-256, the hash of workload keys and trace dedup keys.
pub(crate) fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The current time in unix seconds (0 if the clock is before 1970).
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
