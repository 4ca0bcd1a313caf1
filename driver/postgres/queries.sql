-- Named queries of the PostgreSQL driver. Every "now" is coalesce(@now, now()):
-- NULL means the database's clock, a value means an injected (test) clock.
-- Durations arrive as microseconds (bigint).

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

-- name: DeliveryUpdateMany :many
-- Guarded by the lease: a run whose lease was taken changes nothing. A
-- delivery canceled under the lease (MessageCancel) keeps what the cancel
-- wrote; only its lease is released. The rows are locked by id, ascending,
-- before the update (own): an UPDATE ... FROM locks them in whatever order
-- its join yields (the batch's claim order), and a cancel locking the same
-- rows in another order deadlocked with it (D101).
WITH n AS (SELECT coalesce(@now::timestamptz, now()) AS now),
own AS MATERIALIZED (
    SELECT d.id
    FROM oncepush_delivery d
    WHERE d.id = ANY (@ids::bigint[])
      AND d.lease_id = @lease_id
    ORDER BY d.id
    FOR NO KEY UPDATE OF d
)
UPDATE oncepush_delivery d
SET status          = CASE WHEN d.status = 'canceled' THEN d.status ELSE u.status END,
    attempts        = u.attempts,
    next_attempt_at = CASE WHEN d.status = 'pending' AND u.status = 'pending'
                           THEN coalesce(u.next_at, n.now + u.delay_us * interval '1 microsecond')
                           ELSE d.next_attempt_at END,
    lease_id        = NULL,
    last_error      = CASE WHEN d.status = 'canceled' THEN d.last_error ELSE coalesce(u.last_error, d.last_error) END,
    finished_at     = CASE WHEN d.status = 'canceled' THEN d.finished_at
                           WHEN u.status = 'pending' THEN NULL
                           ELSE n.now END
FROM unnest(@ids::bigint[], @statuses::text[], @attempts::integer[], @next_ats::timestamptz[],
            @delays_us::bigint[], @last_errors::text[])
         AS u (id, status, attempts, next_at, delay_us, last_error),
     n,
     own
WHERE d.id = u.id
  AND own.id = u.id
  AND d.lease_id = @lease_id
RETURNING d.id, d.status;

-- name: DeviceAttemptUpsertMany :exec
-- A pair is (delivery, transport, token key): a re-registered token is the same pair.
WITH n AS (SELECT coalesce(@now::timestamptz, now()) AS now)
INSERT INTO oncepush_device_attempt AS a (delivery_id, device_id, transport, token_key, state, submissions,
                                          ambiguous, provider_id, error, first_sent_at,
                                          last_sent_at, updated_at)
SELECT u.delivery_id, u.device_id, u.transport, u.token_key, u.state, u.submissions, u.ambiguous,
       u.provider_id, u.error,
       CASE WHEN u.state = 'sending' THEN n.now END,
       CASE WHEN u.state = 'sending' THEN n.now END,
       n.now
FROM unnest(@delivery_ids::bigint[], @device_ids::bigint[], @transports::text[], @token_keys::text[],
            @states::text[], @submissions::integer[], @ambiguous::integer[], @provider_ids::text[],
            @errors::text[])
         AS u (delivery_id, device_id, transport, token_key, state, submissions, ambiguous, provider_id, error),
     n
ON CONFLICT (delivery_id, transport, token_key) DO UPDATE
SET state         = excluded.state,
    submissions   = a.submissions + excluded.submissions,
    ambiguous     = a.ambiguous + excluded.ambiguous,
    provider_id   = CASE WHEN excluded.provider_id <> '' THEN excluded.provider_id ELSE a.provider_id END,
    error         = CASE WHEN excluded.state = 'sending' THEN a.error ELSE excluded.error END,
    first_sent_at = CASE WHEN a.submissions + excluded.submissions <= 0 THEN NULL
                         ELSE coalesce(a.first_sent_at, excluded.first_sent_at) END,
    last_sent_at  = CASE WHEN a.submissions + excluded.submissions <= 0 THEN NULL
                         ELSE coalesce(excluded.last_sent_at, a.last_sent_at) END,
    updated_at    = excluded.updated_at;

-- name: DeviceAttemptMarkSending :many
-- Marks pairs sending just before their provider calls, only for deliveries
-- still leased to @lease_id with at least @min_left_us of lease left. The
-- deliveries are locked while checked, so a run recovering an expired lease
-- cannot claim one between the check and the mark. The rows are found by
-- their ids on the primary key, never through the due index, whose leased
-- part holds an entry for every claim since the last vacuum (a mark took 52
-- ms on a drain): "pending" is asked as finished_at IS NULL (the same, by
-- the table's check) and the lease left as a difference, which the partial
-- index's predicate and columns do not match. Locked by id, ascending,
-- as every statement locking several deliveries does (D101).
-- A campaign delivery's pair (@campaign_messages > 0) first takes its token
-- in the campaign (D107), in key order, so that two marks lock the rows in
-- one order: a token no one holds, its own, or one whose holder's last
-- submission provably failed (free). A token held by another delivery is
-- not marked: "duplicate" (written) when the holder's attempt is settled or
-- ambiguous, "held" (nothing written) while it may still be in flight or
-- its mark is not in this statement's snapshot. Every pair of a leased
-- delivery is answered with its verdict.
WITH n AS MATERIALIZED (SELECT coalesce(@now::timestamptz, now()) AS now),
own AS MATERIALIZED (
    SELECT d.id
    FROM oncepush_delivery d, n
    WHERE d.id = ANY (@delivery_ids::bigint[])
      AND d.lease_id = @lease_id
      AND d.finished_at IS NULL
      AND d.next_attempt_at - n.now >= @min_left_us::bigint * interval '1 microsecond'
    ORDER BY d.id
    FOR UPDATE OF d
),
u AS MATERIALIZED (
    SELECT u.*
    FROM unnest(@delivery_ids::bigint[], @device_ids::bigint[], @transports::text[], @token_keys::text[],
                @campaign_messages::bigint[]) AS u (delivery_id, device_id, transport, token_key, campaign_message)
         JOIN own ON own.id = u.delivery_id
),
taken AS (
    INSERT INTO oncepush_campaign_token AS t (message_id, transport, token_key, delivery_id)
    SELECT DISTINCT ON (campaign_message, transport, token_key) campaign_message, transport, token_key, delivery_id
    FROM u
    WHERE campaign_message > 0
    ORDER BY campaign_message, transport, token_key, delivery_id
    ON CONFLICT (message_id, transport, token_key) DO UPDATE
    SET delivery_id = CASE WHEN t.free THEN excluded.delivery_id ELSE t.delivery_id END,
        free        = false
    RETURNING t.message_id, t.transport, t.token_key, t.delivery_id
),
verdict AS MATERIALIZED (
    SELECT u.*, t.delivery_id AS holder,
           CASE
               WHEN u.campaign_message = 0 OR t.delivery_id = u.delivery_id THEN 'sending'
               WHEN h.state IN ('accepted', 'invalid', 'rejected', 'ambiguous') THEN 'duplicate'
               ELSE 'held'
           END AS state
    FROM u
         LEFT JOIN taken t
                   ON t.message_id = u.campaign_message AND t.transport = u.transport AND t.token_key = u.token_key
         LEFT JOIN oncepush_device_attempt h
                   ON h.delivery_id = t.delivery_id AND h.transport = u.transport AND h.token_key = u.token_key
),
marked AS (
    INSERT INTO oncepush_device_attempt AS a (delivery_id, device_id, transport, token_key, state, submissions,
                                              ambiguous, provider_id, error, first_sent_at,
                                              last_sent_at, updated_at)
    SELECT v.delivery_id, v.device_id, v.transport, v.token_key, 'sending', 1, 0, '', '', n.now, n.now, n.now
    FROM verdict v, n
    WHERE v.state = 'sending'
    ON CONFLICT (delivery_id, transport, token_key) DO UPDATE
    SET state         = 'sending',
        device_id     = excluded.device_id,
        submissions   = a.submissions + 1,
        first_sent_at = coalesce(a.first_sent_at, excluded.first_sent_at),
        last_sent_at  = excluded.last_sent_at,
        updated_at    = excluded.updated_at
    RETURNING a.delivery_id, a.transport, a.token_key
),
duplicate AS (
    INSERT INTO oncepush_device_attempt AS a (delivery_id, device_id, transport, token_key, state, submissions,
                                              ambiguous, provider_id, error, updated_at)
    SELECT v.delivery_id, v.device_id, v.transport, v.token_key, 'duplicate', 0, 0, '',
           v.transport || ' not sent: this campaign reached the token through delivery ' || v.holder, n.now
    FROM verdict v, n
    WHERE v.state = 'duplicate'
    ON CONFLICT (delivery_id, transport, token_key) DO UPDATE
    SET state      = 'duplicate',
        device_id  = excluded.device_id,
        error      = excluded.error,
        updated_at = excluded.updated_at
    RETURNING a.delivery_id, a.transport, a.token_key
)
SELECT delivery_id, transport, token_key, 'sending' FROM marked
UNION ALL
SELECT delivery_id, transport, token_key, 'duplicate' FROM duplicate
UNION ALL
SELECT delivery_id, transport, token_key, 'held' FROM verdict WHERE state = 'held';

-- name: CampaignTokenFree :exec
-- The holders' submissions provably did not reach the devices (D107): the
-- tokens may be taken over. Only rows the given delivery holds, locked in
-- key order, as the mark takes them.
WITH locked AS (
    SELECT t.message_id, t.transport, t.token_key
    FROM oncepush_campaign_token t
         JOIN unnest(@message_ids::bigint[], @transports::text[], @token_keys::text[], @delivery_ids::bigint[])
              AS k (message_id, transport, token_key, delivery_id)
              ON t.message_id = k.message_id AND t.transport = k.transport AND t.token_key = k.token_key
                 AND t.delivery_id = k.delivery_id
    ORDER BY t.message_id, t.transport, t.token_key
    FOR UPDATE OF t
)
UPDATE oncepush_campaign_token t
SET free = true
FROM locked l
WHERE t.message_id = l.message_id AND t.transport = l.transport AND t.token_key = l.token_key;

-- name: DeviceDeleteMany :execrows
-- Matches (id, recipient, token): a token that moved to a new owner has a new id.
DELETE FROM oncepush_device d
USING unnest(@ids::bigint[], @recipients::text[], @tokens::text[]) AS u (id, recipient, token)
WHERE d.id = u.id AND d.recipient = u.recipient AND d.token = u.token;

-- name: DeliveryLeaseGetMany :many
SELECT id, coalesce(lease_id, 0) FROM oncepush_delivery WHERE id = ANY (@ids::bigint[]);

-- name: SessionLockShared :exec
-- A registration under a session and that session's revocation exclude each
-- other until commit; the key is per schema.
SELECT pg_advisory_xact_lock_shared(hashtextextended(current_schema() || '.oncepush_session.' || @session, 0));

-- name: SessionLock :exec
SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '.oncepush_session.' || @session, 0));

