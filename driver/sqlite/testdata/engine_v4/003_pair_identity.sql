-- oncepush ledger, version 3: a (delivery, device) pair is identified by the
-- device's token, not by its registration row, as in driver/postgres's
-- 003_pair_identity.sql. SQLite cannot change a primary key in place: the
-- table is rebuilt.

CREATE TABLE oncepush_device_attempt_v3 (
    delivery_id   INTEGER NOT NULL REFERENCES oncepush_delivery (id) ON DELETE CASCADE,
    device_id     INTEGER NOT NULL,
    transport     TEXT    NOT NULL,
    token_key     TEXT    NOT NULL,
    state         TEXT    NOT NULL
        CHECK (state IN ('pending', 'sending', 'accepted', 'invalid', 'retry', 'rejected', 'ambiguous')),
    submissions   INTEGER NOT NULL DEFAULT 0,
    ambiguous     INTEGER NOT NULL DEFAULT 0,
    provider_id   TEXT    NOT NULL DEFAULT '',
    error         TEXT    NOT NULL DEFAULT '',
    first_sent_at INTEGER,
    last_sent_at  INTEGER,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, transport, token_key)
) STRICT;

-- Rows of registrations deleted since keep a key no registration can match.
INSERT INTO oncepush_device_attempt_v3 (delivery_id, device_id, transport, token_key, state, submissions,
                                        ambiguous, provider_id, error, first_sent_at, last_sent_at, updated_at)
SELECT a.delivery_id, a.device_id, a.transport,
       coalesce((SELECT d.token_key FROM oncepush_device d WHERE d.id = a.device_id), 'device:' || a.device_id),
       a.state, a.submissions, a.ambiguous, a.provider_id, a.error, a.first_sent_at, a.last_sent_at, a.updated_at
FROM oncepush_device_attempt a;

DROP TABLE oncepush_device_attempt;
ALTER TABLE oncepush_device_attempt_v3 RENAME TO oncepush_device_attempt;
