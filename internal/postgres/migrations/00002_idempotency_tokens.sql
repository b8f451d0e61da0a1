-- +goose Up
-- Results of writes made with a client request id, and bearer tokens (hashed).
CREATE TABLE idempotency (
    conversation_id TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    key             TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    response        BYTEA NOT NULL,
    ts              TIMESTAMPTZ,
    PRIMARY KEY (conversation_id, agent_id, key)
);

CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    name       TEXT NOT NULL,
    hash       TEXT NOT NULL UNIQUE,   -- SHA-256 hex of the secret; the secret is never stored
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);

-- +goose Down
DROP TABLE tokens;
DROP TABLE idempotency;
