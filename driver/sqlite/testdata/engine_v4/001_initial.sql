-- oncepush ledger, version 1: the tables, constraints and indexes of
-- driver/postgres's 001_initial.sql, adapted to SQLite.
--
-- * Ids are INTEGER PRIMARY KEY AUTOINCREMENT: like PostgreSQL's identity columns
--   they are never reused, so a device or delivery deleted and followed by a new
--   one never shares its id (a moved token must get a new identity).
-- * Times are INTEGER microseconds since the Unix epoch, UTC; the driver converts
--   them at its boundary.
-- * JSON is TEXT checked with json_valid.
-- * Tables are STRICT, so a value of the wrong type is refused as PostgreSQL
--   would refuse it, instead of being stored as whatever it was.
--
-- oncepush_delivery is the queue: a pending row is either due (next_attempt_at in
-- the past) or leased (next_attempt_at = the end of its lease). The claim reads
-- only the partial index oncepush_delivery_due.

CREATE TABLE oncepush_message (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    type         TEXT    NOT NULL DEFAULT '',
    title        TEXT    NOT NULL DEFAULT '',
    body         TEXT    NOT NULL DEFAULT '',
    data         TEXT    CHECK (data IS NULL OR json_valid(data)),
    link         TEXT    NOT NULL DEFAULT '',
    image        TEXT    NOT NULL DEFAULT '',
    category     TEXT    NOT NULL DEFAULT '',
    ambiguity    TEXT    NOT NULL CHECK (ambiguity IN ('resend', 'at-most-once')),
    scheduled_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX oncepush_message_created ON oncepush_message (created_at);

CREATE TABLE oncepush_delivery (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id      INTEGER NOT NULL REFERENCES oncepush_message (id),
    recipient       TEXT    NOT NULL,
    notification_id TEXT    NOT NULL,
    dedup_key       TEXT,
    status          TEXT    NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'sent', 'failed', 'ambiguous', 'skipped', 'no_devices', 'expired', 'canceled')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_id        INTEGER,
    last_error      TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    CHECK ((status = 'pending') = (finished_at IS NULL))
) STRICT;

-- The claim: due pending rows in due order.
CREATE INDEX oncepush_delivery_due ON oncepush_delivery (next_attempt_at, id) WHERE status = 'pending';
-- Deduplication: the ON CONFLICT target repeats this predicate.
CREATE UNIQUE INDEX oncepush_delivery_dedup ON oncepush_delivery (recipient, dedup_key) WHERE dedup_key IS NOT NULL;
-- History and deletion by recipient.
CREATE INDEX oncepush_delivery_recipient ON oncepush_delivery (recipient, id);
-- A message's deliveries (and the foreign key).
CREATE INDEX oncepush_delivery_message ON oncepush_delivery (message_id, id);
-- Retention cleanup.
CREATE INDEX oncepush_delivery_finished ON oncepush_delivery (finished_at) WHERE status <> 'pending';

CREATE TABLE oncepush_device_attempt (
    delivery_id   INTEGER NOT NULL REFERENCES oncepush_delivery (id) ON DELETE CASCADE,
    device_id     INTEGER NOT NULL,
    transport     TEXT    NOT NULL,
    state         TEXT    NOT NULL
        CHECK (state IN ('pending', 'sending', 'accepted', 'invalid', 'retry', 'rejected', 'ambiguous')),
    submissions   INTEGER NOT NULL DEFAULT 0,
    ambiguous     INTEGER NOT NULL DEFAULT 0,
    provider_id   TEXT    NOT NULL DEFAULT '',
    error         TEXT    NOT NULL DEFAULT '',
    first_sent_at INTEGER,
    last_sent_at  INTEGER,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, device_id)
) STRICT;

CREATE TABLE oncepush_device (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    recipient     TEXT    NOT NULL,
    transport     TEXT    NOT NULL,
    token         TEXT    NOT NULL,
    -- The token itself, or a Web Push subscription's endpoint: what makes a
    -- registration unique within its transport.
    token_key     TEXT    NOT NULL,
    platform      TEXT    NOT NULL DEFAULT '',
    session       TEXT    NOT NULL DEFAULT '',
    locale        TEXT    NOT NULL DEFAULT '',
    time_zone     TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    registered_at INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX oncepush_device_token ON oncepush_device (transport, token_key);
CREATE INDEX oncepush_device_recipient ON oncepush_device (recipient, registered_at DESC, id DESC);
CREATE INDEX oncepush_device_session ON oncepush_device (session) WHERE session <> '';

CREATE TABLE oncepush_revoked_session (
    session    TEXT    PRIMARY KEY,
    revoked_at INTEGER NOT NULL
) STRICT;

CREATE INDEX oncepush_revoked_session_at ON oncepush_revoked_session (revoked_at);

CREATE TABLE oncepush_lock (
    name         TEXT    PRIMARY KEY,
    owner        TEXT    NOT NULL,
    locked_until INTEGER NOT NULL
) STRICT;
