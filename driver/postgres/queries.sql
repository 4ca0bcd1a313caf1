-- Named queries of the PostgreSQL driver: its own (migrations) here, the
-- engine's statements in queries_<concept>.sql, one file per interface of
-- package driver (send, claim, record, …). In all of them every "now" is
-- coalesce(@now, now()): NULL means the database's clock, a value means an
-- injected (test) clock. Durations arrive as microseconds (bigint).

-- name: MigrationLock :exec
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.oncepush_migration'));

-- name: MigrationTableCreate :exec
CREATE TABLE IF NOT EXISTS oncepush_migration (
    version    integer PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: MigrationList :many
SELECT version FROM oncepush_migration ORDER BY version;

-- name: MigrationInsert :exec
INSERT INTO oncepush_migration (version, name) VALUES (@version, @name);

-- name: MigrationTableExists :one
SELECT to_regclass('oncepush_migration') IS NOT NULL;
