-- +goose Up
-- An event whose data is its message's row (the message.updated that ended
-- it, the message event of one posted whole) is stored, once retention
-- has compacted the message, as a reference to the row: ref names the
-- message and data is empty; reads give it the row's JSON. ref is NULL for
-- every other event. Every log is looked at again by compaction, which
-- makes the references of messages it compacted before.
ALTER TABLE events ADD COLUMN ref TEXT;
DELETE FROM compaction;

-- +goose Down
-- The rows' JSON back into the events that refer to them, with the content
-- a row leaves out when it is the text of its text parts.
UPDATE events SET data = (
    SELECT CASE WHEN json_type(j, '$.content') IS NULL THEN CAST(json_set(j, '$.content', coalesce(
            (WITH RECURSIVE p(i, acc) AS (SELECT 0, '' UNION ALL
                SELECT i + 1, acc || CASE json_extract(j, '$.parts[' || i || '].type') WHEN 'text' THEN json_extract(j, '$.parts[' || i || '].text') ELSE '' END
                FROM p WHERE i < json_array_length(j, '$.parts'))
             SELECT acc FROM p ORDER BY i DESC LIMIT 1), '')) AS BLOB)
        ELSE m.data END
    FROM (SELECT data, CAST(data AS TEXT) AS j FROM messages WHERE conversation_id = events.conversation_id AND id = events.ref) AS m)
WHERE ref IS NOT NULL;
ALTER TABLE events DROP COLUMN ref;
