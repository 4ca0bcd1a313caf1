-- oncepush ledger, version 8: a campaign's deliveries leave the dedup keys'
-- space (D105).
--
-- A campaign wrote its deliveries under the dedup key "campaign:<id>", a
-- string any caller could send with: a send under it took the campaign's
-- target, and the campaign a later send's. A campaign has one message, so
-- "one delivery per recipient and campaign" is (message, recipient) among
-- campaign deliveries; this index says so, and the campaign's rows carry no
-- dedup key at all, so no caller's key can meet them.
CREATE UNIQUE INDEX oncepush_delivery_campaign_recipient ON oncepush_delivery (message_id, recipient) WHERE campaign = 1;
UPDATE oncepush_delivery SET dedup_key = NULL WHERE campaign = 1 AND dedup_key IS NOT NULL;

-- A recorded request lives as long as a delivery holds its key (D35). A
-- caller's send under "campaign:<id>" to a recipient the campaign had
-- already written was counted a duplicate of the campaign's delivery, and
-- its record was kept by that delivery's key alone: it goes with the key.
-- Kept, nothing would ever delete it, and it would answer that caller's
-- retry "duplicate" though the send would now be queued.
DELETE FROM oncepush_idempotency
WHERE key LIKE 'campaign:%'
  AND NOT EXISTS (SELECT 1 FROM oncepush_delivery d WHERE d.dedup_key = oncepush_idempotency.key);
