-- The searchable text of a record of structured facts (an episode of source 'facts',
-- written by add_facts) is what its facts say: the string values of each fact's
-- source, relation, target and sentence (names, labels, summaries and attribute
-- values of an endpoint given as an object included), and its name unless it is the
-- name add_facts gives by default ('facts at ' and the reference time). Its content is
-- the JSON of the facts, whose keys ("source", "relation", "valid_at"...) and ISO dates
-- were indexed as words of every such episode: 43 lexemes for a call of nine facts
-- where the facts hold 14, each written to the full-text index and to the term
-- statistics of every call. The facts' dates are columns of the facts, searched by
-- the windows a question's time words make, as the facts' own text vectors never held
-- them. Every other episode keeps its text (name and content), and both columns stay
-- one text: the vector and the number of its words (BM25's length, 0038). A record
-- whose content is JSON of another shape has no facts' words (the path is silent).
--
-- The text is written out in both columns: a generated column cannot read another, and
-- a function of the schema in its place would be one whose next definition never
-- reaches the values stored.
--
-- Both columns are made again (the table is rewritten), the index with them, and the
-- statistics of the kind 'episodes' are counted again from the current rows; 'told
-- episodes' (no record of facts among them) are unchanged.
DROP INDEX timestone.episodes_fts;
ALTER TABLE timestone.episodes DROP COLUMN fts, DROP COLUMN fts_words;
ALTER TABLE timestone.episodes
    ADD COLUMN fts tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig,
        CASE WHEN source = 'facts' THEN
            CASE WHEN name ~ '^facts at [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+([+-][0-9]{2}:[0-9]{2})?$'
                 THEN '' ELSE name END
            || ' ' || left(jsonb_path_query_array(content::jsonb,
                'strict $[*].keyvalue() ? (@.key == "source" || @.key == "relation"'
                ' || @.key == "target" || @.key == "fact").value.** ? (@.type() == "string")',
                '{}', true)::text, 80000)
        ELSE left(name || ' ' || content, 80000) END)) STORED,
    ADD COLUMN fts_words integer GENERATED ALWAYS AS (regexp_count(
        CASE WHEN source = 'facts' THEN
            CASE WHEN name ~ '^facts at [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+([+-][0-9]{2}:[0-9]{2})?$'
                 THEN '' ELSE name END
            || ' ' || left(jsonb_path_query_array(content::jsonb,
                'strict $[*].keyvalue() ? (@.key == "source" || @.key == "relation"'
                ' || @.key == "target" || @.key == "fact").value.** ? (@.type() == "string")',
                '{}', true)::text, 80000)
        ELSE left(name || ' ' || content, 80000) END, '\w+')) STORED;
CREATE INDEX episodes_fts ON timestone.episodes USING gin (fts)
    WITH (gin_pending_list_limit = 256, fastupdate = off) WHERE expired_at IS NULL;

DELETE FROM timestone.term_stats WHERE kind = 'episodes';
INSERT INTO timestone.term_stats (id, group_id, kind, lexeme, docs, length)
OVERRIDING SYSTEM VALUE
SELECT 0, d.group_id, 'episodes', d.lexeme, sum(d.docs), sum(d.length)
FROM (
    SELECT p.group_id, t.lexeme, 1::bigint AS docs, 0::bigint AS length
    FROM timestone.episodes AS p, unnest(tsvector_to_array(p.fts)) AS t(lexeme)
    WHERE p.expired_at IS NULL
    UNION ALL
    SELECT p.group_id, '', 1, p.fts_words
    FROM timestone.episodes AS p
    WHERE p.expired_at IS NULL
) AS d
GROUP BY d.group_id, d.lexeme;