-- name: SessionIsRevoked :one
SELECT EXISTS (SELECT 1 FROM oncepush_revoked_session WHERE session = @session);

-- name: DeviceDeleteOtherOwner :exec
DELETE FROM oncepush_device
WHERE transport = @transport AND token_key = @token_key AND recipient <> @recipient;

-- name: DeviceUpsert :one
-- Updates only the same owner's row; a conflict with another owner returns no
-- row and the caller deletes that registration and tries again (a new identity).
WITH n AS (SELECT coalesce(@now::timestamptz, now()) AS now)
INSERT INTO oncepush_device AS d (recipient, transport, token, token_key, platform, session, locale,
                                  time_zone, tags, created_at, registered_at)
SELECT @recipient, @transport, @token, @token_key, @platform, @session, @locale, @time_zone, @tags::jsonb, n.now, n.now
FROM n
ON CONFLICT (transport, token_key) DO UPDATE
SET token         = excluded.token,
    platform      = excluded.platform,
    session       = excluded.session,
    locale        = excluded.locale,
    time_zone     = excluded.time_zone,
    tags          = excluded.tags,
    registered_at = excluded.registered_at
WHERE d.recipient = excluded.recipient
RETURNING id, recipient, transport, token, token_key, platform, session, locale, time_zone, tags,
          created_at, registered_at;

