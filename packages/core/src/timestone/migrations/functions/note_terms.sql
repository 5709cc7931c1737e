-- timestone.note_terms: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0036.

-- Until migration 0038, four arguments (the length of each row was its number of
-- lexemes): replaced by the definition below.
DROP FUNCTION IF EXISTS timestone.note_terms(text[], text[], tsvector[], integer[]);

-- Add the rows (sign 1) or remove them (sign -1), then fold what they touched. A row's
-- length is p_lengths' (the words of an episode, migration 0038), or without it its
-- number of lexemes (facts, entities, communities).
CREATE OR REPLACE FUNCTION timestone.note_terms(
    p_groups text[], p_kinds text[], p_fts tsvector[], p_signs integer[],
    p_lengths integer[] DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
DECLARE
    k text;
    touched text[];
BEGIN
    IF coalesce(cardinality(p_groups), 0) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)
    SELECT d.group_id, d.kind, d.lexeme, sum(d.docs), sum(d.length)
    FROM (
        SELECT r.group_id, r.kind, t.lexeme, r.sign::bigint AS docs, 0::bigint AS length
        FROM unnest(p_groups, p_kinds, p_fts, p_signs) AS r(group_id, kind, fts, sign),
             unnest(tsvector_to_array(r.fts)) AS t(lexeme)
        UNION ALL
        SELECT r.group_id, r.kind, '', r.sign,
               r.sign * coalesce(p_lengths[r.n]::bigint, length(r.fts))
        FROM unnest(p_groups, p_kinds, p_fts, p_signs)
             WITH ORDINALITY AS r(group_id, kind, fts, sign, n)
    ) AS d
    GROUP BY d.group_id, d.kind, d.lexeme
    HAVING sum(d.docs) <> 0 OR sum(d.length) <> 0;
    -- the fold, of the first group's rows (a write is of one group)
    IF NOT pg_try_advisory_xact_lock(
            hashtextextended('timestone-term-stats' || chr(31) || p_groups[1], 0)) THEN
        RETURN;  -- another writer is folding: these deltas are folded by a later write
    END IF;
    -- One statement per kind, the lexemes it touched in one array: index searches of
    -- (group, kind, lexeme), no join for the planner to loop over (decision 023).
    FOR k, touched IN
        SELECT r.kind, array_agg(DISTINCT t.lexeme)
        FROM unnest(p_groups, p_kinds, p_fts) AS r(group_id, kind, fts),
             unnest(array_append(tsvector_to_array(r.fts), '')) AS t(lexeme)
        WHERE r.group_id = p_groups[1]
        GROUP BY r.kind
    LOOP
        WITH gone AS (
            DELETE FROM timestone.term_stats AS s
            WHERE s.group_id = p_groups[1]  -- one group's rows: one shard on Citus
              AND s.kind = k AND s.lexeme = ANY (touched)
            RETURNING s.lexeme, s.docs, s.length
        )
        INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)
        SELECT p_groups[1], k, g.lexeme, sum(g.docs), sum(g.length)
        FROM gone AS g GROUP BY g.lexeme
        HAVING sum(g.docs) <> 0 OR sum(g.length) <> 0;
    END LOOP;
END
$fn$;

REVOKE ALL ON FUNCTION timestone.note_terms(text[],text[],tsvector[],integer[],integer[]) FROM PUBLIC;
