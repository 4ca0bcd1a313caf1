-- oncepush ledger, version 4: a recorded request lives as long as its dedup
-- key, as in driver/postgres's 004_record_lives_with_key.sql.

-- The dedup index leads with the key: "does any delivery still hold this
-- key?" is one index probe. Same uniqueness; the upsert's conflict target
-- (recipient, dedup_key) matches it whatever the column order.
DROP INDEX oncepush_delivery_dedup;
CREATE UNIQUE INDEX oncepush_delivery_dedup ON oncepush_delivery (dedup_key, recipient) WHERE dedup_key IS NOT NULL;

-- Records are no longer deleted by age.
DROP INDEX oncepush_idempotency_created;

-- Records whose key no delivery holds any more would now never be deleted.
DELETE FROM oncepush_idempotency
WHERE NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.dedup_key = oncepush_idempotency.key);
