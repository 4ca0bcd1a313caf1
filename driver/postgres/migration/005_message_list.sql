-- oncepush ledger, version 5: the list of notifications.
--
-- Client.Messages (GET /v1/notifications) pages newest first, by creation
-- time and then id, from a cursor: every page is a seek into one of these
-- indexes, however deep. The creation index gains the id (cleanup, which
-- reads it by time, is served as before); the category index serves the
-- list filtered by category.
DROP INDEX oncepush_message_created;
CREATE INDEX oncepush_message_created ON oncepush_message (created_at, id);
CREATE INDEX oncepush_message_category ON oncepush_message (category, created_at, id);
