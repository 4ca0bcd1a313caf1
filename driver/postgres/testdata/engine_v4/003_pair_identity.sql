-- oncepush ledger, version 3: a (delivery, device) pair is identified by the
-- device's token, not by its registration row. A token that unregisters and
-- registers again gets a new row id; keyed by the row id, the ledger would
-- see a new pair and submit the same notification to the same token twice.

ALTER TABLE oncepush_device_attempt ADD COLUMN token_key text;

UPDATE oncepush_device_attempt a
SET token_key = d.token_key
FROM oncepush_device d
WHERE d.id = a.device_id;

-- Rows of registrations deleted since: their token is unknown, and no
-- registration can match them again.
UPDATE oncepush_device_attempt SET token_key = 'device:' || device_id WHERE token_key IS NULL;

ALTER TABLE oncepush_device_attempt ALTER COLUMN token_key SET NOT NULL;
ALTER TABLE oncepush_device_attempt DROP CONSTRAINT oncepush_device_attempt_pkey;
ALTER TABLE oncepush_device_attempt ADD PRIMARY KEY (delivery_id, transport, token_key);
