-- oncepush ledger, version 2: recorded requests (SendOptions.RequestHash, the
-- HTTP API's dedupeKey): the key, the request's hash and what the first send
-- with the key did. They are the engine's: the send's own statement writes a
-- record, and cleanup deletes it with the last delivery holding its key.
--
-- Until the server's state had migrations of its own, this version also
-- created the server's tables (oncepush_api_key, oncepush_preference), and
-- was named 002_server. A database migrated then keeps them, rows and all;
-- the server's migration 1 (servermigration/) adopts them, and creates them
-- where this version no longer did.

CREATE TABLE oncepush_idempotency (
    key          text PRIMARY KEY,
    request_hash bytea       NOT NULL,
    message_id   bigint      NOT NULL,
    queued       integer     NOT NULL,
    duplicates   integer     NOT NULL,
    created_at   timestamptz NOT NULL
);

CREATE INDEX oncepush_idempotency_created ON oncepush_idempotency (created_at);
