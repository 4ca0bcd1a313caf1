-- The postgres driver's statements of driver.RecordExecutor (driver/record.go); conventions in queries.sql.

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
