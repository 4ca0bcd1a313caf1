-- The sqlite driver's statements of driver.RecordExecutor (driver/record.go); conventions in queries.sql.

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
