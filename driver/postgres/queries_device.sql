-- The postgres driver's statements of driver.DeviceExecutor (driver/device.go); conventions in queries.sql.

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
