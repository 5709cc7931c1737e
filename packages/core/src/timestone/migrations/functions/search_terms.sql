-- timestone.search_terms: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0036.
-- Episodes: term frequency and length in words since migration 0038.

-- The rows of kind p_kind that hold any of p_terms (lexemes of the question, as
-- to_tsvector gives them), best first by Okapi BM25 (k1 1.2, b 0.75) over the
-- group's statistics. The rare lexemes choose the candidates: in increasing
-- order of the rows that hold them, the rarest if its rows are no more than 5,000
-- (the setting timestone.text_common_rows, as in 0030), each next one as long as
-- the rows of those chosen add up to no more than 500 (the setting
-- timestone.text_candidate_rows) and, unless all their rows fit in the list, it is
-- held by half the rows or fewer; the others only add to the score of the rows
-- chosen. This is the accumulator limit of term-at-a-time ranking (Moffat and
-- Zobel's "continue" strategy): a row that holds only the commoner words of a
-- question seldom leads it, and scoring every such row cost a search of document
-- chunks most of its time (docs/decisions/032-a-bounded-text-list.md). (A lexeme
-- most rows hold weighs next to nothing: as a chooser it filled the list with rows
-- tied on it, "works at" in every fact.) A question whose rarest lexeme is held by
-- more than 5,000 rows gets no list (the vector list answers it), as a question of
-- common words only did before (0030).
-- Filters as search_text's: as of a system time (the versions held then, the
-- statistics of now), valid at a world time, relations, labels.
-- No statement of it scans a table: the statistics are read through their one
-- index (migration 0040) by group, kind and lexeme, the rows through the text
-- indexes. A plan made on a new group's statistics, a page of them, was a scan,
-- and a connection kept it as they grew.
CREATE OR REPLACE FUNCTION timestone.search_terms(
    p_kind text, p_terms text[], p_as_of timestamptz, p_valid_at timestamptz,
    p_relations text[], p_labels text[], p_max_rows integer
)
RETURNS TABLE (version_id uuid, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 30
SET search_path = pg_catalog, public, pg_temp
SET enable_seqscan = off
AS $fn$
DECLARE
    g text := current_setting('timestone.group_id', true);
    n double precision;
    total double precision;
    avgdl double precision;
    lexemes text[];
    idfs double precision[];
    chosen text[];
    q tsquery;
    quoted text[];
    rows_of text;
    score text;
    common_rows text := coalesce(
        nullif(current_setting('timestone.text_common_rows', true), ''), '5000');
    candidate_rows text := coalesce(
        nullif(current_setting('timestone.text_candidate_rows', true), ''), '500');
BEGIN
    IF common_rows !~ '^[0-9]{1,15}$' THEN
        RAISE EXCEPTION 'timestone.text_common_rows must be a whole number of rows, not %',
            common_rows USING ERRCODE = '22023';
    END IF;
    IF candidate_rows !~ '^[0-9]{1,15}$' THEN
        RAISE EXCEPTION 'timestone.text_candidate_rows must be a whole number of rows, not %',
            candidate_rows USING ERRCODE = '22023';
    END IF;
    IF p_kind IS NULL OR p_kind NOT IN ('facts', 'entities', 'episodes', 'told episodes',
                                        'communities') THEN
        RAISE EXCEPTION 'unknown search kind %', p_kind USING ERRCODE = '22023';
    END IF;
    IF g IS NULL OR g = '' OR coalesce(cardinality(p_terms), 0) = 0 THEN
        RETURN;
    END IF;
    SELECT sum(s.docs), sum(s.length) INTO n, total FROM timestone.term_stats AS s
    WHERE s.group_id = g AND s.kind = p_kind AND s.lexeme = '';
    IF coalesce(n, 0) <= 0 THEN
        RETURN;
    END IF;
    avgdl := greatest(total / n, 1);
    -- the question's lexemes the group's rows hold (as of a moment, every lexeme: the
    -- rows held then may hold others), the MAX_TERMS rarest, rarest first
    SELECT array_agg(t.lexeme ORDER BY t.nr),
           array_agg(ln(1 + (n - t.df + 0.5) / (t.df + 0.5)) ORDER BY t.nr),
           array_agg(t.lexeme ORDER BY t.nr) FILTER (
               WHERE t.running <= common_rows::bigint AND (t.nr = 1
                    OR (t.running <= candidate_rows::bigint
                        AND (2 * t.df <= n OR t.running <= p_max_rows))))
    INTO lexemes, idfs, chosen
    FROM (SELECT k.lexeme, k.df, sum(k.df) OVER (ORDER BY k.df, k.lexeme) AS running,
                 row_number() OVER (ORDER BY k.df, k.lexeme) AS nr
          FROM (SELECT u.lexeme, greatest(coalesce(d.docs, 0), 0)::double precision AS df
                FROM (SELECT DISTINCT x AS lexeme FROM unnest(p_terms) AS x
                      WHERE x IS NOT NULL AND x <> '') AS u
                LEFT JOIN (SELECT s.lexeme, sum(s.docs) AS docs
                           FROM timestone.term_stats AS s
                           WHERE s.group_id = g AND s.kind = p_kind AND s.lexeme = ANY(p_terms)
                           GROUP BY s.lexeme) AS d ON d.lexeme = u.lexeme
                WHERE coalesce(d.docs, 0) > 0 OR p_as_of IS NOT NULL
                ORDER BY 2, 1 LIMIT 64) AS k) AS t;
    IF coalesce(cardinality(chosen), 0) = 0 THEN
        RETURN;
    END IF;
    -- each lexeme quoted as the tsquery syntax reads it ('' for a quote, \\ for a
    -- backslash); the chosen ones (the first, by rows) joined by OR select the rows
    quoted := ARRAY(SELECT '''' || replace(replace(x.l, '\', '\\'), '''', '''''') || ''''
                    FROM unnest(lexemes) WITH ORDINALITY AS x(l, i) ORDER BY x.i);
    q := array_to_string(quoted[1:cardinality(chosen)], ' | ')::tsquery;
    IF p_kind = 'facts' THEN
        IF p_as_of IS NULL THEN
            -- the open periods and the closed ones, each from its own index (0014)
            rows_of := 'SELECT f.version_id, f.fts FROM timestone.facts AS f'
                ' WHERE f.group_id = $1 AND f.expired_at IS NULL AND f.invalid_at IS NULL'
                ' AND f.fts @@ $2 AND ($3 IS NULL OR f.valid_at <= $3)'
                ' AND ($5 IS NULL OR f.relation = ANY($5))'
                ' UNION ALL SELECT f.version_id, f.fts FROM timestone.facts AS f'
                ' WHERE f.group_id = $1 AND f.expired_at IS NULL AND f.invalid_at IS NOT NULL'
                ' AND f.fts @@ $2 AND ($3 IS NULL OR (f.valid_at <= $3 AND f.invalid_at > $3))'
                ' AND ($5 IS NULL OR f.relation = ANY($5))';
        ELSE
            rows_of := 'SELECT f.version_id, f.fts FROM timestone.facts AS f'
                ' WHERE f.group_id = $1 AND f.created_at <= $4'
                ' AND (f.expired_at IS NULL OR f.expired_at > $4) AND f.fts @@ $2'
                ' AND ($3 IS NULL OR (f.valid_at <= $3'
                ' AND (f.invalid_at IS NULL OR f.invalid_at > $3)))'
                ' AND ($5 IS NULL OR f.relation = ANY($5))';
        END IF;
    ELSIF p_kind = 'entities' THEN
        rows_of := 'SELECT e.version_id, e.fts FROM timestone.entities AS e'
            ' WHERE e.group_id = $1 AND e.fts @@ $2'
            ' AND ($6 IS NULL OR e.labels && $6) AND '
            || CASE WHEN p_as_of IS NULL THEN 'e.expired_at IS NULL'
                    ELSE 'e.created_at <= $4 AND (e.expired_at IS NULL OR e.expired_at > $4)'
               END;
    ELSIF p_kind = 'communities' THEN
        rows_of := 'SELECT c.version_id, c.fts FROM timestone.communities AS c'
            ' WHERE c.group_id = $1 AND c.fts @@ $2 AND '
            || CASE WHEN p_as_of IS NULL THEN 'c.expired_at IS NULL'
                    ELSE 'c.created_at <= $4 AND (c.expired_at IS NULL OR c.expired_at > $4)'
               END;
    ELSE
        rows_of := 'SELECT p.version_id, p.fts, p.fts_words FROM timestone.episodes AS p'
            ' WHERE p.group_id = $1 AND p.fts @@ $2'
            ' AND ($3 IS NULL OR p.reference_time <= $3)'
            || CASE WHEN p_kind = 'told episodes' THEN ' AND p.source <> ''facts''' ELSE '' END
            || ' AND '
            || CASE WHEN p_as_of IS NULL THEN 'p.expired_at IS NULL'
                    ELSE 'p.created_at <= $4 AND (p.expired_at IS NULL OR p.expired_at > $4)'
               END;
    END IF;
    IF p_kind IN ('episodes', 'told episodes') THEN
        -- An episode's score counts each lexeme as often as it occurs (the positions
        -- the vector holds for it) and its length in words (fts_words, migration
        -- 0038): Okapi BM25 as written. The question's lexemes are marked in the
        -- row's vector and the marked ones kept (setweight, ts_filter: one pass over
        -- the vector each), so that only their positions are read.
        RETURN QUERY EXECUTE
            'SELECT c.version_id, (SELECT sum(($8)[i.n] * t.tf * 2.2 / (t.tf + 1.2'
            ' * (0.25 + 0.75 * c.fts_words / $9))) FROM (SELECT u.lexeme,'
            ' greatest(cardinality(u.positions), 1) AS tf'
            ' FROM unnest(ts_filter(setweight(c.fts, ''A'', $7), ''{a}'')) AS u) AS t'
            ' JOIN unnest($7) WITH ORDINALITY AS i(lexeme, n) ON i.lexeme = t.lexeme)::real'
            ' AS rank FROM (' || rows_of || ') AS c ORDER BY 2 DESC, 1 LIMIT $10'
            USING g, q, p_valid_at, p_as_of, p_relations, p_labels, lexemes, idfs, avgdl,
                  p_max_rows;
        RETURN;
    END IF;
    -- The score of the other kinds: the weight of each lexeme the row holds (a match
    -- of that lexeme alone, a binary search of the row's sorted vector), the row's
    -- length (its lexemes) normalised; a lexeme counts once per row (BM25 of a term
    -- frequency of one: a fact or a name says a thing once).
    score := array_to_string(ARRAY(
        SELECT format('CASE WHEN c.fts @@ ($11)[%s] THEN ($8)[%s] ELSE 0 END', i, i)
        FROM generate_series(1, cardinality(lexemes)) AS i), ' + ');
    RETURN QUERY EXECUTE
        'SELECT c.version_id, ((' || score || ') * 2.2 / (1 + 1.2 * (0.25 + 0.75'
        ' * length(c.fts) / $9)))::real AS rank'
        ' FROM (' || rows_of || ') AS c ORDER BY 2 DESC, 1 LIMIT $10'
        USING g, q, p_valid_at, p_as_of, p_relations, p_labels, lexemes, idfs, avgdl,
              p_max_rows, quoted::tsquery[];
END
$fn$;

REVOKE ALL ON FUNCTION timestone.search_terms(text,text[],timestamp with time zone,timestamp with time zone,text[],text[],integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.search_terms(text,text[],timestamp with time zone,timestamp with time zone,text[],text[],integer) TO timestone_app;
