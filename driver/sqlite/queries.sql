-- Named queries of the SQLite driver.
--
-- Times are INTEGER microseconds since the Unix epoch (UTC). SQLite has no clock
-- worth trusting more than the host's, so the driver always passes @now: the
-- injected clock's time, or the host's when there is none. Durations arrive as
-- microseconds too (@…_us).
--
-- SQLite has no arrays: lists arrive as JSON text and are read with json_each,
-- one statement per table per batch as in PostgreSQL. A list of records is a
-- JSON array of objects read with ->> '$.field'.
--
-- An INSERT … SELECT followed by ON CONFLICT carries a WHERE clause (WHERE true
-- at least): without one SQLite's parser cannot tell the upsert's ON from a
-- join constraint.

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

-- name: DeliveryUpdateMany :many
-- Guarded by the lease: a run whose lease was taken changes nothing. A
-- delivery canceled under the lease (MessageCancel) keeps what the cancel
-- wrote; only its lease is released.
-- @updates: [{"id", "status", "attempts", "next_at" (µs or null), "delay_us",
-- "last_error" (text or null)}, …]
UPDATE oncepush_delivery
SET status          = CASE WHEN oncepush_delivery.status = 'canceled' THEN oncepush_delivery.status ELSE u.status END,
    attempts        = u.attempts,
    next_attempt_at = CASE WHEN oncepush_delivery.status = 'pending' AND u.status = 'pending'
                           THEN coalesce(u.next_at, @now + u.delay_us)
                           ELSE oncepush_delivery.next_attempt_at END,
    lease_id        = NULL,
    last_error      = CASE WHEN oncepush_delivery.status = 'canceled' THEN oncepush_delivery.last_error
                           ELSE coalesce(u.last_error, oncepush_delivery.last_error) END,
    finished_at     = CASE WHEN oncepush_delivery.status = 'canceled' THEN oncepush_delivery.finished_at
                           WHEN u.status = 'pending' THEN NULL
                           ELSE @now END
FROM (SELECT value ->> '$.id'         AS id,
             value ->> '$.status'     AS status,
             value ->> '$.attempts'   AS attempts,
             value ->> '$.next_at'    AS next_at,
             value ->> '$.delay_us'   AS delay_us,
             value ->> '$.last_error' AS last_error
      FROM json_each(@updates)) AS u
WHERE oncepush_delivery.id = u.id
  AND oncepush_delivery.lease_id = @lease_id
RETURNING id, status;

-- name: DeviceAttemptUpsertMany :exec
-- @rows: [{"delivery_id", "device_id", "transport", "token_key", "state",
-- "submissions", "ambiguous", "provider_id", "error"}, …]. A pair is
-- (delivery, transport, token key): a re-registered token is the same pair.
INSERT INTO oncepush_device_attempt AS a (delivery_id, device_id, transport, token_key, state, submissions,
                                          ambiguous, provider_id, error, first_sent_at,
                                          last_sent_at, updated_at)
SELECT u.value ->> '$.delivery_id', u.value ->> '$.device_id', u.value ->> '$.transport',
       u.value ->> '$.token_key', u.value ->> '$.state', u.value ->> '$.submissions',
       u.value ->> '$.ambiguous', u.value ->> '$.provider_id', u.value ->> '$.error',
       CASE WHEN u.value ->> '$.state' = 'sending' THEN @now END,
       CASE WHEN u.value ->> '$.state' = 'sending' THEN @now END,
       @now
FROM json_each(@rows) AS u
WHERE true
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
-- still leased to @lease_id with at least @min_left_us of lease left; the
-- write lock keeps a recovering claim out between the check and the mark.
-- @pairs: [{"delivery_id", "device_id", "transport", "token_key"}, …].
INSERT INTO oncepush_device_attempt AS a (delivery_id, device_id, transport, token_key, state, submissions,
                                          ambiguous, provider_id, error, first_sent_at,
                                          last_sent_at, updated_at)
SELECT u.value ->> '$.delivery_id', u.value ->> '$.device_id', u.value ->> '$.transport',
       u.value ->> '$.token_key', 'sending', 1, 0, '', '', @now, @now, @now
FROM json_each(@pairs) AS u
     JOIN oncepush_delivery d ON d.id = u.value ->> '$.delivery_id'
WHERE d.lease_id = @lease_id
  AND d.status = 'pending'
  AND d.next_attempt_at >= @now + @min_left_us
ON CONFLICT (delivery_id, transport, token_key) DO UPDATE
SET state         = 'sending',
    device_id     = excluded.device_id,
    submissions   = a.submissions + 1,
    first_sent_at = coalesce(a.first_sent_at, excluded.first_sent_at),
    last_sent_at  = excluded.last_sent_at,
    updated_at    = excluded.updated_at
RETURNING delivery_id;

-- name: DeviceAttemptMarkOwn :many
-- DeviceAttemptMarkSending's first step: which of @ids are still leased to
-- @lease_id with at least @min_left_us of lease left (as the mark checks).
SELECT d.id
FROM json_each(@ids) AS u
     JOIN oncepush_delivery d ON d.id = u.value
