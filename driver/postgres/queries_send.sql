-- The postgres driver's statements of driver.SendExecutor (driver/send.go); conventions in queries.sql.

-- name: MessageInsert :one
-- The message and all its deliveries in one statement (one round trip); the
-- ON CONFLICT target repeats the partial unique index's predicate.
WITH n AS (SELECT coalesce(@now::timestamptz, now()) AS now),
m AS (
    INSERT INTO oncepush_message (type, title, body, data, link, image, category, ambiguity,
                                  scheduled_at, expires_at, created_at, audience)
    SELECT @type, @title, @body, @data::jsonb, @link, @image, @category, @ambiguity,
           coalesce(@scheduled_at::timestamptz, n.now),
           coalesce(@scheduled_at::timestamptz, n.now) + @lifetime_us::bigint * interval '1 microsecond',
           n.now, @audience::jsonb
    FROM n
    RETURNING id, scheduled_at, created_at
),
d AS (
    INSERT INTO oncepush_delivery (message_id, recipient, notification_id, dedup_key, next_attempt_at, created_at)
    SELECT m.id, u.recipient, u.notification_id, nullif(@dedup_key::text, ''), m.scheduled_at, m.created_at
    FROM m, unnest(@recipients::text[], @notification_ids::text[]) AS u (recipient, notification_id)
    ON CONFLICT (recipient, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING 1
),
c AS (SELECT count(*)::integer AS queued FROM d),
-- A recorded request: a plain INSERT, so that a key recorded before (or by a
-- concurrent statement, which it waits for) fails the whole statement with a
-- unique violation and nothing of this send is written.
r AS (
    INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
    SELECT @dedup_key, @request_hash::bytea, CASE WHEN c.queued > 0 THEN m.id ELSE 0 END, c.queued,
           @duplicates::integer + cardinality(@recipients::text[]) - c.queued, m.created_at
    FROM m, c
    WHERE @request_hash::bytea IS NOT NULL
    RETURNING 1
)
SELECT m.id, c.queued FROM m, c;

-- name: MessageDelete :exec
DELETE FROM oncepush_message WHERE id = @id;

-- name: Wake :exec
SELECT pg_notify('oncepush_wake', current_schema());
