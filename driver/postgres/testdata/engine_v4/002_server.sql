-- oncepush ledger, version 2: the server's state.

-- API keys: the secret is never stored, only the SHA-256 of the whole key.
CREATE TABLE oncepush_api_key (
    id         text PRIMARY KEY,
    name       text        NOT NULL,
    hash       bytea       NOT NULL UNIQUE,
    scopes     text[]      NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);

-- Per-recipient preferences read by the server's eligibility rule.
CREATE TABLE oncepush_preference (
    recipient   text PRIMARY KEY,
    opt_out     text[]      NOT NULL DEFAULT '{}',
    quiet_start text        NOT NULL DEFAULT '',
    quiet_end   text        NOT NULL DEFAULT '',
    time_zone   text        NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL
);

-- Recorded requests (SendOptions.RequestHash, the HTTP API's dedupeKey): the
-- key, the request's hash and what the first send with the key did.
CREATE TABLE oncepush_idempotency (
    key          text PRIMARY KEY,
    request_hash bytea       NOT NULL,
    message_id   bigint      NOT NULL,
    queued       integer     NOT NULL,
    duplicates   integer     NOT NULL,
    created_at   timestamptz NOT NULL
);

CREATE INDEX oncepush_idempotency_created ON oncepush_idempotency (created_at);
