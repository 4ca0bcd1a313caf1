-- oncepush server state, version 1: API keys and preferences, as in
-- driver/postgres's servermigration/001_keys_and_preferences.sql. Lists
-- (scopes, opt-outs) are JSON arrays in TEXT.
--
-- Files migrated before the server's state had migrations of its own got
-- these tables, in this shape, from the engine's migration 2 (then
-- 002_server): IF NOT EXISTS adopts them with their rows.

CREATE TABLE IF NOT EXISTS oncepush_api_key (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL,
    hash       BLOB    NOT NULL UNIQUE,
    scopes     TEXT    NOT NULL CHECK (json_valid(scopes) AND json_type(scopes) = 'array'),
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;

CREATE TABLE IF NOT EXISTS oncepush_preference (
    recipient   TEXT    PRIMARY KEY,
    opt_out     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(opt_out) AND json_type(opt_out) = 'array'),
    quiet_start TEXT    NOT NULL DEFAULT '',
    quiet_end   TEXT    NOT NULL DEFAULT '',
    time_zone   TEXT    NOT NULL DEFAULT '',
    updated_at  INTEGER NOT NULL
) STRICT;
