-- +goose Up
-- Full-text search over message text: an FTS5 index (ranked by bm25) whose
-- content is the view message_search_text, so that the text is not stored
-- twice. The view says what is indexed: the text (content) of each message
-- that is not streaming, its first 65536 characters, with the two snippet
-- markers (characters 2 and 3) made spaces, and so are NUL characters
-- (their JSON escape is made a space's: SQLite's text functions end text at
-- a NUL); conv is a word for the
-- conversation (U+E000 and its id in hex), by which a search is narrowed to
-- some conversations.
-- A streamed message is indexed once it is finalized (its row stops being
-- streaming), not while its text grows.
--
-- The triggers keep the index in step with the rows, through the view:
-- a row's old text leaves the index before the row changes or goes, and
-- its new text enters after. A streaming row, which the view leaves out,
-- costs them one look at its status. The index names rows by the messages table's
-- rowid, which stays the same for the life of a row (an upsert updates in
-- place, and VACUUM keeps the rowids of a table with indexes).
CREATE VIEW message_search_text AS
    SELECT rid, char(57344) || hex(conversation_id) AS conv,
        replace(replace(substr(json_extract(j, '$.content'), 1, 65536), char(2), ' '), char(3), ' ') AS body
    FROM (SELECT rowid AS rid, conversation_id, replace(CAST(data AS TEXT), '\u0000', '\u0020') AS j FROM messages)
    WHERE json_extract(j, '$.status') <> 'streaming' AND json_extract(j, '$.content') <> '';

CREATE VIRTUAL TABLE message_search USING fts5(conv, body,
    content = 'message_search_text', content_rowid = 'rid',
    tokenize = 'unicode61 remove_diacritics 0');

-- The messages already written.
INSERT INTO message_search (message_search) VALUES ('rebuild');

-- +goose StatementBegin
CREATE TRIGGER message_search_insert AFTER INSERT ON messages
WHEN json_extract(CAST(new.data AS TEXT), '$.status') <> 'streaming' BEGIN
    INSERT INTO message_search (rowid, conv, body) SELECT rid, conv, body FROM message_search_text WHERE rid = new.rowid;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER message_search_unindex BEFORE UPDATE ON messages
WHEN json_extract(CAST(old.data AS TEXT), '$.status') <> 'streaming' BEGIN
    INSERT INTO message_search (message_search, rowid, conv, body) SELECT 'delete', rid, conv, body FROM message_search_text WHERE rid = old.rowid;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER message_search_reindex AFTER UPDATE ON messages
WHEN json_extract(CAST(new.data AS TEXT), '$.status') <> 'streaming' BEGIN
    INSERT INTO message_search (rowid, conv, body) SELECT rid, conv, body FROM message_search_text WHERE rid = new.rowid;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER message_search_delete BEFORE DELETE ON messages
WHEN json_extract(CAST(old.data AS TEXT), '$.status') <> 'streaming' BEGIN
    INSERT INTO message_search (message_search, rowid, conv, body) SELECT 'delete', rid, conv, body FROM message_search_text WHERE rid = old.rowid;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER message_search_delete;
DROP TRIGGER message_search_reindex;
DROP TRIGGER message_search_unindex;
DROP TRIGGER message_search_insert;
DROP TABLE message_search;
DROP VIEW message_search_text;