WHERE d.lease_id = @lease_id
  AND d.status = 'pending'
  AND d.next_attempt_at >= @now + @min_left_us;

-- name: CampaignTokenTake :many
-- DeviceAttemptMarkSending's campaign pairs take their tokens (D107): one
-- no one holds, their own, or a free one; the answer is each token's
-- holder after the statement. @tokens: [{"message_id", "transport",
-- "token_key", "delivery_id"}, …], distinct.
INSERT INTO oncepush_campaign_token AS t (message_id, transport, token_key, delivery_id)
SELECT u.value ->> '$.message_id', u.value ->> '$.transport', u.value ->> '$.token_key', u.value ->> '$.delivery_id'
FROM json_each(@tokens) AS u
WHERE true
ON CONFLICT (message_id, transport, token_key) DO UPDATE
SET delivery_id = CASE WHEN t.free THEN excluded.delivery_id ELSE t.delivery_id END,
    free        = 0
RETURNING message_id, transport, token_key, delivery_id;

-- name: DeviceAttemptStateMany :many
-- The ledger state of the given pairs, for those that have a row.
-- @pairs: [{"delivery_id", "transport", "token_key"}, …].
SELECT a.delivery_id, a.transport, a.token_key, a.state
FROM json_each(@pairs) AS u
     JOIN oncepush_device_attempt a
          ON a.delivery_id = u.value ->> '$.delivery_id' AND a.transport = u.value ->> '$.transport'
             AND a.token_key = u.value ->> '$.token_key';

-- name: DeviceAttemptDuplicateMany :exec
-- Campaign pairs whose token another delivery of the campaign reached:
-- settled "duplicate", never submitted. @pairs: [{"delivery_id",
-- "device_id", "transport", "token_key", "holder"}, …].
INSERT INTO oncepush_device_attempt AS a (delivery_id, device_id, transport, token_key, state, submissions,
                                          ambiguous, provider_id, error, updated_at)
SELECT u.value ->> '$.delivery_id', u.value ->> '$.device_id', u.value ->> '$.transport', u.value ->> '$.token_key',
       'duplicate', 0, 0, '',
       (u.value ->> '$.transport') || ' not sent: this campaign reached the token through delivery ' || (u.value ->> '$.holder'),
       @now
FROM json_each(@pairs) AS u
WHERE true
ON CONFLICT (delivery_id, transport, token_key) DO UPDATE
SET state      = 'duplicate',
    device_id  = excluded.device_id,
    error      = excluded.error,
    updated_at = excluded.updated_at;

-- name: CampaignTokenFree :exec
-- The holders' submissions provably did not reach the devices (D107): the
-- tokens may be taken over. Only rows the given delivery holds.
-- @keys: [{"message_id", "transport", "token_key", "delivery_id"}, …].
UPDATE oncepush_campaign_token
SET free = 1
WHERE (message_id, transport, token_key, delivery_id) IN (
    SELECT value ->> '$.message_id', value ->> '$.transport', value ->> '$.token_key', value ->> '$.delivery_id'
    FROM json_each(@keys));

-- name: DeviceDeleteMany :execrows
-- Matches (id, recipient, token): a token that moved to a new owner has a new id.
-- @keys: [{"id", "recipient", "token"}, …].
DELETE FROM oncepush_device
WHERE (id, recipient, token) IN (SELECT value ->> '$.id', value ->> '$.recipient', value ->> '$.token'
                                 FROM json_each(@keys));

-- name: DeliveryLeaseGetMany :many
SELECT id, coalesce(lease_id, 0) FROM oncepush_delivery WHERE id IN (SELECT value FROM json_each(@ids));

-- name: SessionIsRevoked :one
SELECT EXISTS (SELECT 1 FROM oncepush_revoked_session WHERE session = @session);

-- name: DeviceDeleteOtherOwner :exec
DELETE FROM oncepush_device
WHERE transport = @transport AND token_key = @token_key AND recipient <> @recipient;

-- name: DeviceUpsert :one
-- Updates only the same owner's row. DeviceRegister first deletes another
-- owner's registration in the same write transaction, so a conflict here is
-- with the same owner, unless it keeps the other owner's: then no row.
INSERT INTO oncepush_device AS d (recipient, transport, token, token_key, platform, session, locale,
                                  time_zone, tags, created_at, registered_at)
VALUES (@recipient, @transport, @token, @token_key, @platform, @session, @locale, @time_zone, @tags, @now, @now)
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
  AND (@recipient = '' OR recipient = @recipient);

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
VALUES (@session, @now)
ON CONFLICT (session) DO NOTHING;

-- name: DeviceDeleteBySession :execrows
-- session <> '' lets the planner use the partial index oncepush_device_session
-- (it cannot know that @session is never empty).
DELETE FROM oncepush_device WHERE session = @session AND session <> '';

-- name: DeviceDeleteByRecipient :execrows
DELETE FROM oncepush_device WHERE recipient = @recipient;