-- name: DeviceTrim :exec
-- A recipient keeps its @max most recently registered devices.
DELETE FROM oncepush_device
WHERE recipient = @recipient
  AND id NOT IN (SELECT id FROM oncepush_device
                 WHERE recipient = @recipient
                 ORDER BY registered_at DESC, id DESC
                 LIMIT @max);

-- name: DeviceUnregister :execrows
DELETE FROM oncepush_device
WHERE transport = @transport AND token_key = @token_key
  AND (@recipient::text = '' OR recipient = @recipient);

-- name: DeviceListByRecipient :many
SELECT id, recipient, transport, token, token_key, platform, session, locale, time_zone, tags,
       created_at, registered_at
FROM oncepush_device
WHERE recipient = @recipient
ORDER BY registered_at DESC, id DESC;

-- name: DeviceGetByToken :one
SELECT id, recipient, transport, token, token_key, platform, session, locale, time_zone, tags,
       created_at, registered_at
FROM oncepush_device
WHERE transport = @transport AND token_key = @token_key;

-- name: SessionRevoke :exec
INSERT INTO oncepush_revoked_session (session, revoked_at)
VALUES (@session, coalesce(@now::timestamptz, now()))
ON CONFLICT (session) DO NOTHING;

-- name: DeviceDeleteBySession :execrows
-- Repeats the partial index's predicate so a generic plan can use it.
DELETE FROM oncepush_device WHERE session = @session AND session <> '';

