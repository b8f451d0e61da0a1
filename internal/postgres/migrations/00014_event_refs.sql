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
-- The rows' JSON back into the events that refer to them (as jsonb writes
-- it), with the content a row leaves out when it is the text of its text
-- parts.
UPDATE events e SET data = CASE WHEN j ? 'content' THEN m.data ELSE convert_to(jsonb_set(j, '{content}', to_jsonb(coalesce(
        (SELECT string_agg(p->>'text', '' ORDER BY i) FROM jsonb_array_elements(CASE jsonb_typeof(j->'parts') WHEN 'array' THEN j->'parts' ELSE '[]' END)
            WITH ORDINALITY AS x(p, i) WHERE p->>'type' = 'text'), '')))::text, 'UTF8') END
    FROM (SELECT conversation_id, id, data, replace(convert_from(data, 'UTF8'), '\u0000', '\u0020')::jsonb AS j FROM messages) AS m
    WHERE e.ref IS NOT NULL AND m.conversation_id = e.conversation_id AND m.id = e.ref;
ALTER TABLE events DROP COLUMN ref;
