-- +goose Up
-- Channel auto-replies waiting to be delivered (at least once).
CREATE TABLE outbox (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    data            TEXT NOT NULL,      -- the parley.Delivery as JSON
    delivered       INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX outbox_due ON outbox (delivered, next_attempt_at);

-- +goose Down
DROP TABLE outbox;
