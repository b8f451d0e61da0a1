-- +goose Up
-- Each conversation's last activity (the time of its latest event) beside
-- its last seq, which every append's UPDATE of the row moves already, with
-- an index in that order, so that the list of conversations by last
-- activity reads its pages from the index.
ALTER TABLE conversations ADD COLUMN last_event_at TIMESTAMPTZ;
UPDATE conversations c SET last_event_at = COALESCE(
    (SELECT e.ts FROM events e WHERE e.conversation_id = c.id ORDER BY e.seq DESC LIMIT 1), c.created_at);
ALTER TABLE conversations ALTER COLUMN last_event_at SET NOT NULL;
CREATE INDEX conversations_by_activity ON conversations (last_event_at DESC, id DESC);

-- +goose Down
DROP INDEX conversations_by_activity;
ALTER TABLE conversations DROP COLUMN last_event_at;