-- name: DeviceDeleteByRecipient :execrows
DELETE FROM oncepush_device WHERE recipient = @recipient;

-- name: CampaignRecipientDeleteByRecipient :exec
DELETE FROM oncepush_campaign_recipient WHERE recipient = @recipient;

-- name: DeliveryDeleteByRecipient :one
-- As DeliveryDeleteFinished: the count, and the messages and dedup keys the
-- rows held.
WITH gone AS (
    DELETE FROM oncepush_delivery WHERE recipient = @recipient
    RETURNING message_id, dedup_key
)
SELECT count(*)::integer,
       coalesce(array_agg(DISTINCT message_id), '{}'),
       coalesce(array_agg(DISTINCT dedup_key) FILTER (WHERE dedup_key IS NOT NULL), '{}')
FROM gone;

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

-- name: LockAcquire :one
WITH n AS (SELECT coalesce(@now::timestamptz, now()) AS now)
INSERT INTO oncepush_lock AS l (name, owner, locked_until)
SELECT @name, @owner, n.now + @ttl_us::bigint * interval '1 microsecond' FROM n
ON CONFLICT (name) DO UPDATE
SET owner = excluded.owner, locked_until = excluded.locked_until
WHERE l.locked_until < (SELECT now FROM n) OR l.owner = excluded.owner
RETURNING owner;

-- name: LockRelease :exec
DELETE FROM oncepush_lock WHERE name = @name AND owner = @owner;

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

-- name: MigrationLock :exec
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.oncepush_migration'));

-- name: MigrationTableCreate :exec
CREATE TABLE IF NOT EXISTS oncepush_migration (
    version    integer PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: MigrationList :many
SELECT version FROM oncepush_migration ORDER BY version;

-- name: MigrationInsert :exec
INSERT INTO oncepush_migration (version, name) VALUES (@version, @name);

-- name: MigrationTableExists :one
SELECT to_regclass('oncepush_migration') IS NOT NULL;

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

-- name: IdempotencyGet :one
SELECT key, request_hash, message_id, queued, duplicates, created_at FROM oncepush_idempotency WHERE key = @key;

-- name: IdempotencyLockMany :exec
-- Before IdempotencyDeleteFreed, in the same transaction: two transactions
-- each deleting some deliveries of one key would otherwise both still see the
-- other's and both keep the record. Locked in key order, so never a deadlock.
SELECT key FROM oncepush_idempotency WHERE key = ANY (@keys::text[]) ORDER BY key FOR UPDATE;

-- name: IdempotencyDeleteFreed :execrows
-- A record lives as long as the dedup key it guards: until no delivery holds
-- the key (read through oncepush_delivery_dedup, which leads with the key).
DELETE FROM oncepush_idempotency i
WHERE i.key = ANY (@keys::text[])
  AND NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.dedup_key = i.key);

-- name: CampaignInsert :one
INSERT INTO oncepush_campaign (name, status, content, audience, filter, start_at, rate_per_minute,
                               created_at, updated_at)
VALUES (@name, @status, @content::jsonb, @audience, @filter::jsonb, @start_at, @rate_per_minute,
        coalesce(@now::timestamptz, now()), coalesce(@now::timestamptz, now()))
RETURNING id, created_at;

-- name: CampaignGet :one
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, tries, last_error,
       created_at, updated_at, started_at, finished_at
FROM oncepush_campaign
WHERE id = @id;

-- name: CampaignLock :one
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, tries, last_error,
       created_at, updated_at, started_at, finished_at
FROM oncepush_campaign
WHERE id = @id
FOR UPDATE;

-- name: CampaignSave :exec
UPDATE oncepush_campaign
SET name = @name, status = @status, content = @content::jsonb, audience = @audience, filter = @filter::jsonb,
    start_at = @start_at, rate_per_minute = @rate_per_minute, message_id = nullif(@message_id::bigint, 0),
    cursor = @cursor, written = @written, recipients = @recipients, invalid_tokens = @invalid_tokens,
    duplicate_tokens = @duplicate_tokens, tries = @tries, last_error = @last_error,
    updated_at = coalesce(@now::timestamptz, now()), started_at = @started_at, finished_at = @finished_at
WHERE id = @id;

-- name: CampaignList :many
-- Newest first, below the cursor: a seek into the primary key, or into
-- oncepush_campaign_status when a status is given.
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, tries, last_error,
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

-- name: DeviceAttemptCountByState :many
SELECT a.state, count(*)::integer
FROM oncepush_delivery d
JOIN oncepush_device_attempt a ON a.delivery_id = d.id
WHERE d.message_id = @message_id
GROUP BY a.state;

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
