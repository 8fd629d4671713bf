-- Schema version 2: trained cost models, one per (target kind, arch, feature-set version).
--
-- Applied by `Database::open` to a version-1 database in the migration transaction; it
-- only adds a table, so every record of version 1 is kept as it was.

CREATE TABLE models (
    id                  INTEGER PRIMARY KEY,
    -- 'cuda' or 'cpu', as targets.kind.
    target_kind         TEXT    NOT NULL CHECK (target_kind IN ('cuda', 'cpu')),
    -- The arch the training records were measured on, as targets.arch.
    arch                TEXT    NOT NULL,
    -- cost_model::FEATURE_SET_VERSION at training time; a model of another version is
    -- never used.
    feature_set_version INTEGER NOT NULL CHECK (feature_set_version >= 1),
    -- What kind of model `model_bytes` holds (e.g. 'gbdt').
    model_kind          TEXT    NOT NULL,
    -- How many records it was trained on.
    records_trained_on  INTEGER NOT NULL CHECK (records_trained_on >= 0),
    -- Unix seconds.
    created_at          INTEGER NOT NULL,
    -- The serialized model.
    model_bytes         BLOB    NOT NULL,
    UNIQUE (target_kind, arch, feature_set_version)
) STRICT;

-- Features of records, cached: featurizing a record replays and lowers its trace
-- (milliseconds each), the cache makes retraining on many records cheap. Keyed by the
-- feature-set version, so a new feature set never reads old features. `features` is the
-- vector as little-endian f32s; empty when the record's trace does not replay or lower.
CREATE TABLE record_features (
    record_id           INTEGER NOT NULL REFERENCES records (id) ON DELETE CASCADE,
    feature_set_version INTEGER NOT NULL CHECK (feature_set_version >= 1),
    features            BLOB    NOT NULL,
    PRIMARY KEY (record_id, feature_set_version)
) STRICT;
