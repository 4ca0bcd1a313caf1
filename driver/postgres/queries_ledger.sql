-- The postgres driver's statements of driver.LedgerExecutor (driver/ledger.go); conventions in queries.sql.

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
-- One plain bound on id, also for the first page (the largest id): a seek in
-- oncepush_delivery_recipient in every plan. "(@before_id = 0 OR id < …)"
-- became a filter in a generic plan, reading every newer row of the history.
SELECT id, message_id, recipient, notification_id, coalesce(dedup_key, ''), status, attempts,
       next_attempt_at, coalesce(lease_id, 0), last_error, created_at, finished_at
FROM oncepush_delivery
WHERE recipient = @recipient AND id < @before_id::bigint
ORDER BY id DESC
LIMIT @max;

-- name: DeliveryCountByStatus :many
SELECT status, count(*) FROM oncepush_delivery WHERE message_id = @message_id GROUP BY status;

-- name: MessageGet :one
SELECT id, type, title, body, data, link, image, category, ambiguity, scheduled_at, expires_at, created_at, audience
FROM oncepush_message
WHERE id = @id;

-- name: MessageList :many
-- A page of messages, newest first (by creation, then id), before the
-- cursor (@before_at, @before_id; the first page passes NULL and the largest
-- id), created in [@created_from, @created_to) when given, and with
-- @status 'done' (no delivery pending), a delivery status (some delivery
-- has it: 'pending', 'failed', …), or '' for any. A seek into
-- oncepush_message_created.
SELECT m.id, m.type, m.title, m.body, m.data, m.link, m.image, m.category, m.ambiguity, m.scheduled_at,
       m.expires_at, m.created_at, m.audience
FROM oncepush_message m
WHERE (m.created_at, m.id) < (coalesce(@before_at::timestamptz, 'infinity'), @before_id::bigint)
  AND m.created_at >= coalesce(@created_from::timestamptz, '-infinity')
  AND m.created_at < coalesce(@created_to::timestamptz, 'infinity')
  AND (@status::text = '' OR
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
  AND (m.created_at, m.id) < (coalesce(@before_at::timestamptz, 'infinity'), @before_id::bigint)
  AND m.created_at >= coalesce(@created_from::timestamptz, '-infinity')
  AND m.created_at < coalesce(@created_to::timestamptz, 'infinity')
  AND (@status::text = '' OR
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

-- name: CampaignIDByMessage :one
-- The campaign whose message this is (a probe of oncepush_campaign_message).
-- A campaign's message is written with its campaign's message_id in one
-- transaction and never changes campaign, so the answer cannot go stale.
SELECT id FROM oncepush_campaign WHERE message_id = @message_id;

-- name: MessageCancel :many
-- Every pending delivery of the message ends canceled, leased or not; a
-- run holding one marks nothing more of it (DeviceAttemptMarkSending wants
-- it pending, with the row locked). The rows are locked by id, ascending,
-- before the update, as the mark and the record lock theirs (D101): a
-- plain UPDATE locks them in the order its scan finds them, the heap's,
-- and deadlocked with a record of the same deliveries. A row a record
-- finished while this waited for it is left out when the lock is granted.
WITH locked AS MATERIALIZED (
    SELECT id
    FROM oncepush_delivery
    WHERE message_id = @message_id AND status = 'pending'
    ORDER BY id
    FOR NO KEY UPDATE
)
UPDATE oncepush_delivery d
SET status = 'canceled', finished_at = coalesce(@now::timestamptz, now()), last_error = 'canceled'
FROM locked
WHERE d.id = locked.id
RETURNING d.id;

-- name: MessageCancelInFlight :one
-- Part of MessageCancel, after it in the same transaction: a statement of
-- its own, so that it sees every mark that committed before the cancel
-- locked the rows (and none can commit after).
SELECT count(DISTINCT delivery_id)
FROM oncepush_device_attempt
WHERE delivery_id = ANY (@ids::bigint[]) AND state = 'sending';

-- name: MessageExists :one
SELECT EXISTS (SELECT 1 FROM oncepush_message WHERE id = @id);

-- name: DeviceAttemptAmbiguousCount :one
SELECT count(*)
FROM oncepush_device_attempt a
JOIN oncepush_delivery d ON d.id = a.delivery_id
WHERE d.message_id = @message_id AND a.ambiguous > 0;

-- name: DeviceAttemptCountByState :many
SELECT a.state, count(*)::integer
FROM oncepush_delivery d
JOIN oncepush_device_attempt a ON a.delivery_id = d.id
WHERE d.message_id = @message_id
GROUP BY a.state;
