-- oncepush server state, version 1: API keys and preferences.
--
-- Databases migrated before the server's state had migrations of its own got
-- these tables, in this shape, from the engine's migration 2 (then
-- 002_server): IF NOT EXISTS adopts them with their rows.

-- API keys: the secret is never stored, only the SHA-256 of the whole key.
CREATE TABLE IF NOT EXISTS oncepush_api_key (
    id         text PRIMARY KEY,
    name       text        NOT NULL,
    hash       bytea       NOT NULL UNIQUE,
    scopes     text[]      NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);

-- Per-recipient preferences read by the server's eligibility rule.
CREATE TABLE IF NOT EXISTS oncepush_preference (
    recipient   text PRIMARY KEY,
    opt_out     text[]      NOT NULL DEFAULT '{}',
    quiet_start text        NOT NULL DEFAULT '',
    quiet_end   text        NOT NULL DEFAULT '',
    time_zone   text        NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL
);
