-- +goose Up
-- Each conversation's last activity (the time of its latest event, as
-- events.ts writes it: fixed-width UTC text, so text order is time order)
-- in its narrow heads row, which every append writes already, with an
-- index in that order, so that the list of conversations by last activity
-- reads its pages from the index. The index's entries are the time and
-- the id: an append moves one entry, into the pages of the most recent.
ALTER TABLE heads ADD COLUMN last_at TEXT NOT NULL DEFAULT '';
UPDATE heads SET last_at = COALESCE(
    (SELECT e.ts FROM events e WHERE e.conversation_id = heads.conversation_id ORDER BY e.seq DESC LIMIT 1),
    (SELECT c.created_at FROM conversations c WHERE c.id = heads.conversation_id), '');
CREATE INDEX heads_by_activity ON heads (last_at DESC, conversation_id DESC);

-- +goose Down
DROP INDEX heads_by_activity;
ALTER TABLE heads DROP COLUMN last_at;
