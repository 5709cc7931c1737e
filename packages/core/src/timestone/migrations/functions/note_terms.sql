-- timestone.note_terms: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0036.

-- Until migration 0038, four arguments (the length of each row was its number of
-- lexemes): replaced by the definition below.
DROP FUNCTION IF EXISTS timestone.note_terms(text[], text[], tsvector[], integer[]);

-- Add the rows (sign 1) or remove them (sign -1). A row's length is p_lengths'
-- (the words of an episode, migration 0038), or without it its number of
-- lexemes (facts, entities, communities).
--
-- The writer that holds its group's fold lock (a transaction-level try-lock)
-- adds its deltas to the group's rows in place: a lexeme's one row is updated
-- (its key unchanged: a heap-only update, no index entry written), a lexeme
-- with several rows (deltas other writers left) is folded into one, a lexeme
-- with none gets its row, and a row whose counts reach zero goes. Any other
-- writer inserts its deltas as rows of their own (no conflict, no wait), which
-- the next holder of the lock folds. Reads sum a lexeme's rows, so the sums
-- are exact under any interleaving. Deltas of a second group in one statement
-- (a write is of one group) are inserted as rows too.
--
-- Its statements read term_stats through its one index (migration 0040), by the
-- group, the kind and the lexemes, and a row also by its id; no scan of the table,
-- nor of a bitmap of the index (which read the group's every entry and filtered
-- them: 0.5 ms a statement at 4,000 rows).
CREATE OR REPLACE FUNCTION timestone.note_terms(
    p_groups text[], p_kinds text[], p_fts tsvector[], p_signs integer[],
    p_lengths integer[] DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $fn$
DECLARE
    g text := p_groups[1];
    folding boolean;
    grp text;
    k text;
    lexemes text[];
    docs_of jsonb;
    length_of jsonb;
    held jsonb;
    present bigint;
    single bigint[];
    single_lexemes text[];
    several text[];
    emptied bigint[];
    emptied_lexemes text[];
BEGIN
    IF coalesce(cardinality(p_groups), 0) = 0 THEN
        RETURN;
    END IF;
    folding := pg_try_advisory_xact_lock(
        hashtextextended('timestone-term-stats' || chr(31) || g, 0));
    -- One pass per group and kind, its lexemes and their deltas in one array and two
    -- jsonb objects (looked up by key): index searches of (group, kind, lexeme) and
    -- of (group, id), no join for the planner to loop over (decision 023).
    FOR grp, k, lexemes, docs_of, length_of IN
        SELECT d.group_id, d.kind, array_agg(d.lexeme), jsonb_object_agg(d.lexeme, d.docs),
               jsonb_object_agg(d.lexeme, d.length)
        FROM (
            SELECT x.group_id, x.kind, x.lexeme, sum(x.docs) AS docs,
                   sum(x.length) AS length
            FROM (
                SELECT r.group_id, r.kind, t.lexeme, r.sign::bigint AS docs,
                       0::bigint AS length
                FROM unnest(p_groups, p_kinds, p_fts, p_signs) AS r(group_id, kind, fts, sign),
                     unnest(tsvector_to_array(r.fts)) AS t(lexeme)
                UNION ALL
                SELECT r.group_id, r.kind, '', r.sign,
                       r.sign * coalesce(p_lengths[r.n]::bigint, length(r.fts))
                FROM unnest(p_groups, p_kinds, p_fts, p_signs)
                     WITH ORDINALITY AS r(group_id, kind, fts, sign, n)
            ) AS x
            GROUP BY x.group_id, x.kind, x.lexeme
            HAVING sum(x.docs) <> 0 OR sum(x.length) <> 0
        ) AS d
        GROUP BY d.group_id, d.kind
    LOOP
        IF NOT folding OR grp <> g THEN
            -- not added in place: another writer holds the lock, or another group's
            INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)
            SELECT grp, k, l.lexeme, (docs_of ->> l.lexeme)::bigint,
                   (length_of ->> l.lexeme)::bigint
            FROM unnest(lexemes) AS l(lexeme);
            CONTINUE;
        END IF;
        SELECT jsonb_object_agg(h.lexeme, h.n), count(*),
               array_agg(h.keep) FILTER (WHERE h.n = 1),
               array_agg(h.lexeme) FILTER (WHERE h.n = 1),
               array_agg(h.lexeme) FILTER (WHERE h.n > 1)
        INTO held, present, single, single_lexemes, several
        FROM (SELECT s.lexeme, min(s.id) AS keep, count(*) AS n
              FROM timestone.term_stats AS s
              WHERE s.group_id = g AND s.kind = k AND s.lexeme = ANY (lexemes)
              GROUP BY s.lexeme) AS h;
        IF single IS NOT NULL THEN
            WITH moved AS (
                UPDATE timestone.term_stats AS s
                SET docs = s.docs + (docs_of ->> s.lexeme)::bigint,
                    length = s.length + (length_of ->> s.lexeme)::bigint
                WHERE s.group_id = g AND s.kind = k AND s.lexeme = ANY (single_lexemes)
                  AND s.id = ANY (single)
                RETURNING s.id, s.lexeme, s.docs, s.length
            )
            SELECT array_agg(m.id) FILTER (WHERE m.docs = 0 AND m.length = 0),
                   array_agg(m.lexeme) FILTER (WHERE m.docs = 0 AND m.length = 0)
            INTO emptied, emptied_lexemes FROM moved AS m;
            IF emptied IS NOT NULL THEN
                DELETE FROM timestone.term_stats AS s
                WHERE s.group_id = g AND s.kind = k AND s.lexeme = ANY (emptied_lexemes)
                  AND s.id = ANY (emptied);
            END IF;
        END IF;
        IF several IS NOT NULL THEN
            WITH gone AS (
                DELETE FROM timestone.term_stats AS s
                WHERE s.group_id = g  -- one group's rows: one shard on Citus
                  AND s.kind = k AND s.lexeme = ANY (several)
                RETURNING s.lexeme, s.docs, s.length
            )
            INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)
            SELECT g, k, f.lexeme, f.docs, f.length
            FROM (SELECT o.lexeme, sum(o.docs) + (docs_of ->> o.lexeme)::bigint AS docs,
                         sum(o.length) + (length_of ->> o.lexeme)::bigint AS length
                  FROM gone AS o GROUP BY o.lexeme) AS f
            WHERE f.docs <> 0 OR f.length <> 0;
        END IF;
        IF present < cardinality(lexemes) THEN
            INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)
            SELECT g, k, l.lexeme, (docs_of ->> l.lexeme)::bigint,
                   (length_of ->> l.lexeme)::bigint
            FROM unnest(lexemes) AS l(lexeme)
            WHERE held IS NULL OR NOT held ? l.lexeme;
        END IF;
    END LOOP;
END
$fn$;

REVOKE ALL ON FUNCTION timestone.note_terms(text[],text[],tsvector[],integer[],integer[]) FROM PUBLIC;
