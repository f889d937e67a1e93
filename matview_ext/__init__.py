"""The SQLite-facing side of matview: the `matview` virtual-table module and the
statements (CREATE/DROP/REFRESH MATERIALIZED VIEW, CREATE INDEX on a view) that a
matview connection intercepts."""
