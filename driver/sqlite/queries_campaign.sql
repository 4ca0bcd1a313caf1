-- The sqlite driver's statements of driver.CampaignExecutor (driver/campaign.go); conventions in queries.sql.

-- name: CampaignDeliveryInsert :execrows
-- A campaign's deliveries of its message, in the campaign lane.
-- @deliveries: [[recipient, notification id, due µs], …]. No dedup key: one
-- per (message, recipient) among campaign deliveries, a key no send can
-- name (D105).
INSERT INTO oncepush_delivery (message_id, recipient, notification_id, next_attempt_at, created_at, campaign)
SELECT @message_id, u.value ->> 0, u.value ->> 1, u.value ->> 2, @now, 1
FROM json_each(@deliveries) AS u
WHERE true
ORDER BY u.key
ON CONFLICT (message_id, recipient) WHERE campaign = 1 DO NOTHING;

-- name: CampaignInsert :one
-- Content and filter are stored as the engine gives them (checked JSON).
-- Returns the row as written, as CampaignGet reads it.
INSERT INTO oncepush_campaign (name, status, content, audience, filter, start_at, rate_per_minute,
                               created_at, updated_at)
VALUES (@name, @status, @content, @audience, @filter, @start_at, @rate_per_minute, @now, @now)
RETURNING id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
          cursor, written, recipients, invalid_tokens, duplicate_tokens, unreached_no_device,
          unreached_filtered_out, unreached_malformed, unreached_duplicate, tries, last_error,
          created_at, updated_at, started_at, finished_at;

-- name: CampaignGet :one
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, unreached_no_device,
       unreached_filtered_out, unreached_malformed, unreached_duplicate, tries, last_error,
       created_at, updated_at, started_at, finished_at
FROM oncepush_campaign
WHERE id = @id;

-- name: CampaignLock :one
-- CampaignGet inside a write transaction (BEGIN IMMEDIATE), which holds the
-- database's one write lock until it ends: no row lock is needed or exists.
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, unreached_no_device,
       unreached_filtered_out, unreached_malformed, unreached_duplicate, tries, last_error,
       created_at, updated_at, started_at, finished_at
FROM oncepush_campaign
WHERE id = @id;

-- name: CampaignSave :exec
UPDATE oncepush_campaign
SET name = @name, status = @status, content = @content, audience = @audience, filter = @filter,
    start_at = @start_at, rate_per_minute = @rate_per_minute, message_id = nullif(@message_id, 0),
    cursor = @cursor, written = @written, recipients = @recipients, invalid_tokens = @invalid_tokens,
    duplicate_tokens = @duplicate_tokens, unreached_no_device = @unreached_no_device,
    unreached_filtered_out = @unreached_filtered_out, unreached_malformed = @unreached_malformed,
    unreached_duplicate = @unreached_duplicate, tries = @tries, last_error = @last_error,
    updated_at = @now, started_at = @started_at, finished_at = @finished_at
WHERE id = @id;

-- name: CampaignList :many
-- Newest first, below the cursor: a seek into the primary key, or into
-- oncepush_campaign_status when a status is given.
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, unreached_no_device,
       unreached_filtered_out, unreached_malformed, unreached_duplicate, tries, last_error,
       created_at, updated_at, started_at, finished_at
FROM oncepush_campaign
WHERE id < @before_id AND (@status = '' OR status = @status)
ORDER BY id DESC
LIMIT @max;

