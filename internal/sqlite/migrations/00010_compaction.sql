-- +goose Up
-- Where retention's compaction of each conversation's log stands: every
-- event up to through was looked at, as of the conversation's epoch (a
-- conversation made again under the same id, or restored, starts over),
-- and due is when compaction may next find something to do. The compacted
-- spans themselves are rows of events (type 'compacted'): no column of
-- events changes, so appends cost what they did.
CREATE TABLE compaction (
    conversation_id TEXT PRIMARY KEY,
    epoch           TEXT NOT NULL,
    through         INTEGER NOT NULL,
    due             TEXT NOT NULL
);

-- +goose Down
DROP TABLE compaction;
