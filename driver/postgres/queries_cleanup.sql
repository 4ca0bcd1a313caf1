-- The postgres driver's statements of driver.CleanupExecutor (driver/cleanup.go); conventions in queries.sql.

-- name: LockAcquire :one
WITH n AS (SELECT coalesce(@now::timestamptz, now()) AS now)
INSERT INTO oncepush_lock AS l (name, owner, locked_until)
SELECT @name, @owner, n.now + @ttl_us::bigint * interval '1 microsecond' FROM n
ON CONFLICT (name) DO UPDATE
SET owner = excluded.owner, locked_until = excluded.locked_until
WHERE l.locked_until < (SELECT now FROM n) OR l.owner = excluded.owner
RETURNING owner;

-- name: DeliveryDeleteFinished :one
-- Returns how many rows it deleted and the messages and dedup keys they
-- held, so that the same transaction can check just those for orphans and
-- freed keys. "= ANY (ARRAY(…))" rather than a join with the CTE: a generic
-- plan, which cannot know @max, would otherwise hash-join the whole table.
WITH old AS MATERIALIZED (
    SELECT id FROM oncepush_delivery
    WHERE status <> 'pending'
      AND finished_at < coalesce(@now::timestamptz, now()) - @age_us::bigint * interval '1 microsecond'
    ORDER BY finished_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM oncepush_delivery d WHERE d.id = ANY (ARRAY(SELECT id FROM old))
    RETURNING d.message_id, d.dedup_key
)
SELECT count(*)::integer,
       coalesce(array_agg(DISTINCT message_id), '{}'),
       coalesce(array_agg(DISTINCT dedup_key) FILTER (WHERE dedup_key IS NOT NULL), '{}')
FROM gone;

-- name: MessageLockMany :exec
-- Before MessageDeleteOrphans, for the reason IdempotencyLockMany gives.
SELECT id FROM oncepush_message WHERE id = ANY (@ids::bigint[]) ORDER BY id FOR UPDATE;

-- name: MessageDeleteOrphans :execrows
-- Of these messages (those whose deliveries were just deleted), the ones
-- left without any: one primary-key and one oncepush_delivery_message probe
-- each, however many messages are retained.
DELETE FROM oncepush_message m
WHERE m.id = ANY (@ids::bigint[])
  AND NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.message_id = m.id)
  AND NOT EXISTS (SELECT 1 FROM oncepush_campaign c WHERE c.message_id = m.id);

-- name: MessageSweepOrphans :one
-- The backstop: of the @max messages after @after_id in id order, delete
-- those without deliveries; returns how many, and the last id looked at (0
-- when there was none).
WITH batch AS MATERIALIZED (
    SELECT max(id) AS last
    FROM (SELECT id FROM oncepush_message WHERE id > @after_id ORDER BY id LIMIT @max) b
), gone AS (
    DELETE FROM oncepush_message m
    USING batch
    WHERE m.id > @after_id AND m.id <= batch.last
      AND NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.message_id = m.id)
      AND NOT EXISTS (SELECT 1 FROM oncepush_campaign c WHERE c.message_id = m.id)
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone)::integer, coalesce((SELECT last FROM batch), 0)::bigint;

-- name: DeliveryOverdue :one
-- Both lanes, each through its own due index.
WITH late AS (
    SELECT next_attempt_at FROM oncepush_delivery
    WHERE status = 'pending' AND NOT campaign
      AND next_attempt_at < coalesce(@now::timestamptz, now()) - @age_us::bigint * interval '1 microsecond'
    UNION ALL
    SELECT next_attempt_at FROM oncepush_delivery
    WHERE status = 'pending' AND campaign
      AND next_attempt_at < coalesce(@now::timestamptz, now()) - @age_us::bigint * interval '1 microsecond'
)
SELECT count(*), coalesce(min(next_attempt_at), 'epoch'::timestamptz) FROM late;

-- name: DeliveryDueStats :one
-- Per lane, each through its own due index: the count stops at @max rows
-- (2.2M due rows: 0.7-1.3 s uncapped, 4 ms at 10,000); the oldest is the
-- index's first entry.
WITH n AS (SELECT coalesce(@now::timestamptz, now()) AS now)
SELECT (SELECT count(*) FROM (SELECT 1 FROM oncepush_delivery d
            WHERE d.status = 'pending' AND NOT d.campaign AND d.next_attempt_at <= (SELECT now FROM n)
            LIMIT @max) due),
       coalesce(extract(epoch FROM (SELECT now FROM n) -
            (SELECT min(d.next_attempt_at) FROM oncepush_delivery d
             WHERE d.status = 'pending' AND NOT d.campaign AND d.next_attempt_at <= (SELECT now FROM n))), 0)::float8,
       (SELECT count(*) FROM (SELECT 1 FROM oncepush_delivery d
            WHERE d.status = 'pending' AND d.campaign AND d.next_attempt_at <= (SELECT now FROM n)
            LIMIT @max) due),
       coalesce(extract(epoch FROM (SELECT now FROM n) -
            (SELECT min(d.next_attempt_at) FROM oncepush_delivery d
             WHERE d.status = 'pending' AND d.campaign AND d.next_attempt_at <= (SELECT now FROM n))), 0)::float8;