-- name: CampaignRecipientDeleteByRecipient :exec
DELETE FROM oncepush_campaign_recipient WHERE recipient = @recipient;

-- name: DeliveryDeleteByRecipient :many
-- Ledger rows go with their deliveries (ON DELETE CASCADE, foreign_keys=ON).
-- Returns the message and the dedup key (NULL when none) of each row deleted.
DELETE FROM oncepush_delivery WHERE recipient = @recipient
RETURNING message_id, dedup_key;

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

-- name: LockAcquire :one
INSERT INTO oncepush_lock AS l (name, owner, locked_until)
VALUES (@name, @owner, @now + @ttl_us)
ON CONFLICT (name) DO UPDATE
SET owner = excluded.owner, locked_until = excluded.locked_until
WHERE l.locked_until < @now OR l.owner = excluded.owner
RETURNING owner;

-- name: LockRelease :exec
DELETE FROM oncepush_lock WHERE name = @name AND owner = @owner;

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

-- name: DataVersion :one
-- Changes whenever another connection commits to the file (Listen polls it).
PRAGMA data_version;

-- name: QuickCheck :many
PRAGMA quick_check;

-- name: JournalMode :one
PRAGMA journal_mode;

-- name: ForeignKeys :one
PRAGMA foreign_keys;

-- name: MainFile :one
SELECT file FROM pragma_database_list WHERE name = 'main';

-- name: Backup :exec
-- A consistent, compacted copy in a new file, read from one snapshot.
VACUUM INTO @dst;

-- name: MigrationTableCreate :exec
CREATE TABLE IF NOT EXISTS oncepush_migration (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
) STRICT;

-- name: MigrationList :many
SELECT version FROM oncepush_migration ORDER BY version;

-- name: MigrationInsert :exec
INSERT INTO oncepush_migration (version, name, applied_at) VALUES (@version, @name, @now);

-- name: MigrationTableExists :one
SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'oncepush_migration');

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

-- name: IdempotencyInsert :execrows
-- Part of MessageInsert: no row inserted means the key is recorded already,
-- and the driver rolls the send back.
INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
VALUES (@key, @request_hash, @message_id, @queued, @duplicates, @now)
ON CONFLICT (key) DO NOTHING;

-- name: IdempotencyGet :one
SELECT key, request_hash, message_id, queued, duplicates, created_at FROM oncepush_idempotency WHERE key = @key;

-- name: IdempotencyDeleteFreed :execrows
-- A record lives as long as the dedup key it guards: until no delivery holds
-- the key (read through oncepush_delivery_dedup, which leads with the key).
-- @keys: a JSON array. The write lock makes the check and the delete one
-- step: no other transaction deletes deliveries in between.
DELETE FROM oncepush_idempotency
WHERE key IN (SELECT value FROM json_each(@keys))
  AND NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.dedup_key = oncepush_idempotency.key);

-- name: CampaignInsert :one
-- Content and filter are stored as the engine gives them (checked JSON).
-- Returns the row as written, as CampaignGet reads it.
INSERT INTO oncepush_campaign (name, status, content, audience, filter, start_at, rate_per_minute,
                               created_at, updated_at)
VALUES (@name, @status, @content, @audience, @filter, @start_at, @rate_per_minute, @now, @now)
RETURNING id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
          cursor, written, recipients, invalid_tokens, duplicate_tokens, tries, last_error,
          created_at, updated_at, started_at, finished_at;

-- name: CampaignGet :one
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, tries, last_error,
       created_at, updated_at, started_at, finished_at
FROM oncepush_campaign
WHERE id = @id;

-- name: CampaignLock :one
-- CampaignGet inside a write transaction (BEGIN IMMEDIATE), which holds the
-- database's one write lock until it ends: no row lock is needed or exists.
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, tries, last_error,
       created_at, updated_at, started_at, finished_at
FROM oncepush_campaign
WHERE id = @id;

-- name: CampaignSave :exec
UPDATE oncepush_campaign
SET name = @name, status = @status, content = @content, audience = @audience, filter = @filter,
    start_at = @start_at, rate_per_minute = @rate_per_minute, message_id = nullif(@message_id, 0),
    cursor = @cursor, written = @written, recipients = @recipients, invalid_tokens = @invalid_tokens,
    duplicate_tokens = @duplicate_tokens, tries = @tries, last_error = @last_error,
    updated_at = @now, started_at = @started_at, finished_at = @finished_at
WHERE id = @id;

-- name: CampaignList :many
-- Newest first, below the cursor: a seek into the primary key, or into
-- oncepush_campaign_status when a status is given.
SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, coalesce(message_id, 0),
       cursor, written, recipients, invalid_tokens, duplicate_tokens, tries, last_error,
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

-- name: DeviceAttemptCountByState :many
SELECT a.state, count(*)
FROM oncepush_delivery d
JOIN oncepush_device_attempt a ON a.delivery_id = d.id
WHERE d.message_id = @message_id
GROUP BY a.state;

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
