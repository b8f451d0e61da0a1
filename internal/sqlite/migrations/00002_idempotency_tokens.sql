-- +goose Up
-- Results of writes made with a client request id, and bearer tokens (hashed).
CREATE TABLE idempotency (
    conversation_id TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    key             TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    response        BLOB NOT NULL,
    ts              TEXT NOT NULL,
    PRIMARY KEY (conversation_id, agent_id, key)
);

CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    name       TEXT NOT NULL,
    hash       TEXT NOT NULL UNIQUE,   -- SHA-256 hex of the secret; the secret is never stored
    created_at TEXT NOT NULL,
    revoked_at TEXT
);

-- +goose Down
DROP TABLE tokens;
DROP TABLE idempotency;
