-- oncepush ledger, version 1.
--
-- oncepush_delivery is the queue: a pending row is either due (next_attempt_at in
-- the past) or leased (next_attempt_at = the end of its lease). The claim reads
-- only the partial index oncepush_delivery_due.

CREATE TABLE oncepush_message (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type         text        NOT NULL DEFAULT '',
    title        text        NOT NULL DEFAULT '',
    body         text        NOT NULL DEFAULT '',
    data         jsonb,
    link         text        NOT NULL DEFAULT '',
    image        text        NOT NULL DEFAULT '',
    category     text        NOT NULL DEFAULT '',
    ambiguity    text        NOT NULL CHECK (ambiguity IN ('resend', 'at-most-once')),
    scheduled_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL
);

CREATE INDEX oncepush_message_created ON oncepush_message (created_at);

CREATE TABLE oncepush_delivery (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id      bigint      NOT NULL REFERENCES oncepush_message (id),
    recipient       text        NOT NULL,
    notification_id text        NOT NULL,
    dedup_key       text,
    status          text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'sent', 'failed', 'ambiguous', 'skipped', 'no_devices', 'expired', 'canceled')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    lease_id        bigint,
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    finished_at     timestamptz,
    CHECK ((status = 'pending') = (finished_at IS NULL))
);

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
    delivery_id   bigint      NOT NULL REFERENCES oncepush_delivery (id) ON DELETE CASCADE,
    device_id     bigint      NOT NULL,
    transport     text        NOT NULL,
    state         text        NOT NULL
        CHECK (state IN ('pending', 'sending', 'accepted', 'invalid', 'retry', 'rejected', 'ambiguous')),
    submissions   integer     NOT NULL DEFAULT 0,
    ambiguous     integer     NOT NULL DEFAULT 0,
    provider_id   text        NOT NULL DEFAULT '',
    error         text        NOT NULL DEFAULT '',
    first_sent_at timestamptz,
    last_sent_at  timestamptz,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (delivery_id, device_id)
);

CREATE TABLE oncepush_device (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recipient     text        NOT NULL,
    transport     text        NOT NULL,
    token         text        NOT NULL,
    -- The token itself, or a Web Push subscription's endpoint: what makes a
    -- registration unique within its transport.
    token_key     text        NOT NULL,
    platform      text        NOT NULL DEFAULT '',
    session       text        NOT NULL DEFAULT '',
    locale        text        NOT NULL DEFAULT '',
    time_zone     text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL,
    registered_at timestamptz NOT NULL
);

CREATE UNIQUE INDEX oncepush_device_token ON oncepush_device (transport, token_key);
CREATE INDEX oncepush_device_recipient ON oncepush_device (recipient, registered_at DESC, id DESC);
CREATE INDEX oncepush_device_session ON oncepush_device (session) WHERE session <> '';

CREATE TABLE oncepush_revoked_session (
    session    text PRIMARY KEY,
    revoked_at timestamptz NOT NULL
);

CREATE INDEX oncepush_revoked_session_at ON oncepush_revoked_session (revoked_at);

CREATE TABLE oncepush_lock (
    name         text PRIMARY KEY,
    owner        text        NOT NULL,
    locked_until timestamptz NOT NULL
);
