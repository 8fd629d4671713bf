-- The tessel record database, schema version 1 (stored in PRAGMA user_version).
--
-- This file is executed verbatim by `Database::open` (src/database/mod.rs, through
-- include_str!) when it creates a database; it is the one definition of the schema.
-- A later version adds a migration file beside this one and never edits this file.

-- A tensor computation, by the key of its canonical text.
CREATE TABLE workloads (
    -- Lowercase hex SHA-256 of `canonical_text`.
    key            TEXT    PRIMARY KEY NOT NULL CHECK (length(key) = 64),
    -- The canonical workload text; its first line is `tessel-workload v<format_version>`.
    -- Traces of this workload's records refer to the names of this text (t0, t1, ...).
    canonical_text TEXT    NOT NULL,
    -- The version of the canonical text form.
    format_version INTEGER NOT NULL CHECK (format_version >= 1)
) STRICT;

-- A device fingerprint: where a record was measured.
CREATE TABLE targets (
    id        INTEGER PRIMARY KEY,
    -- 'cuda' or 'cpu'. A lookup never answers across kinds.
    kind      TEXT NOT NULL CHECK (kind IN ('cuda', 'cpu')),
    -- e.g. 'sm_90a', 'x86_64-avx2'. A lookup falls back only within one kind and arch.
    arch      TEXT NOT NULL,
    -- e.g. 'NVIDIA H100 80GB HBM3', 'AMD EPYC 7B13'.
    device    TEXT NOT NULL,
    -- e.g. 'nvrtc 13.0, driver 13.0', 'gcc 12.2'.
    toolchain TEXT NOT NULL,
    UNIQUE (kind, arch, device, toolchain)
) STRICT;

-- One measured (or failed) candidate. Failures are kept so that the search does not
-- measure them again; lookups only ever return 'ok' records.
CREATE TABLE records (
    id             INTEGER PRIMARY KEY,
    workload_key   TEXT    NOT NULL REFERENCES workloads (key),
    target_id      INTEGER NOT NULL REFERENCES targets (id),
    -- The trace in its JSON form (schedule::json), decisions included.
    trace_json     TEXT    NOT NULL,
    -- Lowercase hex SHA-256 of trace_json: one record per trace, workload and target.
    dedup_key      TEXT    NOT NULL CHECK (length(dedup_key) = 64),
    status         TEXT    NOT NULL CHECK (status IN ('ok', 'compile_error', 'runtime_error',
                                                      'wrong_answer', 'timeout', 'crash',
                                                      'rejected')),
    -- What went wrong; NULL for 'ok'.
    error_text     TEXT,
    -- JSON array of the timed runs, in seconds.
    run_secs       TEXT    NOT NULL,
    -- The median of run_secs; set exactly when status = 'ok'.
    median_secs    REAL    CHECK ((status = 'ok') = (median_secs IS NOT NULL)),
    -- The tessel version that measured it.
    tessel_version TEXT    NOT NULL,
    -- Unix seconds.
    created_at     INTEGER NOT NULL,
    UNIQUE (workload_key, target_id, dedup_key)
) STRICT;

-- Lookups: the fastest ok record of a workload on a target.
CREATE INDEX records_by_latency ON records (workload_key, target_id, status, median_secs);
