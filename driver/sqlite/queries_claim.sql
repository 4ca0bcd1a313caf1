-- The sqlite driver's statements of driver.ClaimExecutor (driver/claim.go); conventions in queries.sql.

-- name: DeliveryClaimDue :many
-- The first half of the claim: the due rows and the lease each carries now.
-- PostgreSQL claims in one statement (a MATERIALIZED CTE with FOR UPDATE SKIP
-- LOCKED) because other transactions claim at the same moment, and an
-- UPDATE … WHERE id IN (subquery LIMIT n) could claim more than n there. Neither
-- concern applies here: the claim runs in a BEGIN IMMEDIATE transaction, which
-- holds the database's one write lock from its first statement to its commit,
-- so no other claimer can read or change these rows in between, and the UPDATE
-- below changes exactly the ids this statement returned. Two statements are
-- needed only because SQLite's RETURNING sees the new row, never the old
-- lease_id.
-- The transactional lane first, then the campaign lane fills the rest of
-- the batch (D87): each a seek into its own partial index.
SELECT id, lease FROM (
    SELECT id, lease, 0 AS lane, next_attempt_at AS due FROM (
        SELECT id, coalesce(lease_id, 0) AS lease, next_attempt_at
        FROM oncepush_delivery
        WHERE status = 'pending' AND campaign = 0
          AND next_attempt_at <= @now
        ORDER BY next_attempt_at, id
        LIMIT @max)
    UNION ALL
    SELECT id, lease, 1 AS lane, next_attempt_at AS due FROM (
        SELECT id, coalesce(lease_id, 0) AS lease, next_attempt_at
        FROM oncepush_delivery
        WHERE status = 'pending' AND campaign = 1
          AND next_attempt_at <= @now
        ORDER BY next_attempt_at, id
        LIMIT CASE WHEN @no_campaign THEN 0 ELSE @max END)
)
ORDER BY lane, due, id
LIMIT @max;

-- name: DeliveryClaim :many
-- The second half: lease the rows DeliveryClaimDue returned (a JSON array of ids).
UPDATE oncepush_delivery
SET lease_id        = @lease_id,
    next_attempt_at = @now + @lease_us
WHERE id IN (SELECT value FROM json_each(@ids))
RETURNING id, message_id, recipient, notification_id, attempts, campaign;

-- name: MessageGetMany :many
SELECT id, type, title, body, data, link, image, category, ambiguity, scheduled_at, expires_at, created_at,
       audience
FROM oncepush_message
WHERE id IN (SELECT value FROM json_each(@ids));

-- name: DeviceListByRecipients :many
SELECT d.id, d.recipient, d.transport, d.token, d.token_key, d.platform, d.session, d.locale,
       d.time_zone, d.tags, d.created_at, d.registered_at
FROM oncepush_device d
WHERE d.recipient IN (SELECT value FROM json_each(@recipients))
  AND (d.session = '' OR NOT EXISTS (
        SELECT 1 FROM oncepush_revoked_session s WHERE s.session = d.session))
ORDER BY d.recipient, d.id;

-- name: DeviceAttemptListByDeliveries :many
SELECT delivery_id, device_id, transport, token_key, state, submissions, ambiguous, provider_id, error,
       first_sent_at, last_sent_at, updated_at
FROM oncepush_device_attempt
WHERE delivery_id IN (SELECT value FROM json_each(@delivery_ids))
ORDER BY delivery_id, device_id;
