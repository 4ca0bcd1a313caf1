-- oncepush ledger, version 2: the server's state, as in driver/postgres's
-- 002_server.sql. Lists (scopes, opt-outs) are JSON arrays in TEXT.

CREATE TABLE oncepush_api_key (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL,
    hash       BLOB    NOT NULL UNIQUE,
    scopes     TEXT    NOT NULL CHECK (json_valid(scopes) AND json_type(scopes) = 'array'),
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;

CREATE TABLE oncepush_preference (
    recipient   TEXT    PRIMARY KEY,
    opt_out     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(opt_out) AND json_type(opt_out) = 'array'),
    quiet_start TEXT    NOT NULL DEFAULT '',
    quiet_end   TEXT    NOT NULL DEFAULT '',
    time_zone   TEXT    NOT NULL DEFAULT '',
    updated_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE oncepush_idempotency (
    key          TEXT    PRIMARY KEY,
    request_hash BLOB    NOT NULL,
    message_id   INTEGER NOT NULL,
    queued       INTEGER NOT NULL,
    duplicates   INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX oncepush_idempotency_created ON oncepush_idempotency (created_at);
