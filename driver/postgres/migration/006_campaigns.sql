-- oncepush ledger, version 6: campaigns (docs/architecture.md, "Campaigns").
--
-- A campaign is expanded into ordinary deliveries of one message (its
-- message_id, written when it starts), one per recipient under the dedup key
-- campaign:<id>; cursor is the last recipient whose delivery exists, written
-- in the transaction that wrote it. tries counts expansion tries begun since
-- the last batch that committed (D80).
CREATE TABLE oncepush_campaign (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text        NOT NULL DEFAULT '',
    status           text        NOT NULL
        CHECK (status IN ('draft', 'scheduled', 'sending', 'completed', 'interrupted', 'canceled')),
    content          jsonb       NOT NULL,
    audience         text        NOT NULL CHECK (audience IN ('recipients', 'devices')),
    filter           jsonb,
    start_at         timestamptz,
    rate_per_minute  integer     NOT NULL DEFAULT 0 CHECK (rate_per_minute >= 0),
    message_id       bigint,
    cursor           text        NOT NULL DEFAULT '',
    written          bigint      NOT NULL DEFAULT 0,
    recipients       bigint      NOT NULL DEFAULT 0,
    invalid_tokens   bigint      NOT NULL DEFAULT 0,
    duplicate_tokens bigint      NOT NULL DEFAULT 0,
    tries            integer     NOT NULL DEFAULT 0,
    last_error       text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    started_at       timestamptz,
    finished_at      timestamptz
);

-- The expansion's pick: campaigns with work, oldest first.
CREATE INDEX oncepush_campaign_work ON oncepush_campaign (id) WHERE status IN ('scheduled', 'sending');
-- The list filtered by status.
CREATE INDEX oncepush_campaign_status ON oncepush_campaign (status, id);
-- Cleanup's orphan sweep keeps a campaign's message.
CREATE INDEX oncepush_campaign_message ON oncepush_campaign (message_id) WHERE message_id IS NOT NULL;

CREATE TABLE oncepush_campaign_recipient (
    campaign_id bigint NOT NULL REFERENCES oncepush_campaign (id) ON DELETE CASCADE,
    recipient   text   NOT NULL,
    PRIMARY KEY (campaign_id, recipient)
);

-- A recipient's deletion finds its audience rows.
CREATE INDEX oncepush_campaign_recipient_recipient ON oncepush_campaign_recipient (recipient);

CREATE TABLE oncepush_campaign_page (
    campaign_id bigint  NOT NULL REFERENCES oncepush_campaign (id) ON DELETE CASCADE,
    page        integer NOT NULL,
    digest      bytea   NOT NULL,
    size        integer NOT NULL,
    PRIMARY KEY (campaign_id, page)
);

-- A campaign's device filter, on its message, for the claim.
ALTER TABLE oncepush_message ADD COLUMN audience jsonb;

-- Tags set at registration: a sorted JSON array of strings.
ALTER TABLE oncepush_device ADD COLUMN tags jsonb NOT NULL DEFAULT '[]';

-- Campaign deliveries wait in a lane of their own (D87): the claim takes due
-- rows of the first index before those of the second, each a seek.
ALTER TABLE oncepush_delivery ADD COLUMN campaign boolean NOT NULL DEFAULT false;
DROP INDEX oncepush_delivery_due;
CREATE INDEX oncepush_delivery_due ON oncepush_delivery (next_attempt_at, id) WHERE status = 'pending' AND NOT campaign;
CREATE INDEX oncepush_delivery_due_campaign ON oncepush_delivery (next_attempt_at, id) WHERE status = 'pending' AND campaign;
