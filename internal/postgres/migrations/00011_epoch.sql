-- +goose Up
-- Each conversation's epoch in a column of its own (it is in its data
-- too): the cheap look at a conversation's head that a node makes before
-- it answers from its cache reads it, so that a node tells a conversation
-- deleted and made again under the same id from the one it cached, and
-- an append decided for one epoch is never written into another.
ALTER TABLE conversations ADD COLUMN epoch TEXT NOT NULL DEFAULT '';
UPDATE conversations SET epoch = COALESCE(convert_from(data, 'UTF8')::json ->> 'epoch', '');

-- +goose Down
ALTER TABLE conversations DROP COLUMN epoch;
