-- +goose Up
-- A row's text enters the search index a moment after it is written, in
-- batches, not in the write itself. The triggers note the row in
-- search_pending; the store indexes what is noted there a fraction of a
-- second later, many rows in one statement, and before any search reads
-- the index (so that a search finds every row written before it).
--
-- Indexing in the write cost the one writer about a fifth of its time
-- when many messages stream at once: FTS5 writes a segment of the index
-- for every statement and every commit that changes it, and merges those
-- segments as they pile up. Batched, it writes one segment per batch.
--
-- A row is indexed (in message_search) or noted (in search_pending), never
-- both (a trigger's INSERT OR IGNORE would give way to the conflict rule of
-- the statement that fires it, an upsert's among them, hence NOT EXISTS): a noted row's text is not in the index yet, so changing or
-- removing it takes nothing out of the index; an indexed row's old text
-- leaves the index before it changes or goes, as before.
CREATE TABLE search_pending (rid INTEGER PRIMARY KEY);

DROP TRIGGER message_search_insert;
DROP TRIGGER message_search_unindex;
DROP TRIGGER message_search_reindex;
DROP TRIGGER message_search_delete;

-- +goose StatementBegin
CREATE TRIGGER message_search_insert AFTER INSERT ON messages WHEN new.streaming = 0 BEGIN
    INSERT INTO search_pending (rid) SELECT new.rowid WHERE NOT EXISTS (SELECT 1 FROM search_pending WHERE rid = new.rowid);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER message_search_unindex BEFORE UPDATE ON messages
WHEN old.streaming = 0 AND NOT EXISTS (SELECT 1 FROM search_pending WHERE rid = old.rowid) BEGIN
    INSERT INTO message_search (message_search, rowid, conv, body) SELECT 'delete', rid, conv, body FROM message_search_text WHERE rid = old.rowid;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER message_search_reindex AFTER UPDATE ON messages WHEN new.streaming = 0 BEGIN
    INSERT INTO search_pending (rid) SELECT new.rowid WHERE NOT EXISTS (SELECT 1 FROM search_pending WHERE rid = new.rowid);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER message_search_delete BEFORE DELETE ON messages WHEN old.streaming = 0 BEGIN
    INSERT INTO message_search (message_search, rowid, conv, body) SELECT 'delete', rid, conv, body FROM message_search_text
        WHERE rid = old.rowid AND NOT EXISTS (SELECT 1 FROM search_pending WHERE rid = old.rowid);
    DELETE FROM search_pending WHERE rid = old.rowid;
END;
-- +goose StatementEnd

-- +goose Down
-- What is noted is indexed, and the triggers index in the write again.
INSERT INTO message_search (rowid, conv, body) SELECT rid, conv, body FROM message_search_text WHERE rid IN (SELECT rid FROM search_pending);

DROP TRIGGER message_search_insert;
DROP TRIGGER message_search_unindex;
DROP TRIGGER message_search_reindex;
DROP TRIGGER message_search_delete;
DROP TABLE search_pending;

-- +goose StatementBegin
CREATE TRIGGER message_search_insert AFTER INSERT ON messages WHEN new.streaming = 0 BEGIN
    INSERT INTO message_search (rowid, conv, body) SELECT rid, conv, body FROM message_search_text WHERE rid = new.rowid;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER message_search_unindex BEFORE UPDATE ON messages WHEN old.streaming = 0 BEGIN
    INSERT INTO message_search (message_search, rowid, conv, body) SELECT 'delete', rid, conv, body FROM message_search_text WHERE rid = old.rowid;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER message_search_reindex AFTER UPDATE ON messages WHEN new.streaming = 0 BEGIN
    INSERT INTO message_search (rowid, conv, body) SELECT rid, conv, body FROM message_search_text WHERE rid = new.rowid;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER message_search_delete BEFORE DELETE ON messages WHEN old.streaming = 0 BEGIN
    INSERT INTO message_search (message_search, rowid, conv, body) SELECT 'delete', rid, conv, body FROM message_search_text WHERE rid = old.rowid;
END;
-- +goose StatementEnd
