-- Named queries of the PostgreSQL driver for the server's state (package
-- driver/serverstore): its API keys and preferences, and the version table of
-- its own migrations (servermigration/). The engine never runs these. Every
-- "now" is coalesce(@now, now()), as in queries.sql.

-- name: ServerMigrationLock :exec
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.oncepush_server_migration'));

-- name: ServerMigrationTableCreate :exec
CREATE TABLE IF NOT EXISTS oncepush_server_migration (
    version    integer PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: ServerMigrationList :many
SELECT version FROM oncepush_server_migration ORDER BY version;

-- name: ServerMigrationInsert :exec
INSERT INTO oncepush_server_migration (version, name) VALUES (@version, @name);

-- name: ServerMigrationTableExists :one
SELECT to_regclass('oncepush_server_migration') IS NOT NULL;

-- name: APIKeyInsert :exec
INSERT INTO oncepush_api_key (id, name, hash, scopes, created_at)
VALUES (@id, @name, @hash, @scopes, coalesce(@now::timestamptz, now()));

-- name: APIKeyGetByHash :one
SELECT id, name, hash, scopes, created_at, revoked_at FROM oncepush_api_key WHERE hash = @hash;

-- name: APIKeyList :many
SELECT id, name, hash, scopes, created_at, revoked_at FROM oncepush_api_key ORDER BY created_at, id;

-- name: APIKeyRevoke :execrows
UPDATE oncepush_api_key SET revoked_at = coalesce(@now::timestamptz, now())
WHERE id = @id AND revoked_at IS NULL;

-- name: PreferenceGet :one
SELECT recipient, opt_out, quiet_start, quiet_end, time_zone, updated_at
FROM oncepush_preference WHERE recipient = @recipient;

-- name: PreferenceGetMany :many
SELECT recipient, opt_out, quiet_start, quiet_end, time_zone, updated_at
FROM oncepush_preference WHERE recipient = ANY (@recipients::text[]);

-- name: PreferencePut :exec
INSERT INTO oncepush_preference (recipient, opt_out, quiet_start, quiet_end, time_zone, updated_at)
VALUES (@recipient, @opt_out, @quiet_start, @quiet_end, @time_zone, coalesce(@now::timestamptz, now()))
ON CONFLICT (recipient) DO UPDATE
SET opt_out = excluded.opt_out, quiet_start = excluded.quiet_start, quiet_end = excluded.quiet_end,
    time_zone = excluded.time_zone, updated_at = excluded.updated_at;

-- name: PreferenceDeleteByRecipient :execrows
DELETE FROM oncepush_preference WHERE recipient = @recipient;
