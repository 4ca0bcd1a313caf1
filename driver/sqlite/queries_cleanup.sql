-- The sqlite driver's statements of driver.CleanupExecutor (driver/cleanup.go); conventions in queries.sql.

-- name: LockAcquire :one
INSERT INTO oncepush_lock AS l (name, owner, locked_until)
VALUES (@name, @owner, @now + @ttl_us)
ON CONFLICT (name) DO UPDATE
SET owner = excluded.owner, locked_until = excluded.locked_until
WHERE l.locked_until < @now OR l.owner = excluded.owner
RETURNING owner;

-- name: DeliveryDeleteFinished :many
-- One statement, so no row can change between choosing and deleting (and no
-- SKIP LOCKED is needed: the statement holds the write lock throughout).
-- Returns the message and the dedup key (NULL when none) of each row deleted.
DELETE FROM oncepush_delivery
WHERE id IN (SELECT id FROM oncepush_delivery
             WHERE status <> 'pending'
               AND finished_at < @now - @age_us
             ORDER BY finished_at
             LIMIT @max)
RETURNING message_id, dedup_key;

-- name: MessageDeleteOrphans :execrows
-- Of these messages (@ids, a JSON array: those whose deliveries were just
-- deleted), the ones left without any and named by no campaign: one
-- primary-key, one oncepush_delivery_message and one
-- oncepush_campaign_message probe each, however many messages are retained.
DELETE FROM oncepush_message
WHERE id IN (SELECT value FROM json_each(@ids))
  AND NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.message_id = oncepush_message.id)
  AND NOT EXISTS (SELECT 1 FROM oncepush_campaign c WHERE c.message_id = oncepush_message.id);

-- name: MessageSweepLast :one
-- The backstop, first half: the last id of the @max messages after @after_id
-- (NULL when there are none).
SELECT max(id) FROM (SELECT id FROM oncepush_message WHERE id > @after_id ORDER BY id LIMIT @max);

-- name: MessageSweepOrphans :execrows
-- Second half, in the same write transaction: of those messages, delete the
-- ones without deliveries that no campaign names (a campaign's message has
-- none until its first batch).
DELETE FROM oncepush_message
WHERE id > @after_id AND id <= @last
  AND NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.message_id = oncepush_message.id)
  AND NOT EXISTS (SELECT 1 FROM oncepush_campaign c WHERE c.message_id = oncepush_message.id);

-- name: DeliveryOverdue :one
-- Both lanes, each through its own due index.
SELECT count(*), coalesce(min(next_attempt_at), 0) FROM (
    SELECT next_attempt_at FROM oncepush_delivery
    WHERE status = 'pending' AND campaign = 0 AND next_attempt_at < @now - @age_us
    UNION ALL
    SELECT next_attempt_at FROM oncepush_delivery
    WHERE status = 'pending' AND campaign = 1 AND next_attempt_at < @now - @age_us);

-- name: DeliveryDueStats :one
-- Per lane, each through its own due index: the count stops at @max rows;
-- the age of the oldest due delivery is in microseconds.
SELECT (SELECT count(*) FROM (SELECT 1 FROM oncepush_delivery
            WHERE status = 'pending' AND campaign = 0 AND next_attempt_at <= @now LIMIT @max)),
       @now - coalesce((SELECT min(next_attempt_at) FROM oncepush_delivery
            WHERE status = 'pending' AND campaign = 0 AND next_attempt_at <= @now), @now),
       (SELECT count(*) FROM (SELECT 1 FROM oncepush_delivery
            WHERE status = 'pending' AND campaign = 1 AND next_attempt_at <= @now LIMIT @max)),
       @now - coalesce((SELECT min(next_attempt_at) FROM oncepush_delivery
            WHERE status = 'pending' AND campaign = 1 AND next_attempt_at <= @now), @now);
