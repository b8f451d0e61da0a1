-- +goose Up
-- A message row leaves its content out when it is the text of its text
-- parts (nearly always), so that the text is stored once: what search
-- indexes is the row's content when it has one, else that text, which is
-- the same text for every row written before (they all hold their
-- content), so the stored search column of each row stays right as it is.
-- Otherwise as 00009_search.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION message_search_text(data BYTEA) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    m JSONB := replace(convert_from(data, 'UTF8'), '\u0000', '\u0020')::jsonb;
    t TEXT := m->>'content';
BEGIN
    IF m->>'status' = 'streaming' THEN
        RETURN NULL;
    END IF;
    IF t IS NULL AND jsonb_typeof(m->'parts') = 'array' THEN
        SELECT string_agg(p->>'text', '' ORDER BY i) INTO t
            FROM jsonb_array_elements(m->'parts') WITH ORDINALITY AS x(p, i) WHERE p->>'type' = 'text';
    END IF;
    IF coalesce(t, '') = '' THEN
        RETURN NULL;
    END IF;
    RETURN translate(left(t, 65536), chr(2) || chr(3), '  ');
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Every row's content back into its JSON (as jsonb writes it), so that
-- code from before reads it, then the function as it was.
UPDATE messages SET data = convert_to(jsonb_set(j, '{content}', to_jsonb(coalesce(
        (SELECT string_agg(p->>'text', '' ORDER BY i) FROM jsonb_array_elements(CASE jsonb_typeof(j->'parts') WHEN 'array' THEN j->'parts' ELSE '[]' END)
            WITH ORDINALITY AS x(p, i) WHERE p->>'type' = 'text'), '')))::text, 'UTF8')
    FROM (SELECT conversation_id AS cid, id AS mid, replace(convert_from(data, 'UTF8'), '\u0000', '\u0020')::jsonb AS j FROM messages) AS m
    WHERE m.cid = messages.conversation_id AND m.mid = messages.id AND NOT (j ? 'content');
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION message_search_text(data BYTEA) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    m JSONB := replace(convert_from(data, 'UTF8'), '\u0000', '\u0020')::jsonb;
BEGIN
    IF m->>'status' = 'streaming' OR coalesce(m->>'content', '') = '' THEN
        RETURN NULL;
    END IF;
    RETURN translate(left(m->>'content', 65536), chr(2) || chr(3), '  ');
END
$$;
-- +goose StatementEnd
