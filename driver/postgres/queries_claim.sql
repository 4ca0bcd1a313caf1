-- The postgres driver's statements of driver.ClaimExecutor (driver/claim.go); conventions in queries.sql.

-- name: DeliveryClaim :many
-- The MATERIALIZED CTE picks at most @max rows; the UPDATE ... WHERE id IN
-- (subquery LIMIT n) form can claim more than n when the planner re-runs it.
-- Only delivery rows are locked (never the shared message row).
-- The transactional lane first, then the campaign lane fills the rest of
-- the batch (D87): each a seek into its own partial index. Each lane
-- compares with now itself rather than joining n, so that now is the due
-- index's bound: the walk stops at the first row not yet due (a join with n
-- was a filter, and a claim on a short queue read on through every leased
-- row), and it is planned with sorting off (plannerOff, D90), so it never
-- reads the whole due queue to sort it. Both read the same instant as n:
-- now() is the transaction's start.
WITH n AS MATERIALIZED (
    SELECT coalesce(@now::timestamptz, now()) AS now
), first AS MATERIALIZED (
    SELECT d.id, d.lease_id AS prev_lease_id
    FROM oncepush_delivery d
    WHERE d.status = 'pending' AND NOT d.campaign
      AND d.next_attempt_at <= coalesce(@now::timestamptz, now())
    ORDER BY d.next_attempt_at, d.id
    LIMIT @max
    FOR UPDATE OF d SKIP LOCKED
), rest AS MATERIALIZED (
    SELECT d.id, d.lease_id AS prev_lease_id
    FROM oncepush_delivery d
    WHERE d.status = 'pending' AND d.campaign
      AND d.next_attempt_at <= coalesce(@now::timestamptz, now())
    ORDER BY d.next_attempt_at, d.id
    LIMIT CASE WHEN @no_campaign::boolean THEN 0 ELSE greatest(@max::integer - (SELECT count(*) FROM first), 0) END
    FOR UPDATE OF d SKIP LOCKED
), due AS (
    SELECT * FROM first UNION ALL SELECT * FROM rest
)
UPDATE oncepush_delivery d
SET lease_id        = @lease_id,
    next_attempt_at = n.now + @lease_us::bigint * interval '1 microsecond'
FROM due, n
WHERE d.id = due.id
RETURNING d.id, d.message_id, d.recipient, d.notification_id, d.attempts, d.campaign,
          coalesce(due.prev_lease_id, 0), n.now;

-- name: MessageGetMany :many
SELECT id, type, title, body, data, link, image, category, ambiguity, scheduled_at, expires_at, created_at, audience
FROM oncepush_message
WHERE id = ANY (@ids::bigint[]);

-- name: DeviceListByRecipients :many
SELECT d.id, d.recipient, d.transport, d.token, d.token_key, d.platform, d.session, d.locale,
       d.time_zone, d.tags, d.created_at, d.registered_at
FROM oncepush_device d
WHERE d.recipient = ANY (@recipients::text[])
  AND (d.session = '' OR NOT EXISTS (
        SELECT 1 FROM oncepush_revoked_session s WHERE s.session = d.session))
ORDER BY d.recipient, d.id;

-- name: DeviceAttemptListByDeliveries :many
SELECT delivery_id, device_id, transport, token_key, state, submissions, ambiguous, provider_id, error,
       first_sent_at, last_sent_at, updated_at
FROM oncepush_device_attempt
WHERE delivery_id = ANY (@delivery_ids::bigint[])
ORDER BY delivery_id, device_id;
