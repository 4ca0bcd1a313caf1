-- The postgres driver's statements of driver.CampaignExecutor (driver/campaign.go); conventions in queries.sql.

-- name: CampaignInsert :one
INSERT INTO oncepush_campaign (name, status, content, audience, filter, start_at, rate_per_minute,
                               created_at, updated_at)
VALUES (@name, @status, @content::jsonb, @audience, @filter::jsonb, @start_at, @rate_per_minute,
        coalesce(@now::timestamptz, now()), coalesce(@now::timestamptz, now()))
RETURNING id, created_at;

-- name: CampaignGet :one
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, unreached_no_device,
       unreached_filtered_out, unreached_malformed, unreached_duplicate, tries, last_error,
       created_at, updated_at, started_at, finished_at
FROM oncepush_campaign
WHERE id = @id;

-- name: CampaignLock :one
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, unreached_no_device,
       unreached_filtered_out, unreached_malformed, unreached_duplicate, tries, last_error,
       created_at, updated_at, started_at, finished_at
FROM oncepush_campaign
WHERE id = @id
FOR UPDATE;

-- name: CampaignSave :exec
UPDATE oncepush_campaign
SET name = @name, status = @status, content = @content::jsonb, audience = @audience, filter = @filter::jsonb,
    start_at = @start_at, rate_per_minute = @rate_per_minute, message_id = nullif(@message_id::bigint, 0),
    cursor = @cursor, written = @written, recipients = @recipients, invalid_tokens = @invalid_tokens,
    duplicate_tokens = @duplicate_tokens, unreached_no_device = @unreached_no_device,
    unreached_filtered_out = @unreached_filtered_out, unreached_malformed = @unreached_malformed,
    unreached_duplicate = @unreached_duplicate, tries = @tries, last_error = @last_error,
    updated_at = coalesce(@now::timestamptz, now()), started_at = @started_at, finished_at = @finished_at
WHERE id = @id;

-- name: CampaignList :many
-- Newest first, below the cursor: a seek into the primary key, or into
-- oncepush_campaign_status when a status is given.
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, unreached_no_device,
       unreached_filtered_out, unreached_malformed, unreached_duplicate, tries, last_error,
       created_at, updated_at, started_at, finished_at
FROM oncepush_campaign
WHERE id < @before_id AND (@status::text = '' OR status = @status)
ORDER BY id DESC
LIMIT @max;

