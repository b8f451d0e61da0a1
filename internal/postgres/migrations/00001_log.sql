-- +goose Up
-- Conversations, their event logs and the messages projection.
CREATE TABLE conversations (
    id         TEXT PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL,
    data       BYTEA NOT NULL,          -- the parley.Conversation as JSON
    last_seq   BIGINT NOT NULL,         -- its row lock orders appends: seq order is commit order
    state      BYTEA NOT NULL           -- the conv.State snapshot as of last_seq
);
CREATE INDEX conversations_newest ON conversations (created_at DESC, id DESC);

CREATE TABLE events (
    conversation_id TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    type            TEXT NOT NULL,
    turn            INTEGER NOT NULL,
    turn_id         TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    finality        TEXT NOT NULL,
    ts              TIMESTAMPTZ,
    data            BYTEA NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);

CREATE TABLE messages (
    conversation_id TEXT NOT NULL,
    id              TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    turn_id         TEXT NOT NULL,
    reply_to        TEXT,
    agent_id        TEXT NOT NULL,
    depth           INTEGER NOT NULL,
    data            BYTEA NOT NULL,     -- the parley.Message as JSON
    PRIMARY KEY (conversation_id, id)
);
CREATE INDEX messages_by_seq ON messages (conversation_id, seq);
CREATE INDEX messages_by_turn_id ON messages (conversation_id, turn_id, seq);
CREATE INDEX messages_by_reply_to ON messages (conversation_id, reply_to, seq);
CREATE INDEX messages_by_agent ON messages (conversation_id, agent_id, seq);

-- +goose Down
DROP TABLE messages;
DROP TABLE events;
DROP TABLE conversations;
