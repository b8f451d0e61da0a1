-- +goose Up
-- Each conversation's head (the seq of its last event) in a narrow table
-- of its own, not in its conversations row. Every append moves the head,
-- and SQLite writes the whole page of every row an append changes into the
-- log: a conversations row (its data, its state snapshot) shares a page
-- with five or six others, so a commit that appended to a thousand
-- conversations wrote nearly all of the table's 190 pages. A head is some
-- 50 bytes: a thousand fit in 13 pages. The row is written still when
-- what it holds changes (a state snapshot, an import's lease).
CREATE TABLE heads (
    conversation_id TEXT PRIMARY KEY,
    last_seq        INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO heads (conversation_id, last_seq) SELECT id, last_seq FROM conversations;
ALTER TABLE conversations DROP COLUMN last_seq;

-- +goose Down
ALTER TABLE conversations ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
UPDATE conversations SET last_seq = h.last_seq FROM heads AS h WHERE h.conversation_id = conversations.id;
DROP TABLE heads;
