-- +goose Up
-- Full-text search over message text (ts_rank over a tsvector, a GIN index).
-- message_search_text says what is indexed: the text (content) of a message
-- that is not streaming, its first 65536 characters, with the two snippet
-- markers (characters 2 and 3) made spaces; NULL for a message still
-- streaming or without text. A streamed message is indexed once it is
-- finalized, not while its text grows. The JSON of a message may escape a
-- NUL character (\u0000), which jsonb refuses: each such escape is made a
-- space's (\u0020) first, which keeps the JSON valid whatever precedes it.
-- +goose StatementBegin
CREATE FUNCTION message_search_text(data BYTEA) RETURNS TEXT
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

-- search is computed from each row as it is written (and for the rows
-- already there, by this statement); search_order numbers rows as they are
-- first written, so that a search takes the newest that match first.
CREATE SEQUENCE message_search_order;
ALTER TABLE messages
    ADD COLUMN search TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', message_search_text(data))) STORED,
    ADD COLUMN search_order BIGINT NOT NULL DEFAULT nextval('message_search_order');
ALTER SEQUENCE message_search_order OWNED BY messages.search_order;
CREATE INDEX messages_search ON messages USING gin (search) WHERE search IS NOT NULL;
CREATE INDEX messages_search_newest ON messages (search_order) WHERE search IS NOT NULL;

-- +goose Down
DROP INDEX messages_search_newest;
DROP INDEX messages_search;
ALTER TABLE messages DROP COLUMN search_order, DROP COLUMN search;
DROP FUNCTION message_search_text(BYTEA);
