-- oncepush ledger, version 9: one campaign reaches one token once (D107).
--
-- oncepush_campaign_token holds, per campaign message and token, the
-- delivery that submitted the campaign to it. The mark that counts a
-- campaign pair's submission takes the row first (insert-first on the
-- primary key), so a token that moved to another recipient of the same
-- campaign is not submitted a second time by that recipient's delivery,
-- whose attempt then ends "duplicate". "free" says the holder's last
-- submission provably did not reach the device (the provider said "retry
-- later", or the request never left): another delivery may take it over.
-- A delivery deleted (retention, a recipient's deletion) frees its tokens.
CREATE TABLE oncepush_campaign_token (
    message_id  bigint  NOT NULL,
    transport   text    NOT NULL,
    token_key   text    NOT NULL,
    delivery_id bigint  NOT NULL REFERENCES oncepush_delivery (id) ON DELETE CASCADE,
    free        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (message_id, transport, token_key)
);

CREATE INDEX oncepush_campaign_token_delivery ON oncepush_campaign_token (delivery_id);

-- An attempt that the campaign's delivery did not submit because another
-- delivery of the campaign had reached its token ends "duplicate".
ALTER TABLE oncepush_device_attempt DROP CONSTRAINT oncepush_device_attempt_state_check;
ALTER TABLE oncepush_device_attempt ADD CONSTRAINT oncepush_device_attempt_state_check
    CHECK (state IN ('pending', 'sending', 'accepted', 'invalid', 'retry', 'rejected', 'ambiguous', 'duplicate'));

-- The totals count attempts that ended "duplicate" too (attempt:duplicate):
-- the campaign's duplicateTokens adds them to the expansion's count.
CREATE OR REPLACE FUNCTION oncepush_tally_attempt_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, t.state, count(*)
    FROM new_rows a
    CROSS JOIN LATERAL (
        SELECT message_id FROM oncepush_delivery WHERE id = a.delivery_id AND campaign OFFSET 0
    ) d
    CROSS JOIN LATERAL (
        SELECT 'attempt:' || a.state AS state WHERE a.state IN ('accepted', 'invalid', 'rejected', 'duplicate')
        UNION ALL
        SELECT 'attempt:ambiguous' WHERE a.ambiguous > 0
    ) t
    WHERE a.state IN ('accepted', 'invalid', 'rejected', 'duplicate') OR a.ambiguous > 0 -- a mark (sending) reads no delivery
    GROUP BY d.message_id, t.state;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION oncepush_tally_attempt_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT d.message_id, t.state, sum(t.n)
    FROM (
        SELECT delivery_id, state, ambiguous, -1 AS n FROM old_rows
        WHERE state IN ('accepted', 'invalid', 'rejected', 'duplicate') OR ambiguous > 0
        UNION ALL
        SELECT delivery_id, state, ambiguous, 1 FROM new_rows
        WHERE state IN ('accepted', 'invalid', 'rejected', 'duplicate') OR ambiguous > 0
    ) a
    CROSS JOIN LATERAL (
        SELECT message_id FROM oncepush_delivery WHERE id = a.delivery_id AND campaign OFFSET 0
    ) d
    CROSS JOIN LATERAL (
        SELECT 'attempt:' || a.state AS state, a.n WHERE a.state IN ('accepted', 'invalid', 'rejected', 'duplicate')
        UNION ALL
        SELECT 'attempt:ambiguous', a.n WHERE a.ambiguous > 0
    ) t
    GROUP BY d.message_id, t.state
    HAVING sum(t.n) <> 0;
    RETURN NULL;
END $$;

-- Campaigns already under way: each token a campaign delivery has
-- submitted to is held by the delivery whose submission reached it (an
-- accepted one first) or may have (in flight, ambiguous) or was settled
-- (invalid, rejected), and only when every submission to it was answered
-- "retry later" or never left by one of those, free. A token that moved
-- between batches was submitted by several deliveries: a free holder
-- chosen over one that may have reached the device would let the next
-- delivery of the campaign take the token over and send it again.
INSERT INTO oncepush_campaign_token (message_id, transport, token_key, delivery_id, free)
SELECT DISTINCT ON (d.message_id, a.transport, a.token_key)
       d.message_id, a.transport, a.token_key, a.delivery_id, a.state IN ('retry', 'pending')
FROM oncepush_device_attempt a
     JOIN oncepush_delivery d ON d.id = a.delivery_id
WHERE d.campaign AND a.submissions > 0
ORDER BY d.message_id, a.transport, a.token_key,
         CASE WHEN a.state = 'accepted' THEN 0 WHEN a.state IN ('retry', 'pending') THEN 2 ELSE 1 END,
         a.delivery_id;
