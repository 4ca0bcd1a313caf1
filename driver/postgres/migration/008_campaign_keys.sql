-- oncepush ledger, version 8: a campaign's deliveries leave the dedup keys'
-- space (D105).
--
-- A campaign wrote its deliveries under the dedup key "campaign:<id>", a
-- string any caller could send with: a send under it took the campaign's
-- target, and the campaign a later send's. A campaign has one message, so
-- "one delivery per recipient and campaign" is (message, recipient) among
-- campaign deliveries; this index says so, and the campaign's rows carry no
-- dedup key at all, so no caller's key can meet them.
CREATE UNIQUE INDEX oncepush_delivery_campaign_recipient ON oncepush_delivery (message_id, recipient) WHERE campaign;
UPDATE oncepush_delivery SET dedup_key = NULL WHERE campaign AND dedup_key IS NOT NULL;
