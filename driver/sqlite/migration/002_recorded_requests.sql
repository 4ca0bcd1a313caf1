-- oncepush ledger, version 2: recorded requests, as in driver/postgres's
-- 002_recorded_requests.sql. The engine's: the send's own write inserts a
-- record, and cleanup deletes it with the last delivery holding its key.
--
-- Until the server's state had migrations of its own, this version also
-- created the server's tables (oncepush_api_key, oncepush_preference), and
-- was named 002_server. A file migrated then keeps them, rows and all; the
-- server's migration 1 (servermigration/) adopts them, and creates them where
-- this version no longer did.

CREATE TABLE oncepush_idempotency (
    key          TEXT    PRIMARY KEY,
    request_hash BLOB    NOT NULL,
    message_id   INTEGER NOT NULL,
    queued       INTEGER NOT NULL,
    duplicates   INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX oncepush_idempotency_created ON oncepush_idempotency (created_at);
