-- A receiver that echoes what it is sent put a feature.unlocked's accessToken into the recorded answer (up to
-- 1 KiB of it), in clear, while the event's body is sealed. Answers are recorded scrubbed of the body's secrets
-- from now on; such answers recorded before are removed here (an answer is for diagnosis only), their bytes
-- overwritten in the file too (secure_delete, for this statement only).
PRAGMA secure_delete = ON;
UPDATE webhook_attempts SET response = '[redacted]'
WHERE response LIKE '%ft\_%' ESCAPE '\'
  AND delivery_id IN (
    SELECT d.id FROM webhook_deliveries d JOIN outbox_events e ON e.id = d.event_id WHERE e.type = 'feature.unlocked'
  );
PRAGMA secure_delete = OFF;
