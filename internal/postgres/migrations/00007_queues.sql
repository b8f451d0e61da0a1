-- +goose Up
-- The prompt queue apart from the state snapshot: every append rewrites the
-- snapshot, but only the appends that change the queue (prompt events)
-- rewrite the queue, so that a text delta costs the same however many
-- prompts wait. A conversation without a row has never had a prompt.
CREATE TABLE queues (
    conversation_id TEXT PRIMARY KEY,
    queue           BYTEA NOT NULL      -- the conv.State queue as JSON, as of the conversation's last_seq
);
INSERT INTO queues (conversation_id, queue)
    SELECT id, convert_to((convert_from(state, 'UTF8')::jsonb -> 'queue')::text, 'UTF8') FROM conversations
    WHERE jsonb_typeof(convert_from(state, 'UTF8')::jsonb -> 'queue') = 'array';
UPDATE conversations SET state = convert_to((convert_from(state, 'UTF8')::jsonb - 'queue')::text, 'UTF8')
    WHERE convert_from(state, 'UTF8')::jsonb -> 'queue' IS NOT NULL;

-- +goose Down
UPDATE conversations AS c
    SET state = convert_to(jsonb_set(convert_from(c.state, 'UTF8')::jsonb, '{queue}', convert_from(q.queue, 'UTF8')::jsonb)::text, 'UTF8')
    FROM queues AS q WHERE q.conversation_id = c.id AND convert_from(q.queue, 'UTF8') <> '[]';
DROP TABLE queues;
