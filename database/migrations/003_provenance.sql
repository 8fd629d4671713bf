-- Schema version 3: where each record came from.
--
-- Applied by `Database::open` to a version-2 database in the migration transaction. The
-- records of older versions did not say whether they were measured on this machine or
-- imported from a file, so they become 'unknown': a lookup ranks them with imported
-- records (below those measured here), and `tessel db verify` re-measures them.

-- One imported file: its name (not its path), the SHA-256 of its bytes, when.
CREATE TABLE imports (
    id          INTEGER PRIMARY KEY,
    file        TEXT    NOT NULL,
    sha256      TEXT    NOT NULL CHECK (length(sha256) = 64),
    -- Unix seconds.
    imported_at INTEGER NOT NULL
) STRICT;

-- 'local': measured by this tessel on the record's target (tune, db verify);
-- 'imported': merged from a file, its run times are the file's claim;
-- 'verified': imported, then re-measured here by `tessel db verify`: run times, median
--             and status are the local measurement, the file's median is kept in
--             claimed_median_secs;
-- 'unknown': stored before schema version 3.
ALTER TABLE records ADD COLUMN origin TEXT NOT NULL DEFAULT 'unknown'
    CHECK (origin IN ('local', 'imported', 'verified', 'unknown'));
-- The import an 'imported' or 'verified' record came from.
ALTER TABLE records ADD COLUMN import_id INTEGER REFERENCES imports (id);
-- For a 'verified' record: the median the imported record claimed.
ALTER TABLE records ADD COLUMN claimed_median_secs REAL;
