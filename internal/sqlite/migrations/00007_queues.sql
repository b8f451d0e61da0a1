-- +goose Up
-- The prompt queue apart from the state snapshot: every append rewrites the
-- snapshot, but only the appends that change the queue (prompt events)
-- rewrite the queue, so that a text delta costs the same however many
-- prompts wait. A conversation without a row has never had a prompt.
CREATE TABLE queues (
    conversation_id TEXT PRIMARY KEY,
    queue           BLOB NOT NULL       -- the conv.State queue as JSON, as of the conversation's last_seq
);
INSERT INTO queues (conversation_id, queue)
    SELECT id, CAST(json_extract(CAST(state AS TEXT), '$.queue') AS BLOB) FROM conversations
    WHERE json_type(CAST(state AS TEXT), '$.queue') = 'array';
UPDATE conversations SET state = CAST(json_remove(CAST(state AS TEXT), '$.queue') AS BLOB)
    WHERE json_type(CAST(state AS TEXT), '$.queue') IS NOT NULL;

-- +goose Down
UPDATE conversations SET state = CAST(json_set(CAST(state AS TEXT), '$.queue', json(CAST(q.queue AS TEXT))) AS BLOB)
    FROM queues AS q WHERE q.conversation_id = conversations.id AND json_array_length(CAST(q.queue AS TEXT)) > 0;
DROP TABLE queues;
