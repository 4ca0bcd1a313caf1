-- oncepush ledger, version 10: the recipients a campaign's expansion passed
-- without writing a delivery, by reason (D155); driver/postgres's
-- 010_campaign_unreached.sql says what each column counts.
ALTER TABLE oncepush_campaign ADD COLUMN unreached_no_device    INTEGER NOT NULL DEFAULT 0;
ALTER TABLE oncepush_campaign ADD COLUMN unreached_filtered_out INTEGER NOT NULL DEFAULT 0;
ALTER TABLE oncepush_campaign ADD COLUMN unreached_malformed    INTEGER NOT NULL DEFAULT 0;
ALTER TABLE oncepush_campaign ADD COLUMN unreached_duplicate    INTEGER NOT NULL DEFAULT 0;
