-- +goose Up
-- The ids of a conversation's messages and prompts, each taken once for
-- good: a write that would take an id already taken (a prompt under
-- another's message id, a message under a withdrawn prompt's or a reverted
-- message's id) is refused, so that no write lands on another's row.
-- Filled from the message rows and from the log, which keeps the message
-- and prompt.queued events of what was removed since (a \u0000 escape,
-- which json refuses to read out, is made a space first: ids hold none).
CREATE TABLE names (
    conversation_id TEXT NOT NULL,
    id              TEXT NOT NULL,
    PRIMARY KEY (conversation_id, id)
);
INSERT INTO names (conversation_id, id) SELECT conversation_id, id FROM messages ON CONFLICT DO NOTHING;
INSERT INTO names (conversation_id, id)
    SELECT conversation_id, n FROM (
        SELECT conversation_id, coalesce(ref, replace(convert_from(data, 'UTF8'), '\u0000', '\u0020')::json ->> 'id') AS n FROM events
        WHERE type IN ('message', 'prompt.queued')) AS e
    WHERE n IS NOT NULL
    ON CONFLICT DO NOTHING;

-- +goose Down
DROP TABLE names;
