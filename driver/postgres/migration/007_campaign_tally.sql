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

CREATE FUNCTION oncepush_tally_delivery_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT message_id, state, sum(n)
    FROM (
        SELECT o.message_id, o.status AS state, -1 AS n
        FROM old_rows o JOIN new_rows w ON w.id = o.id
        WHERE o.campaign AND o.status <> w.status
        UNION ALL
        SELECT w.message_id, w.status, 1
        FROM old_rows o JOIN new_rows w ON w.id = o.id
        WHERE o.campaign AND o.status <> w.status
    ) t
    GROUP BY message_id, state;
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
-- a join could be planned as a scan of every delivery per statement.
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

CREATE FUNCTION oncepush_tally_attempt_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, t.state, sum(t.n)
    FROM old_rows o
    JOIN new_rows a ON a.delivery_id = o.delivery_id AND a.transport = o.transport AND a.token_key = o.token_key
    CROSS JOIN LATERAL (
        SELECT message_id FROM oncepush_delivery WHERE id = a.delivery_id AND campaign OFFSET 0
    ) d
    CROSS JOIN LATERAL (
        SELECT 'attempt:' || o.state AS state, -1 AS n
        WHERE o.state <> a.state AND o.state IN ('accepted', 'invalid', 'rejected')
        UNION ALL
        SELECT 'attempt:' || a.state, 1
        WHERE o.state <> a.state AND a.state IN ('accepted', 'invalid', 'rejected')
        UNION ALL
        SELECT 'attempt:ambiguous', 1 WHERE o.ambiguous = 0 AND a.ambiguous > 0
    ) t
    WHERE (o.state <> a.state AND (o.state IN ('accepted', 'invalid', 'rejected') OR a.state IN ('accepted', 'invalid', 'rejected')))
       OR (o.ambiguous = 0 AND a.ambiguous > 0) -- a mark (sending) reads no delivery
    GROUP BY d.message_id, t.state;
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
