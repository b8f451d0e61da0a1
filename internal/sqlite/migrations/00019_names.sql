-- +goose Up
-- The ids of a conversation's messages and prompts, each taken once for
-- good: a write that would take an id already taken (a prompt under
-- another's message id, a message under a withdrawn prompt's or a reverted
-- message's id) is refused, so that no write lands on another's row.
-- Filled from the message rows and from the log, which keeps the message
-- and prompt.queued events of what was removed since.
CREATE TABLE names (
    conversation_id TEXT NOT NULL,
    id              TEXT NOT NULL,
    PRIMARY KEY (conversation_id, id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO names (conversation_id, id) SELECT conversation_id, id FROM messages;
INSERT OR IGNORE INTO names (conversation_id, id)
    SELECT conversation_id, n FROM (
        SELECT conversation_id, coalesce(ref, json_extract(CAST(data AS TEXT), '$.id')) AS n FROM events
        WHERE type IN ('message', 'prompt.queued') AND (ref IS NOT NULL OR json_valid(CAST(data AS TEXT))))
    WHERE n IS NOT NULL AND typeof(n) = 'text';

-- +goose Down
DROP TABLE names;
