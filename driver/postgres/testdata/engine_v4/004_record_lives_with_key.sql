-- oncepush ledger, version 4: a recorded request lives as long as its dedup key.
--
-- A record in oncepush_idempotency guards its key while any delivery holds
-- that key (pending, or finished within retention), and is deleted with the
-- last such delivery, no longer by its age.

-- The dedup index now leads with the key, so "does any delivery still hold
-- this key?" is one index probe. It enforces the same uniqueness, and
-- ON CONFLICT (recipient, dedup_key) infers it whatever the column order.
-- Dropped and created in one transaction: no writer ever sees the table
-- without it.
DROP INDEX oncepush_delivery_dedup;
CREATE UNIQUE INDEX oncepush_delivery_dedup ON oncepush_delivery (dedup_key, recipient) WHERE dedup_key IS NOT NULL;

-- Records are no longer deleted by age.
DROP INDEX oncepush_idempotency_created;

-- Records whose key no delivery holds any more (their deliveries went before
-- this version, by recipient deletion, say) would now never be deleted.
DELETE FROM oncepush_idempotency i
WHERE NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.dedup_key = i.key);
