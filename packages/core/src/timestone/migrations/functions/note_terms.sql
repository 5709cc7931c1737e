-- timestone.note_terms: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0036.

-- Until migration 0038, four arguments (the length of each row was its number of
-- lexemes): replaced by the definition below.
DROP FUNCTION IF EXISTS timestone.note_terms(text[], text[], tsvector[], integer[]);

-- Add the rows (sign 1) or remove them (sign -1). A row's length is p_lengths'
-- (the words of an episode, migration 0038), or without it its number of
-- lexemes (facts, entities, communities).
--
-- A lexeme of a group and kind has at most one main row (id 0) and any number of
-- pending rows (id > 0), and its counts are the sum of them all. The writer that
-- holds its group's fold lock (a transaction-level try-lock) adds its deltas to
-- the main rows in one statement a kind: an insert that, on the main row's key,
-- adds to it instead (a heap-only update: docs and length are in no index), with
-- the pending rows of the same lexemes taken out and added in; a main row whose
-- counts reach zero goes. Any other writer inserts its deltas as pending rows (no
-- conflict, no wait), which the next holder of the lock folds. Reads sum a
-- lexeme's rows, so the sums are exact under any interleaving. Deltas of a second
-- group in one statement (a write is of one group) are pending rows too.
--
-- The holder first asks whether its group has pending rows at all (the index of
-- pending rows, migration 0041). Without any, the common case, one statement adds the
-- deltas of every kind to their main rows; with some, each kind's statement also takes
-- out and adds in the pending rows of its lexemes.
--
-- Its statements read term_stats through its key (migration 0040), by the group, the
-- kind and the lexemes; no scan of the table, nor of a bitmap of the index (which
-- read the group's every entry and filtered them: 0.5 ms a statement at 4,000 rows).
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
    kinds text[];
    lexemes text[];
    docs bigint[];
    lengths bigint[];
    emptied text[];
BEGIN
    IF coalesce(cardinality(p_groups), 0) = 0 THEN
        RETURN;
    END IF;
    folding := pg_try_advisory_xact_lock(
        hashtextextended('timestone-term-stats' || chr(31) || g, 0));
    IF folding AND g = ALL (p_groups) AND NOT EXISTS (
        SELECT FROM timestone.term_stats AS s WHERE s.group_id = g AND s.id > 0
    ) THEN
        -- no pending rows: every kind's deltas added to its main rows at once
        WITH added AS (
            INSERT INTO timestone.term_stats AS s (id, group_id, kind, lexeme, docs, length)
            OVERRIDING SYSTEM VALUE
            SELECT 0, g, x.kind, x.lexeme, sum(x.docs), sum(x.length)
            FROM (
                SELECT r.kind, t.lexeme, r.sign::bigint AS docs, 0::bigint AS length
                FROM unnest(p_kinds, p_fts, p_signs) AS r(kind, fts, sign),
                     unnest(tsvector_to_array(r.fts)) AS t(lexeme)
                UNION ALL
                SELECT r.kind, '', r.sign,
                       r.sign * coalesce(p_lengths[r.n]::bigint, length(r.fts))
                FROM unnest(p_kinds, p_fts, p_signs) WITH ORDINALITY AS r(kind, fts, sign, n)
            ) AS x
            GROUP BY x.kind, x.lexeme
            HAVING sum(x.docs) <> 0 OR sum(x.length) <> 0
            ORDER BY x.kind, x.lexeme
            ON CONFLICT (group_id, kind, lexeme, id) DO UPDATE
            SET docs = s.docs + excluded.docs, length = s.length + excluded.length
            RETURNING s.kind, s.lexeme, s.docs, s.length
        )
        SELECT array_agg(a.kind), array_agg(a.lexeme) INTO kinds, lexemes FROM added AS a
        WHERE a.docs = 0 AND a.length = 0;
        FOR k, emptied IN
            SELECT e.kind, array_agg(e.lexeme) FROM unnest(kinds, lexemes) AS e(kind, lexeme)
            GROUP BY e.kind
        LOOP
            DELETE FROM timestone.term_stats AS s
            WHERE s.group_id = g AND s.kind = k AND s.lexeme = ANY (emptied) AND s.id = 0;
        END LOOP;
        RETURN;
    END IF;
    -- One pass per group and kind, its lexemes and their deltas in three arrays in
    -- lexeme order (the order its rows are locked in): no join for the planner to
    -- loop over (decision 023).
    FOR grp, k, lexemes, docs, lengths IN
        SELECT d.group_id, d.kind, array_agg(d.lexeme ORDER BY d.lexeme),
               array_agg(d.docs ORDER BY d.lexeme), array_agg(d.length ORDER BY d.lexeme)
        FROM (
            SELECT x.group_id, x.kind, x.lexeme, sum(x.docs)::bigint AS docs,
                   sum(x.length)::bigint AS length
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
            -- pending: another writer holds the lock, or another group's
            INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)
            SELECT grp, k, l.lexeme, l.docs, l.length
            FROM unnest(lexemes, docs, lengths) AS l(lexeme, docs, length);
            CONTINUE;
        END IF;
        WITH pending AS (
            DELETE FROM timestone.term_stats AS s
            WHERE s.group_id = g  -- one group's rows: one shard on Citus
              AND s.kind = k AND s.lexeme = ANY (lexemes) AND s.id > 0
            RETURNING s.lexeme, s.docs, s.length
        ), added AS (
            INSERT INTO timestone.term_stats AS s (id, group_id, kind, lexeme, docs, length)
            OVERRIDING SYSTEM VALUE
            SELECT 0, g, k, a.lexeme, sum(a.docs), sum(a.length)
            FROM (SELECT l.lexeme, l.docs, l.length
                  FROM unnest(lexemes, docs, lengths) AS l(lexeme, docs, length)
                  UNION ALL
                  SELECT p.lexeme, p.docs, p.length FROM pending AS p) AS a
            GROUP BY a.lexeme
            ORDER BY a.lexeme
            ON CONFLICT (group_id, kind, lexeme, id) DO UPDATE
            SET docs = s.docs + excluded.docs, length = s.length + excluded.length
            RETURNING s.lexeme, s.docs, s.length
        )
        SELECT array_agg(a.lexeme) INTO emptied FROM added AS a
        WHERE a.docs = 0 AND a.length = 0;
        IF emptied IS NOT NULL THEN
            DELETE FROM timestone.term_stats AS s
            WHERE s.group_id = g AND s.kind = k AND s.lexeme = ANY (emptied) AND s.id = 0;
        END IF;
    END LOOP;
END
$fn$;

REVOKE ALL ON FUNCTION timestone.note_terms(text[],text[],tsvector[],integer[],integer[]) FROM PUBLIC;
