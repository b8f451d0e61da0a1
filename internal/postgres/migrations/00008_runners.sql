-- +goose Up
-- Which runners are attached to which conversation on which node, each row
-- a lease that its node renews while the runner stays (RenewRunners): a
-- node that dies stops renewing, and its runners count as gone once their
-- lease ends. Other nodes read it before they end a runner's streaming
-- messages, and to name the agents that have a runner in guidance.
CREATE TABLE runners (
    node            TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (node, conversation_id, agent_id)
);
CREATE INDEX runners_conversation ON runners (conversation_id, expires_at);

-- +goose Down
DROP TABLE runners;
