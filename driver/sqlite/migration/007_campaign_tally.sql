-- oncepush ledger, version 7: campaign totals kept with the rows (D95), and
-- the per-transport ceiling's windows (D96).
--
-- oncepush_campaign_tally: one row per (campaign message, state), kept by
-- the triggers below in the transaction that changes the rows. States are
-- delivery statuses, attempt:<state> for attempts that ended accepted,
-- invalid or rejected, and attempt:ambiguous for an attempt whose answer
-- was lost at least once. One writer at a time, so the rows are updated in
-- place (PostgreSQL appends deltas instead).
CREATE TABLE oncepush_campaign_tally (
    message_id INTEGER NOT NULL,
    state      TEXT    NOT NULL,
    n          INTEGER NOT NULL,
    PRIMARY KEY (message_id, state)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER oncepush_tally_delivery_insert AFTER INSERT ON oncepush_delivery
WHEN NEW.campaign = 1
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n) VALUES (NEW.message_id, NEW.status, 1)
    ON CONFLICT (message_id, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER oncepush_tally_delivery_update AFTER UPDATE OF status ON oncepush_delivery
WHEN OLD.campaign = 1 AND OLD.status <> NEW.status
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n) VALUES (OLD.message_id, OLD.status, -1)
    ON CONFLICT (message_id, state) DO UPDATE SET n = n - 1;
    INSERT INTO oncepush_campaign_tally (message_id, state, n) VALUES (NEW.message_id, NEW.status, 1)
    ON CONFLICT (message_id, state) DO UPDATE SET n = n + 1;
END;

-- Totals outlive finished rows (D95); a pending delivery deleted leaves queued.
CREATE TRIGGER oncepush_tally_delivery_delete AFTER DELETE ON oncepush_delivery
WHEN OLD.campaign = 1 AND OLD.status = 'pending'
BEGIN
    UPDATE oncepush_campaign_tally SET n = n - 1 WHERE message_id = OLD.message_id AND state = 'pending';
END;

-- Attempts: the delivery says whether it is a campaign's.
CREATE TRIGGER oncepush_tally_attempt_insert AFTER INSERT ON oncepush_device_attempt
WHEN (NEW.state IN ('accepted', 'invalid', 'rejected') OR NEW.ambiguous > 0)
 AND (SELECT campaign FROM oncepush_delivery WHERE id = NEW.delivery_id) = 1
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, 'attempt:' || NEW.state, 1 FROM oncepush_delivery d
    WHERE d.id = NEW.delivery_id AND NEW.state IN ('accepted', 'invalid', 'rejected')
    ON CONFLICT (message_id, state) DO UPDATE SET n = n + 1;
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, 'attempt:ambiguous', 1 FROM oncepush_delivery d
    WHERE d.id = NEW.delivery_id AND NEW.ambiguous > 0
    ON CONFLICT (message_id, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER oncepush_tally_attempt_update AFTER UPDATE ON oncepush_device_attempt
WHEN ((OLD.state <> NEW.state AND (OLD.state IN ('accepted', 'invalid', 'rejected') OR NEW.state IN ('accepted', 'invalid', 'rejected')))
      OR (OLD.ambiguous = 0 AND NEW.ambiguous > 0))
 AND (SELECT campaign FROM oncepush_delivery WHERE id = NEW.delivery_id) = 1
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, 'attempt:' || OLD.state, -1 FROM oncepush_delivery d
    WHERE d.id = NEW.delivery_id AND OLD.state <> NEW.state AND OLD.state IN ('accepted', 'invalid', 'rejected')
    ON CONFLICT (message_id, state) DO UPDATE SET n = n - 1;
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, 'attempt:' || NEW.state, 1 FROM oncepush_delivery d
    WHERE d.id = NEW.delivery_id AND OLD.state <> NEW.state AND NEW.state IN ('accepted', 'invalid', 'rejected')
    ON CONFLICT (message_id, state) DO UPDATE SET n = n + 1;
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, 'attempt:ambiguous', 1 FROM oncepush_delivery d
    WHERE d.id = NEW.delivery_id AND OLD.ambiguous = 0 AND NEW.ambiguous > 0
    ON CONFLICT (message_id, state) DO UPDATE SET n = n + 1;
END;

-- Campaigns started before this version: their totals from their rows.
INSERT INTO oncepush_campaign_tally (message_id, state, n)
SELECT message_id, status, count(*) FROM oncepush_delivery WHERE campaign = 1 GROUP BY message_id, status;
INSERT INTO oncepush_campaign_tally (message_id, state, n)
SELECT d.message_id, 'attempt:' || a.state, count(*)
FROM oncepush_device_attempt a JOIN oncepush_delivery d ON d.id = a.delivery_id
WHERE d.campaign = 1 AND a.state IN ('accepted', 'invalid', 'rejected')
GROUP BY d.message_id, a.state;
INSERT INTO oncepush_campaign_tally (message_id, state, n)
SELECT d.message_id, 'attempt:ambiguous', count(*)
FROM oncepush_device_attempt a JOIN oncepush_delivery d ON d.id = a.delivery_id
WHERE d.campaign = 1 AND a.ambiguous > 0
GROUP BY d.message_id;

-- The per-transport ceiling (D96): what the claims took from each window.
CREATE TABLE oncepush_send_window (
    transport    TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    allowance    INTEGER NOT NULL,
    used         INTEGER NOT NULL,
    granted      INTEGER NOT NULL, -- the last claim's grant, for RETURNING
    PRIMARY KEY (transport, window_start)
) STRICT, WITHOUT ROWID;

-- Cleanup forgets windows past an hour.
CREATE INDEX oncepush_send_window_start ON oncepush_send_window (window_start);
