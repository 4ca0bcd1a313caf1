-- Named queries of the SQLite driver for the server's state (package
-- driver/serverstore): its API keys and preferences, and the version table of
-- its own migrations (servermigration/). The engine never runs these. Times
-- and lists are as in queries.sql: INTEGER microseconds, JSON arrays.

-- name: ServerMigrationTableCreate :exec
CREATE TABLE IF NOT EXISTS oncepush_server_migration (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
) STRICT;

-- name: ServerMigrationList :many
SELECT version FROM oncepush_server_migration ORDER BY version;

-- name: ServerMigrationInsert :exec
INSERT INTO oncepush_server_migration (version, name, applied_at) VALUES (@version, @name, @now);

-- name: ServerMigrationTableExists :one
SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'oncepush_server_migration');

-- name: APIKeyInsert :exec
INSERT INTO oncepush_api_key (id, name, hash, scopes, created_at)
VALUES (@id, @name, @hash, json(@scopes), @now);

-- name: APIKeyGetByHash :one
SELECT id, name, hash, scopes, created_at, revoked_at FROM oncepush_api_key WHERE hash = @hash;

-- name: APIKeyList :many
SELECT id, name, hash, scopes, created_at, revoked_at FROM oncepush_api_key ORDER BY created_at, id;

-- name: APIKeyRevoke :execrows
UPDATE oncepush_api_key SET revoked_at = @now WHERE id = @id AND revoked_at IS NULL;

-- name: PreferenceGet :one
SELECT recipient, opt_out, quiet_start, quiet_end, time_zone, updated_at
FROM oncepush_preference WHERE recipient = @recipient;

-- name: PreferenceGetMany :many
SELECT recipient, opt_out, quiet_start, quiet_end, time_zone, updated_at
FROM oncepush_preference WHERE recipient IN (SELECT value FROM json_each(@recipients));

-- name: PreferencePut :exec
INSERT INTO oncepush_preference (recipient, opt_out, quiet_start, quiet_end, time_zone, updated_at)
VALUES (@recipient, json(@opt_out), @quiet_start, @quiet_end, @time_zone, @now)
ON CONFLICT (recipient) DO UPDATE
SET opt_out = excluded.opt_out, quiet_start = excluded.quiet_start, quiet_end = excluded.quiet_end,
    time_zone = excluded.time_zone, updated_at = excluded.updated_at;

-- name: PreferenceDeleteByRecipient :execrows
DELETE FROM oncepush_preference WHERE recipient = @recipient;
