-- The postgres driver's statements of driver.RequestExecutor (driver/request.go); conventions in queries.sql.

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