-- name: CampaignTry :one
-- The oldest campaign with work: one more try counted, or, when the tries
-- have run out, interrupted. A campaign whose tries have run out is left
-- alone for a lease after its last try began (updated_at, which the try
-- sets and only a step's end changes again): that try may still be running,
-- its process between this count and its write transaction (D102). No row
-- when none is due. One statement under the write lock, so no other process
-- picks between the choice and the count (no SKIP LOCKED: there is one
-- writer). SET's expressions read the row as it was; RETURNING reads it as
-- written.
UPDATE oncepush_campaign
SET tries      = CASE WHEN tries >= @max_tries THEN tries ELSE tries + 1 END,
    status     = CASE WHEN tries >= @max_tries THEN 'interrupted' ELSE status END,
    last_error = CASE WHEN tries < @max_tries THEN last_error
                      WHEN last_error = '' THEN @abandoned
                      ELSE @abandoned || '; before it: ' || last_error END,
    updated_at = @now
WHERE id = (SELECT id FROM oncepush_campaign
            WHERE status IN ('scheduled', 'sending')
              AND (status = 'sending' OR start_at <= @now)
              AND (tries < @max_tries OR updated_at <= @now - @lease_us)
            ORDER BY id
            LIMIT 1)
RETURNING id, tries, status = 'interrupted';

-- name: CampaignPageInsert :execrows
-- No row written means the page number is taken: CampaignPageGet reads the
-- digest recorded for it (SQLite has no INSERT inside WITH, so one statement
-- cannot do both as PostgreSQL's does).
INSERT INTO oncepush_campaign_page (campaign_id, page, digest, size)
VALUES (@campaign_id, @page, @digest, @size)
ON CONFLICT (campaign_id, page) DO NOTHING;

-- name: CampaignPageGet :one
SELECT digest FROM oncepush_campaign_page WHERE campaign_id = @campaign_id AND page = @page;

-- name: CampaignRecipientInsert :execrows
-- @recipients: a JSON array. CampaignCountAdd then adds the count
-- written to the campaign's, in the same write transaction.
INSERT INTO oncepush_campaign_recipient (campaign_id, recipient)
SELECT @campaign_id, value FROM json_each(@recipients)
WHERE true
ON CONFLICT DO NOTHING;

-- name: CampaignCountAdd :exec
-- CampaignPageAdd's second half: the recipients CampaignRecipientInsert
-- wrote (@added) join the campaign's count.
UPDATE oncepush_campaign SET recipients = recipients + @added WHERE id = @campaign_id;

-- name: CampaignRecipientsAfter :many
SELECT recipient FROM oncepush_campaign_recipient
WHERE campaign_id = @campaign_id AND recipient > @after
ORDER BY recipient
LIMIT @max;

-- name: DeviceListAfter :many
-- A seek into oncepush_device_recipient.
SELECT d.id, d.recipient, d.transport, d.token, d.token_key, d.platform, d.session, d.locale,
       d.time_zone, d.tags, d.created_at, d.registered_at
FROM oncepush_device d
WHERE d.recipient > @after
  AND (d.session = '' OR NOT EXISTS (
        SELECT 1 FROM oncepush_revoked_session s WHERE s.session = d.session))
ORDER BY d.recipient, d.id
LIMIT @max;

-- name: CampaignTally :many
-- One row per state, kept in place by migration 7's triggers (D95).
SELECT state, n FROM oncepush_campaign_tally WHERE message_id = @message_id;

-- name: SendWindowTake :many
-- Grants min(asked, allowance - used) per transport and adds it to used
-- (D96). The SET clauses all read the row as it was, so granted is this
-- claim's grant. @asks: [{"transport", "start" (µs), "asked", "allowance"}, …]
INSERT INTO oncepush_send_window AS w (transport, window_start, allowance, used, granted)
SELECT json_extract(value, '$.transport'), json_extract(value, '$.start'), json_extract(value, '$.allowance'),
       min(json_extract(value, '$.asked'), json_extract(value, '$.allowance')),
       min(json_extract(value, '$.asked'), json_extract(value, '$.allowance'))
FROM json_each(@asks)
WHERE true
ON CONFLICT (transport, window_start) DO UPDATE
SET granted   = max(0, min(excluded.granted, excluded.allowance - w.used)),
    used      = w.used + max(0, min(excluded.granted, excluded.allowance - w.used)),
    allowance = excluded.allowance
RETURNING transport, granted;

-- name: SendWindowDeleteBefore :execrows
DELETE FROM oncepush_send_window WHERE window_start < @before;
