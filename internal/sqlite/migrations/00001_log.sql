-- +goose Up
-- Conversations, their event logs and the messages projection.
CREATE TABLE conversations (
    id         TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    data       BLOB NOT NULL,          -- the parley.Conversation as JSON
    last_seq   INTEGER NOT NULL,
    state      BLOB NOT NULL           -- the conv.State snapshot as of last_seq
);
CREATE INDEX conversations_newest ON conversations (created_at DESC, id DESC);

-- A rowid table on purpose: WITHOUT ROWID made interleaved inserts 4.5x slower.
CREATE TABLE events (
    conversation_id TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    type            TEXT NOT NULL,
    turn            INTEGER NOT NULL,
    turn_id         TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    finality        TEXT NOT NULL,
    ts              TEXT NOT NULL,
    data            BLOB NOT NULL
);
CREATE UNIQUE INDEX events_by_seq ON events (conversation_id, seq);

CREATE TABLE messages (
    conversation_id TEXT NOT NULL,
    id              TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    turn_id         TEXT NOT NULL,
    reply_to        TEXT,
    agent_id        TEXT NOT NULL,
    depth           INTEGER NOT NULL,
    data            BLOB NOT NULL      -- the parley.Message as JSON
);
CREATE UNIQUE INDEX messages_by_id ON messages (conversation_id, id);
CREATE INDEX messages_by_seq ON messages (conversation_id, seq);
CREATE INDEX messages_by_turn_id ON messages (conversation_id, turn_id, seq);
CREATE INDEX messages_by_reply_to ON messages (conversation_id, reply_to, seq);
CREATE INDEX messages_by_agent ON messages (conversation_id, agent_id, seq);

-- +goose Down
DROP TABLE messages;
DROP TABLE events;
DROP TABLE conversations;
