-- +goose Up
-- An import in progress: its conversation is invisible to readers until the
-- import finishes, and is removed if its importer dies first. import_owner
-- names the importing process (NULL once the import finished, and for every
-- other conversation); import_expires is the end of its lease.
ALTER TABLE conversations ADD COLUMN import_owner TEXT, ADD COLUMN import_expires TIMESTAMPTZ;
CREATE INDEX conversations_importing ON conversations (import_expires) WHERE import_owner IS NOT NULL;

-- +goose Down
DROP INDEX conversations_importing;
ALTER TABLE conversations DROP COLUMN import_expires, DROP COLUMN import_owner;
