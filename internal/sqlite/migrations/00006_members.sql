-- +goose Up
-- Who takes part in each conversation (its participants, members and the
-- agent that created it), so that an agent lists only its conversations,
-- newest first, from an index.
CREATE TABLE conversation_members (
    agent_id        TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    PRIMARY KEY (agent_id, created_at, conversation_id)
);
CREATE INDEX conversation_members_by_conversation ON conversation_members (conversation_id);
INSERT OR IGNORE INTO conversation_members (agent_id, created_at, conversation_id)
    SELECT j.value, c.created_at, c.id FROM conversations c, json_each(CAST(c.data AS TEXT), '$.participants') j;
INSERT OR IGNORE INTO conversation_members (agent_id, created_at, conversation_id)
    SELECT json_extract(CAST(c.data AS TEXT), '$.createdBy'), c.created_at, c.id FROM conversations c
    WHERE json_extract(CAST(c.data AS TEXT), '$.createdBy') NOT IN ('', 'admin', 'viewer');

-- +goose Down
DROP TABLE conversation_members;
