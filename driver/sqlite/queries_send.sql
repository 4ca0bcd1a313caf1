-- The sqlite driver's statements of driver.SendExecutor (driver/send.go); conventions in queries.sql.

-- name: MessageInsert :one
INSERT INTO oncepush_message (type, title, body, data, link, image, category, ambiguity,
                              scheduled_at, expires_at, created_at, audience)
VALUES (@type, @title, @body, json(@data), @link, @image, @category, @ambiguity,
        coalesce(@scheduled_at, @now),
        coalesce(@scheduled_at, @now) + @lifetime_us,
        @now, json(@audience))
RETURNING id;

-- name: MessageDelete :exec
DELETE FROM oncepush_message WHERE id = @id;

-- name: DeliveryInsertMany :execrows
-- Part of MessageInsert. @deliveries: [[recipient, notification id], …];
-- tuples rather than lists, since joining json_each by key would compare
-- every element with every other.
INSERT INTO oncepush_delivery (message_id, recipient, notification_id, dedup_key, next_attempt_at, created_at)
SELECT @message_id, u.value ->> 0, u.value ->> 1, nullif(@dedup_key, ''), coalesce(@scheduled_at, @now), @now
FROM json_each(@deliveries) AS u
WHERE true
ORDER BY u.key
ON CONFLICT (recipient, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING;

-- name: IdempotencyInsert :execrows
-- Part of MessageInsert: no row inserted means the key is recorded already,
-- and the driver rolls the send back.
INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
VALUES (@key, @request_hash, @message_id, @queued, @duplicates, @now)
ON CONFLICT (key) DO NOTHING;
