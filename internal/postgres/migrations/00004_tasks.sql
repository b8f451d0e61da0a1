-- +goose Up
-- Scheduled prompts.
CREATE TABLE tasks (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    data            TEXT NOT NULL,       -- the parley.Task as JSON
    next_run_at     TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX tasks_due ON tasks (next_run_at);

-- +goose Down
DROP TABLE tasks;
