-- oncepush ledger, version 9: one campaign reaches one token once (D107);
-- driver/postgres's 009_campaign_tokens.sql says what the table holds.
CREATE TABLE oncepush_campaign_token (
    message_id  INTEGER NOT NULL,
    transport   TEXT    NOT NULL,
    token_key   TEXT    NOT NULL,
    delivery_id INTEGER NOT NULL REFERENCES oncepush_delivery (id) ON DELETE CASCADE,
    free        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (message_id, transport, token_key)
) STRICT, WITHOUT ROWID;

CREATE INDEX oncepush_campaign_token_delivery ON oncepush_campaign_token (delivery_id);

-- An attempt that the campaign's delivery did not submit because another
-- delivery of the campaign had reached its token ends "duplicate". SQLite
-- cannot change a CHECK in place: the table is rebuilt, which drops its
-- triggers; they come back counting "duplicate" too (attempt:duplicate).
CREATE TABLE oncepush_device_attempt_v9 (
    delivery_id   INTEGER NOT NULL REFERENCES oncepush_delivery (id) ON DELETE CASCADE,
    device_id     INTEGER NOT NULL,
    transport     TEXT    NOT NULL,
    token_key     TEXT    NOT NULL,
    state         TEXT    NOT NULL
        CHECK (state IN ('pending', 'sending', 'accepted', 'invalid', 'retry', 'rejected', 'ambiguous', 'duplicate')),
    submissions   INTEGER NOT NULL DEFAULT 0,
    ambiguous     INTEGER NOT NULL DEFAULT 0,
    provider_id   TEXT    NOT NULL DEFAULT '',
    error         TEXT    NOT NULL DEFAULT '',
    first_sent_at INTEGER,
    last_sent_at  INTEGER,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, transport, token_key)
) STRICT;

INSERT INTO oncepush_device_attempt_v9 SELECT * FROM oncepush_device_attempt;
DROP TABLE oncepush_device_attempt;
ALTER TABLE oncepush_device_attempt_v9 RENAME TO oncepush_device_attempt;

CREATE TRIGGER oncepush_tally_attempt_insert AFTER INSERT ON oncepush_device_attempt
WHEN (NEW.state IN ('accepted', 'invalid', 'rejected', 'duplicate') OR NEW.ambiguous > 0)
 AND (SELECT campaign FROM oncepush_delivery WHERE id = NEW.delivery_id) = 1
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, 'attempt:' || NEW.state, 1 FROM oncepush_delivery d
    WHERE d.id = NEW.delivery_id AND NEW.state IN ('accepted', 'invalid', 'rejected', 'duplicate')
    ON CONFLICT (message_id, state) DO UPDATE SET n = n + 1;
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, 'attempt:ambiguous', 1 FROM oncepush_delivery d
    WHERE d.id = NEW.delivery_id AND NEW.ambiguous > 0
    ON CONFLICT (message_id, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER oncepush_tally_attempt_update AFTER UPDATE ON oncepush_device_attempt
WHEN ((OLD.state <> NEW.state AND (OLD.state IN ('accepted', 'invalid', 'rejected', 'duplicate') OR NEW.state IN ('accepted', 'invalid', 'rejected', 'duplicate')))
      OR (OLD.ambiguous = 0 AND NEW.ambiguous > 0))
 AND (SELECT campaign FROM oncepush_delivery WHERE id = NEW.delivery_id) = 1
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, 'attempt:' || OLD.state, -1 FROM oncepush_delivery d
    WHERE d.id = NEW.delivery_id AND OLD.state <> NEW.state AND OLD.state IN ('accepted', 'invalid', 'rejected', 'duplicate')
    ON CONFLICT (message_id, state) DO UPDATE SET n = n - 1;
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, 'attempt:' || NEW.state, 1 FROM oncepush_delivery d
    WHERE d.id = NEW.delivery_id AND OLD.state <> NEW.state AND NEW.state IN ('accepted', 'invalid', 'rejected', 'duplicate')
    ON CONFLICT (message_id, state) DO UPDATE SET n = n + 1;
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, 'attempt:ambiguous', 1 FROM oncepush_delivery d
    WHERE d.id = NEW.delivery_id AND OLD.ambiguous = 0 AND NEW.ambiguous > 0
    ON CONFLICT (message_id, state) DO UPDATE SET n = n + 1;
END;

-- Campaigns already under way: each token a campaign delivery has
-- submitted to is held by the delivery whose submission reached it (an
-- accepted one first) or may have (in flight, ambiguous) or was settled
-- (invalid, rejected), and only when every submission to it was answered
-- "retry later" or never left by one of those, free (see driver/postgres's
-- 009_campaign_tokens.sql for why the order matters).
INSERT INTO oncepush_campaign_token (message_id, transport, token_key, delivery_id, free)
SELECT message_id, transport, token_key, delivery_id, free
FROM (
    SELECT d.message_id, a.transport, a.token_key, a.delivery_id, a.state IN ('retry', 'pending') AS free,
           row_number() OVER (
               PARTITION BY d.message_id, a.transport, a.token_key
               ORDER BY CASE WHEN a.state = 'accepted' THEN 0 WHEN a.state IN ('retry', 'pending') THEN 2 ELSE 1 END,
                        a.delivery_id
           ) AS pick
    FROM oncepush_device_attempt a
         JOIN oncepush_delivery d ON d.id = a.delivery_id
    WHERE d.campaign = 1 AND a.submissions > 0
)
WHERE pick = 1;
