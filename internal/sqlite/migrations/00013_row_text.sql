-- +goose Up
-- A message row leaves its content out when it is the text of its text
-- parts (nearly always), so that the text is stored once: what search
-- indexes is the row's content when it has one, else that text, which is
-- the same text for every row written before (they all hold their content),
-- so the index stays as it is. The parts are walked by index, not with
-- json_each: the full-text index reads this view by its schema's name
-- (main.message_search_text), and SQLite then looks for json_each in that
-- schema too. Otherwise as 00009_search.
DROP VIEW message_search_text;
CREATE VIEW message_search_text AS
    SELECT rid, char(57344) || hex(conversation_id) AS conv,
        replace(replace(substr(t, 1, 65536), char(2), ' '), char(3), ' ') AS body
    FROM (SELECT rid, conversation_id, j, coalesce(json_extract(j, '$.content'),
            (WITH RECURSIVE p(i, acc) AS (SELECT 0, '' UNION ALL
                SELECT i + 1, acc || CASE json_extract(j, '$.parts[' || i || '].type') WHEN 'text' THEN json_extract(j, '$.parts[' || i || '].text') ELSE '' END
                FROM p WHERE i < json_array_length(j, '$.parts'))
             SELECT acc FROM p ORDER BY i DESC LIMIT 1)) AS t
        FROM (SELECT rowid AS rid, conversation_id, replace(CAST(data AS TEXT), '\u0000', '\u0020') AS j FROM messages))
    WHERE json_extract(j, '$.status') <> 'streaming' AND t <> '';

-- +goose Down
-- Every row's content back into its JSON (so that code from before reads
-- it), then the view as it was.
UPDATE messages SET data = CAST(json_set(CAST(data AS TEXT), '$.content', coalesce(
        (WITH RECURSIVE p(i, acc) AS (SELECT 0, '' UNION ALL
            SELECT i + 1, acc || CASE json_extract(CAST(data AS TEXT), '$.parts[' || i || '].type') WHEN 'text' THEN json_extract(CAST(data AS TEXT), '$.parts[' || i || '].text') ELSE '' END
            FROM p WHERE i < json_array_length(CAST(data AS TEXT), '$.parts'))
         SELECT acc FROM p ORDER BY i DESC LIMIT 1), '')) AS BLOB)
    WHERE json_type(CAST(data AS TEXT), '$.content') IS NULL;
DROP VIEW message_search_text;
CREATE VIEW message_search_text AS
    SELECT rid, char(57344) || hex(conversation_id) AS conv,
        replace(replace(substr(json_extract(j, '$.content'), 1, 65536), char(2), ' '), char(3), ' ') AS body
    FROM (SELECT rowid AS rid, conversation_id, replace(CAST(data AS TEXT), '\u0000', '\u0020') AS j FROM messages)
    WHERE json_extract(j, '$.status') <> 'streaming' AND json_extract(j, '$.content') <> '';
