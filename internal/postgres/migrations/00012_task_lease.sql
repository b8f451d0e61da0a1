-- +goose Up
-- A node's lease of the due tasks it took to fire: until taken_until no
-- other node takes them, and the firing that moves a task to its next run
-- ends it. A node that dies holding tasks leaves them to the others once
-- the lease ends.
ALTER TABLE tasks ADD COLUMN taken_until TIMESTAMPTZ;

-- +goose Down
ALTER TABLE tasks DROP COLUMN taken_until;
