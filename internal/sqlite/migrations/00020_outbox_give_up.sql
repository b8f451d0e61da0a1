-- +goose Up
-- A delivery that cannot be delivered is given up, and a row that is done
-- (delivered or given up) is kept for a bounded time, to be looked at,
-- then removed. status is pending, delivered or failed (given up), and
-- done_at when the row was done (NULL while pending). delivered is 1 for
-- every row that is done, so that no take takes a given-up row again.
ALTER TABLE outbox ADD COLUMN status TEXT NOT NULL DEFAULT 'pending';
ALTER TABLE outbox ADD COLUMN done_at TEXT;
UPDATE outbox SET status = 'delivered', done_at = coalesce(json_extract(data, '$.deliveredAt'), next_attempt_at) WHERE delivered = 1;
CREATE INDEX outbox_status ON outbox (status, id);
CREATE INDEX outbox_done ON outbox (done_at) WHERE done_at IS NOT NULL;

-- +goose Down
-- Given-up rows stay done (delivered = 1): nothing takes them again.
DROP INDEX outbox_done;
DROP INDEX outbox_status;
ALTER TABLE outbox DROP COLUMN done_at;
ALTER TABLE outbox DROP COLUMN status;
