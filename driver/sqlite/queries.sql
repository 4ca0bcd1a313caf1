-- Named queries of the SQLite driver: its own (file checks, migrations)
-- here, the engine's statements in queries_<concept>.sql, one file per
-- interface of package driver (send, claim, record, …). What follows holds for
-- every one of them.
--
-- Times are INTEGER microseconds since the Unix epoch (UTC). SQLite has no clock
-- worth trusting more than the host's, so the driver always passes @now: the
-- injected clock's time, or the host's when there is none. Durations arrive as
-- microseconds too (@…_us).
--
-- SQLite has no arrays: lists arrive as JSON text and are read with json_each,
-- one statement per table per batch as in PostgreSQL. A list of records is a
-- JSON array of objects read with ->> '$.field'.
--
-- An INSERT … SELECT followed by ON CONFLICT carries a WHERE clause (WHERE true
-- at least): without one SQLite's parser cannot tell the upsert's ON from a
-- join constraint.

-- name: DataVersion :one
-- Changes whenever another connection commits to the file (Listen polls it).
PRAGMA data_version;

-- name: QuickCheck :many
PRAGMA quick_check;

-- name: JournalMode :one
PRAGMA journal_mode;

-- name: ForeignKeys :one
PRAGMA foreign_keys;

-- name: MainFile :one
SELECT file FROM pragma_database_list WHERE name = 'main';

-- name: Backup :exec
-- A consistent, compacted copy in a new file, read from one snapshot.
VACUUM INTO @dst;

-- name: MigrationTableCreate :exec
CREATE TABLE IF NOT EXISTS oncepush_migration (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
) STRICT;

-- name: MigrationList :many
SELECT version FROM oncepush_migration ORDER BY version;

-- name: MigrationInsert :exec
INSERT INTO oncepush_migration (version, name, applied_at) VALUES (@version, @name, @now);

-- name: MigrationTableExists :one
SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'oncepush_migration');
