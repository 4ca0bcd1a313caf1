-- oncepush ledger, version 7: campaign totals kept with the rows (D95), and
-- the per-transport ceiling's windows (D96).
--
-- oncepush_campaign_tally holds deltas: a statement that changes campaign
-- deliveries or their attempts appends one row per (message, state) it
-- changed; CampaignTallyCompact folds a message's rows into one per state.
-- States are delivery statuses, and attempt:<state> for attempts that ended
-- accepted, invalid or rejected, and attempt:ambiguous for an attempt whose
-- answer was lost at least once.
CREATE TABLE oncepush_campaign_tally (
    message_id bigint NOT NULL,
    state      text   NOT NULL,
    n          bigint NOT NULL
);

CREATE INDEX oncepush_campaign_tally_message ON oncepush_campaign_tally (message_id, state);

CREATE FUNCTION oncepush_tally_delivery_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT message_id, status, count(*) FROM new_rows WHERE campaign GROUP BY message_id, status;
    RETURN NULL;
END $$;

-- Each changed row counts -1 under its old status and +1 under its new one;
-- a row whose status did not change (a claim's lease) nets to nothing and is
-- dropped by HAVING. No join of the old and new rows: plpgsql keeps the
-- plan it made for the first statement of the session, whatever its size,
-- so every plan here is one that is right at any size.
CREATE FUNCTION oncepush_tally_delivery_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT message_id, state, sum(n)
    FROM (
        SELECT message_id, status AS state, -1 AS n FROM old_rows WHERE campaign
        UNION ALL
        SELECT message_id, status, 1 FROM new_rows WHERE campaign
    ) t
    GROUP BY message_id, state
    HAVING sum(n) <> 0;
    RETURN NULL;
END $$;

-- Totals outlive finished rows (D95); a pending delivery deleted leaves queued.
CREATE FUNCTION oncepush_tally_delivery_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT message_id, 'pending', -count(*) FROM old_rows
    WHERE campaign AND status = 'pending'
    GROUP BY message_id;
    RETURN NULL;
END $$;

CREATE TRIGGER oncepush_tally_delivery_insert AFTER INSERT ON oncepush_delivery
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION oncepush_tally_delivery_insert();
CREATE TRIGGER oncepush_tally_delivery_update AFTER UPDATE ON oncepush_delivery
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION oncepush_tally_delivery_update();
CREATE TRIGGER oncepush_tally_delivery_delete AFTER DELETE ON oncepush_delivery
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION oncepush_tally_delivery_delete();

-- Attempts: only the outcomes the totals count. The delivery says whether
-- the attempt is a campaign's (the attempt row does not carry it); it is
-- read by its primary key for each attempt that passed the filter (a
-- LATERAL subquery behind OFFSET 0, which the planner cannot turn into a
-- join): with no statistics on a table a campaign grew by a million rows,
-- or a plan kept from a small first statement, a join could be a scan of
-- every delivery per statement.
CREATE FUNCTION oncepush_tally_attempt_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, t.state, count(*)
    FROM new_rows a
    CROSS JOIN LATERAL (
        SELECT message_id FROM oncepush_delivery WHERE id = a.delivery_id AND campaign OFFSET 0
    ) d
    CROSS JOIN LATERAL (
        SELECT 'attempt:' || a.state AS state WHERE a.state IN ('accepted', 'invalid', 'rejected')
        UNION ALL
        SELECT 'attempt:ambiguous' WHERE a.ambiguous > 0
    ) t
    WHERE a.state IN ('accepted', 'invalid', 'rejected') OR a.ambiguous > 0 -- a mark (sending) reads no delivery
    GROUP BY d.message_id, t.state;
    RETURN NULL;
END $$;

-- As for deliveries: -1 under the old counted state, +1 under the new,
-- netting to nothing for a row that kept its state; "ambiguous at least once"
-- only grows, so +1 for a new row with ambiguous > 0 and -1 for an old one
-- counts the rows that crossed from 0.
CREATE FUNCTION oncepush_tally_attempt_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, t.state, sum(t.n)
    FROM (
        SELECT delivery_id, state, ambiguous, -1 AS n FROM old_rows
        WHERE state IN ('accepted', 'invalid', 'rejected') OR ambiguous > 0
        UNION ALL
        SELECT delivery_id, state, ambiguous, 1 FROM new_rows
        WHERE state IN ('accepted', 'invalid', 'rejected') OR ambiguous > 0
    ) a
    CROSS JOIN LATERAL (
        SELECT message_id FROM oncepush_delivery WHERE id = a.delivery_id AND campaign OFFSET 0
    ) d
    CROSS JOIN LATERAL (
        SELECT 'attempt:' || a.state AS state, a.n WHERE a.state IN ('accepted', 'invalid', 'rejected')
        UNION ALL
        SELECT 'attempt:ambiguous', a.n WHERE a.ambiguous > 0
    ) t
    GROUP BY d.message_id, t.state
    HAVING sum(t.n) <> 0;
    RETURN NULL;
END $$;

CREATE TRIGGER oncepush_tally_attempt_insert AFTER INSERT ON oncepush_device_attempt
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION oncepush_tally_attempt_insert();
CREATE TRIGGER oncepush_tally_attempt_update AFTER UPDATE ON oncepush_device_attempt
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION oncepush_tally_attempt_update();

-- Campaigns started before this version: their totals from their rows.
INSERT INTO oncepush_campaign_tally (message_id, state, n)
SELECT message_id, status, count(*) FROM oncepush_delivery WHERE campaign GROUP BY message_id, status;
INSERT INTO oncepush_campaign_tally (message_id, state, n)
SELECT d.message_id, 'attempt:' || a.state, count(*)
FROM oncepush_device_attempt a JOIN oncepush_delivery d ON d.id = a.delivery_id
WHERE d.campaign AND a.state IN ('accepted', 'invalid', 'rejected')
GROUP BY d.message_id, a.state;
INSERT INTO oncepush_campaign_tally (message_id, state, n)
SELECT d.message_id, 'attempt:ambiguous', count(*)
FROM oncepush_device_attempt a JOIN oncepush_delivery d ON d.id = a.delivery_id
WHERE d.campaign AND a.ambiguous > 0
GROUP BY d.message_id;

-- The per-transport ceiling (D96): what the claims took from each window.
CREATE TABLE oncepush_send_window (
    transport    text        NOT NULL,
    window_start timestamptz NOT NULL,
    allowance    integer     NOT NULL,
    used         integer     NOT NULL,
    granted      integer     NOT NULL, -- the last claim's grant, for RETURNING
    PRIMARY KEY (transport, window_start)
);

-- Cleanup forgets windows past an hour.
CREATE INDEX oncepush_send_window_start ON oncepush_send_window (window_start);