-- name: CampaignTry :one
-- The oldest campaign with work, skipping one another process is working
-- on (its row locked): one more try counted, or, when the tries have run
-- out, interrupted. A campaign whose tries have run out is left alone for a
-- lease after its last try began (updated_at, which the try sets and only a
-- step's end changes again): that try may still be running, its process
-- between this count and its lock (D102). No row when none is due.
WITH n AS (SELECT coalesce(@now::timestamptz, now()) AS now),
pick AS (
    SELECT c.id
    FROM oncepush_campaign c, n
    WHERE c.status IN ('scheduled', 'sending')
      AND (c.status = 'sending' OR c.start_at <= n.now)
      AND (c.tries < @max_tries OR c.updated_at <= n.now - @lease_us::bigint * interval '1 microsecond')
    ORDER BY c.id
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE oncepush_campaign c
SET tries = CASE WHEN c.tries >= @max_tries THEN c.tries ELSE c.tries + 1 END,
    status = CASE WHEN c.tries >= @max_tries THEN 'interrupted' ELSE c.status END,
    last_error = CASE WHEN c.tries < @max_tries THEN c.last_error
                      WHEN c.last_error = '' THEN @abandoned::text
                      ELSE @abandoned::text || '; before it: ' || c.last_error END,
    updated_at = n.now
FROM pick, n
WHERE c.id = pick.id
RETURNING c.id, c.tries, c.status = 'interrupted';

-- name: CampaignPageInsert :one
-- The page's digest: inserted, or the one recorded before.
WITH ins AS (
    INSERT INTO oncepush_campaign_page (campaign_id, page, digest, size)
    VALUES (@campaign_id, @page, @digest, cardinality(@recipients::text[]))
    ON CONFLICT (campaign_id, page) DO NOTHING
    RETURNING digest
)
SELECT true, digest FROM ins
UNION ALL
SELECT false, digest FROM oncepush_campaign_page
WHERE campaign_id = @campaign_id AND page = @page AND NOT EXISTS (SELECT 1 FROM ins);

-- name: CampaignRecipientInsert :one
WITH ins AS (
    INSERT INTO oncepush_campaign_recipient (campaign_id, recipient)
    SELECT @campaign_id, r FROM unnest(@recipients::text[]) AS r
    ON CONFLICT DO NOTHING
    RETURNING 1
), c AS (SELECT count(*)::integer AS n FROM ins)
UPDATE oncepush_campaign SET recipients = recipients + c.n
FROM c
WHERE id = @campaign_id
RETURNING c.n;

-- name: CampaignRecipientsAfter :many
SELECT recipient FROM oncepush_campaign_recipient
WHERE campaign_id = @campaign_id AND recipient > @after
ORDER BY recipient
LIMIT @max;

-- name: DeviceListAfter :many
-- A seek into oncepush_device_recipient. The revocation check is a
-- correlated subquery, one primary-key probe per device with a session: as
-- NOT EXISTS the planner may make it an anti-join that reads every revoked
-- session (the page's LIMIT is a parameter, so a generic plan cannot know
-- the page is small).
SELECT d.id, d.recipient, d.transport, d.token, d.token_key, d.platform, d.session, d.locale,
       d.time_zone, d.tags, d.created_at, d.registered_at
FROM oncepush_device d
WHERE d.recipient > @after
  AND (d.session = '' OR (SELECT count(*) FROM oncepush_revoked_session s WHERE s.session = d.session) = 0)
ORDER BY d.recipient, d.id
LIMIT @max;

-- name: CampaignDeliveryInsert :one
-- A campaign's deliveries of its message, each row due at its own time, in
-- the campaign lane. No dedup key: one per (message, recipient) among
-- campaign deliveries, a key no send can name (D105).
WITH n AS (SELECT coalesce(@now::timestamptz, now()) AS now),
d AS (
    INSERT INTO oncepush_delivery (message_id, recipient, notification_id, next_attempt_at, created_at, campaign)
    SELECT @message_id, u.recipient, u.notification_id, u.due_at, n.now, true
    FROM n, unnest(@recipients::text[], @notification_ids::text[], @due_at::timestamptz[])
              AS u (recipient, notification_id, due_at)
    ON CONFLICT (message_id, recipient) WHERE campaign DO NOTHING
    RETURNING 1
)
SELECT count(*)::integer FROM d;

-- name: CampaignTally :many
-- The message's deltas summed (D95): an index range, a few rows per state
-- once CampaignTallyCompact has folded them.
SELECT state, sum(n)::bigint FROM oncepush_campaign_tally WHERE message_id = @message_id GROUP BY state;

-- name: CampaignTallyCompact :one
-- Folds the deltas of messages with at least @min_rows rows into one row per
-- state, in one statement: the DELETE removes the rows its snapshot sees and
-- the INSERT writes their sums, so a reader sees either set, never neither;
-- deltas committed meanwhile are not in the snapshot and stay.
WITH busy AS (
    SELECT message_id FROM oncepush_campaign_tally GROUP BY message_id HAVING count(*) >= @min_rows
), gone AS (
    DELETE FROM oncepush_campaign_tally t USING busy
    WHERE t.message_id = busy.message_id
    RETURNING t.message_id, t.state, t.n
), folded AS (
    INSERT INTO oncepush_campaign_tally (message_id, state, n)
    SELECT message_id, state, sum(n) FROM gone GROUP BY message_id, state
    RETURNING message_id
)
SELECT count(DISTINCT message_id)::integer FROM folded;

-- name: SendWindowTake :many
-- Grants least(asked, allowance - used) per transport and adds it to used
-- (D96). The SET clauses all read the row as it was, so granted is this
-- claim's grant. Sorted transports lock their rows in one order.
INSERT INTO oncepush_send_window AS w (transport, window_start, allowance, used, granted)
SELECT u.transport, u.start, u.allowance, least(u.asked, u.allowance), least(u.asked, u.allowance)
FROM unnest(@transports::text[], @starts::timestamptz[], @asked::integer[], @allowance::integer[])
         AS u (transport, start, asked, allowance)
ORDER BY u.transport
ON CONFLICT (transport, window_start) DO UPDATE
SET granted   = greatest(0, least(excluded.granted, excluded.allowance - w.used)),
    used      = w.used + greatest(0, least(excluded.granted, excluded.allowance - w.used)),
    allowance = excluded.allowance
RETURNING w.transport, w.granted;

-- name: SendWindowDeleteBefore :execrows
DELETE FROM oncepush_send_window WHERE window_start < @before;
