-- +goose Up
-- Who takes part in each conversation (its participants, members and the
-- agent that created it), so that an agent lists only its conversations,
-- newest first, from an index.
CREATE TABLE conversation_members (
    agent_id        TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    conversation_id TEXT NOT NULL,
    PRIMARY KEY (agent_id, created_at, conversation_id)
);
CREATE INDEX conversation_members_by_conversation ON conversation_members (conversation_id);
INSERT INTO conversation_members (agent_id, created_at, conversation_id)
    SELECT p.agent, c.created_at, c.id
    FROM conversations c, jsonb_array_elements_text(convert_from(c.data, 'UTF8')::jsonb -> 'participants') AS p(agent)
    ON CONFLICT DO NOTHING;
INSERT INTO conversation_members (agent_id, created_at, conversation_id)
    SELECT convert_from(c.data, 'UTF8')::jsonb ->> 'createdBy', c.created_at, c.id FROM conversations c
    WHERE convert_from(c.data, 'UTF8')::jsonb ->> 'createdBy' NOT IN ('', 'admin', 'viewer')
    ON CONFLICT DO NOTHING;

-- +goose Down
DROP TABLE conversation_members;
