-- The sqlite driver's statements of driver.LedgerExecutor (driver/ledger.go); conventions in queries.sql.

-- name: DeliveryGet :one
SELECT id, message_id, recipient, notification_id, coalesce(dedup_key, ''), status, attempts,
       next_attempt_at, coalesce(lease_id, 0), last_error, created_at, finished_at
FROM oncepush_delivery
WHERE id = @id;

-- name: DeliveryListByMessage :many
SELECT id, message_id, recipient, notification_id, coalesce(dedup_key, ''), status, attempts,
       next_attempt_at, coalesce(lease_id, 0), last_error, created_at, finished_at
FROM oncepush_delivery
WHERE message_id = @message_id AND id > @after_id
ORDER BY id
LIMIT @max;

-- name: DeliveryListByRecipient :many
-- One plain bound on id, also for the first page (the largest id), so the
-- index search starts at the cursor; "(@before_id = 0 OR id < …)" made SQLite
-- walk the recipient's every newer row and test each.
SELECT id, message_id, recipient, notification_id, coalesce(dedup_key, ''), status, attempts,
       next_attempt_at, coalesce(lease_id, 0), last_error, created_at, finished_at
FROM oncepush_delivery
WHERE recipient = @recipient AND id < @before_id
ORDER BY id DESC
LIMIT @max;

-- name: DeliveryCountByStatus :many
SELECT status, count(*) FROM oncepush_delivery WHERE message_id = @message_id GROUP BY status;

-- name: MessageGet :one
SELECT id, type, title, body, data, link, image, category, ambiguity, scheduled_at, expires_at, created_at,
       audience
FROM oncepush_message
WHERE id = @id;

-- name: MessageCancelCount :one
-- Part of MessageCancel, first: what the cancel will end (the write lock is
-- held, so nothing changes between the two).
SELECT count(*),
       coalesce(sum(EXISTS (SELECT 1 FROM oncepush_device_attempt a
                            WHERE a.delivery_id = d.id AND a.state = 'sending')), 0)
FROM oncepush_delivery d
WHERE d.message_id = @message_id AND d.status = 'pending';

-- name: MessageList :many
-- A page of messages, newest first (by creation, then id), before the
-- cursor (@before_at, @before_id: created before @before_at, or at it with
-- a smaller id), created in [@lo_at, @hi_at] (the executor folds the cursor
-- and the created range into these bounds, which SQLite seeks the index
-- to), and with @status 'done' (no delivery pending), a delivery status
-- (some delivery has it: 'pending', 'failed', …), or '' for any. A seek
-- into oncepush_message_created.
SELECT m.id, m.type, m.title, m.body, m.data, m.link, m.image, m.category, m.ambiguity, m.scheduled_at,
       m.expires_at, m.created_at, m.audience
FROM oncepush_message m
WHERE 1
  AND m.created_at BETWEEN @lo_at AND @hi_at
  AND (m.created_at < @before_at OR m.id < @before_id)
  AND (@status = '' OR
       CASE @status
         WHEN 'done' THEN NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.message_id = m.id AND d.status = 'pending')
         ELSE EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.message_id = m.id AND d.status = @status)
       END)
ORDER BY m.created_at DESC, m.id DESC
LIMIT @limit;

-- name: MessageListByCategory :many
-- MessageList of one category: a seek into oncepush_message_category.
SELECT m.id, m.type, m.title, m.body, m.data, m.link, m.image, m.category, m.ambiguity, m.scheduled_at,
       m.expires_at, m.created_at, m.audience
FROM oncepush_message m
WHERE m.category = @category
  AND m.created_at BETWEEN @lo_at AND @hi_at
  AND (m.created_at < @before_at OR m.id < @before_id)
  AND (@status = '' OR
       CASE @status
         WHEN 'done' THEN NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.message_id = m.id AND d.status = 'pending')
         ELSE EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.message_id = m.id AND d.status = @status)
       END)
ORDER BY m.created_at DESC, m.id DESC
LIMIT @limit;

-- name: MessageIDsByDedupKey :many
-- The messages with a delivery under the key: a probe of the dedup index,
-- which leads with it.
SELECT DISTINCT message_id FROM oncepush_delivery WHERE dedup_key = @dedup_key;

-- name: MessageExists :one
SELECT EXISTS (SELECT 1 FROM oncepush_message WHERE id = @id);

-- name: CampaignIDByMessage :one
-- The campaign whose message this is (a probe of oncepush_campaign_message).
-- A campaign's message is written with its campaign's message_id in one
-- transaction and never changes campaign, so the answer cannot go stale.
SELECT id FROM oncepush_campaign WHERE message_id = @message_id;

-- name: MessageCancel :execrows
-- Every pending delivery of the message ends canceled, leased or not; a
-- run holding one marks nothing more of it (DeviceAttemptMarkSending wants
-- it pending).
UPDATE oncepush_delivery
SET status = 'canceled', finished_at = @now, last_error = 'canceled'
WHERE message_id = @message_id AND status = 'pending';

-- name: DeviceAttemptAmbiguousCount :one
SELECT count(*)
FROM oncepush_device_attempt a
JOIN oncepush_delivery d ON d.id = a.delivery_id
WHERE d.message_id = @message_id AND a.ambiguous > 0;

-- name: DeviceAttemptCountByState :many
SELECT a.state, count(*)
FROM oncepush_delivery d
JOIN oncepush_device_attempt a ON a.delivery_id = d.id
WHERE d.message_id = @message_id
GROUP BY a.state;
