-- +goose Up
-- Each conversation's epoch in a column of its own (it is in its data
-- too): the cheap look at a conversation's head reads it, so that a
-- cached state is told from a conversation deleted and made again under
-- the same id, and an append decided for one epoch is never written into
-- another.
ALTER TABLE conversations ADD COLUMN epoch TEXT NOT NULL DEFAULT '';
UPDATE conversations SET epoch = COALESCE(json_extract(CAST(data AS TEXT), '$.epoch'), '');

-- +goose Down
ALTER TABLE conversations DROP COLUMN epoch;
