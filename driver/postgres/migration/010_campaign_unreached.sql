-- oncepush ledger, version 10: a campaign counts the recipients its
-- expansion passed without writing a delivery, by reason (D155), so that
-- written plus these equals the audience the expansion has passed. Each is
-- added by the batch that decided it, in its transaction, with the cursor.
--
--   no_device    the recipient had no registered device
--   filtered_out it had devices; the filter selected none
--   malformed    the filter selected some; every token was malformed
--   duplicate    every well-formed token was another recipient's target
--                in the same batch (one campaign reaches a token once)
ALTER TABLE oncepush_campaign
    ADD COLUMN unreached_no_device    bigint NOT NULL DEFAULT 0,
    ADD COLUMN unreached_filtered_out bigint NOT NULL DEFAULT 0,
    ADD COLUMN unreached_malformed    bigint NOT NULL DEFAULT 0,
    ADD COLUMN unreached_duplicate    bigint NOT NULL DEFAULT 0;
