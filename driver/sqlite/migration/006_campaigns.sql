-- oncepush ledger, version 6: campaigns; driver/postgres's 006_campaigns.sql
-- adapted to SQLite (times as INTEGER microseconds, JSON as checked TEXT).
CREATE TABLE oncepush_campaign (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    name             TEXT    NOT NULL DEFAULT '',
    status           TEXT    NOT NULL
        CHECK (status IN ('draft', 'scheduled', 'sending', 'completed', 'interrupted', 'canceled')),
    content          TEXT    NOT NULL CHECK (json_valid(content)),
    audience         TEXT    NOT NULL CHECK (audience IN ('recipients', 'devices')),
    filter           TEXT    CHECK (filter IS NULL OR json_valid(filter)),
    start_at         INTEGER,
    rate_per_minute  INTEGER NOT NULL DEFAULT 0 CHECK (rate_per_minute >= 0),
    message_id       INTEGER,
    cursor           TEXT    NOT NULL DEFAULT '',
    written          INTEGER NOT NULL DEFAULT 0,
    recipients       INTEGER NOT NULL DEFAULT 0,
    invalid_tokens   INTEGER NOT NULL DEFAULT 0,
    duplicate_tokens INTEGER NOT NULL DEFAULT 0,
    tries            INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER
) STRICT;

CREATE INDEX oncepush_campaign_work ON oncepush_campaign (id) WHERE status IN ('scheduled', 'sending');
CREATE INDEX oncepush_campaign_status ON oncepush_campaign (status, id);
CREATE INDEX oncepush_campaign_message ON oncepush_campaign (message_id) WHERE message_id IS NOT NULL;

CREATE TABLE oncepush_campaign_recipient (
    campaign_id INTEGER NOT NULL REFERENCES oncepush_campaign (id) ON DELETE CASCADE,
    recipient   TEXT    NOT NULL,
    PRIMARY KEY (campaign_id, recipient)
) STRICT, WITHOUT ROWID;

CREATE INDEX oncepush_campaign_recipient_recipient ON oncepush_campaign_recipient (recipient);

CREATE TABLE oncepush_campaign_page (
    campaign_id INTEGER NOT NULL REFERENCES oncepush_campaign (id) ON DELETE CASCADE,
    page        INTEGER NOT NULL,
    digest      BLOB    NOT NULL,
    size        INTEGER NOT NULL,
    PRIMARY KEY (campaign_id, page)
) STRICT;

ALTER TABLE oncepush_message ADD COLUMN audience TEXT CHECK (audience IS NULL OR json_valid(audience));

ALTER TABLE oncepush_device ADD COLUMN tags TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags));

-- Campaign deliveries wait in a lane of their own (D87).
ALTER TABLE oncepush_delivery ADD COLUMN campaign INTEGER NOT NULL DEFAULT 0 CHECK (campaign IN (0, 1));
DROP INDEX oncepush_delivery_due;
CREATE INDEX oncepush_delivery_due ON oncepush_delivery (next_attempt_at, id) WHERE status = 'pending' AND campaign = 0;
CREATE INDEX oncepush_delivery_due_campaign ON oncepush_delivery (next_attempt_at, id) WHERE status = 'pending' AND campaign = 1;
