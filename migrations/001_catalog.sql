-- matview catalog, format 1.
-- One row per materialized view; plans are msgpack, never pickle.
CREATE TABLE IF NOT EXISTS "__dbsp_meta" (
    key   TEXT PRIMARY KEY,
    value ANY
);
CREATE TABLE IF NOT EXISTS "__dbsp_catalog" (
    name          TEXT PRIMARY KEY COLLATE NOCASE,
    sql           TEXT NOT NULL,      -- the defining SELECT, as written
    plan          BLOB NOT NULL,      -- msgpack of matview.plan.Plan
    format        INTEGER NOT NULL,   -- plan format version
    maintenance   TEXT NOT NULL CHECK (maintenance IN ('immediate', 'deferred')),
    base_tables   BLOB NOT NULL,      -- msgpack list of base table names
    created_at    TEXT NOT NULL,
    refreshed_at  TEXT NOT NULL
);
-- How far each view has consumed each base table's delta log.
CREATE TABLE IF NOT EXISTS "__dbsp_progress" (
    view        TEXT NOT NULL COLLATE NOCASE,
    base_table  TEXT NOT NULL COLLATE NOCASE,
    seq         INTEGER NOT NULL,
    PRIMARY KEY (view, base_table)
) WITHOUT ROWID;
