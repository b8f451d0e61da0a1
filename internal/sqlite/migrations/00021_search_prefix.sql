-- +goose Up
-- The search index keeps, besides each word, its first two and first three
-- letters, so that a search whose last word is a short prefix (search as
-- you type: "ca", "can") reads one list of rows, as a word does, rather
-- than the lists of every word that begins so, which for two letters may
-- be most of the index. The index is built anew, of the rows indexed so
-- far (those noted in search_pending are indexed, as ever, a moment later).
DROP TABLE message_search;
CREATE VIRTUAL TABLE message_search USING fts5(conv, body,
    content = 'message_search_text', content_rowid = 'rid',
    tokenize = 'unicode61 remove_diacritics 0', prefix = '2 3');
INSERT INTO message_search (rowid, conv, body)
    SELECT rid, conv, body FROM message_search_text WHERE rid NOT IN (SELECT rid FROM search_pending);

-- +goose Down
DROP TABLE message_search;
CREATE VIRTUAL TABLE message_search USING fts5(conv, body,
    content = 'message_search_text', content_rowid = 'rid',
    tokenize = 'unicode61 remove_diacritics 0');
INSERT INTO message_search (rowid, conv, body)
    SELECT rid, conv, body FROM message_search_text WHERE rid NOT IN (SELECT rid FROM search_pending);
