-- The sqlite driver's statements of driver.RequestExecutor (driver/request.go); conventions in queries.sql.

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
