-- +goose Up
-- The lease of the due tasks a scheduler round took to fire: until
-- taken_until no round takes them again, and the firing that moves a task
-- to its next run ends it.
ALTER TABLE tasks ADD COLUMN taken_until TEXT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN taken_until;
