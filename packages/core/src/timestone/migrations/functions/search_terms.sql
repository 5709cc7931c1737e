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
-- Filters as search_text's: as of a system time (the versions held then, ranked by
-- the statistics of the rows held then: the search made then, whatever was written
-- since), valid at a world time, relations, labels.
-- No statement of it scans a table: the statistics are read through their one
-- index (migration 0040) by group, kind and lexeme, the rows through the text
-- indexes. A plan made on a new group's statistics, a page of them, was a scan,
-- and a connection kept it as they grew. As of a moment, the statistics are counted
-- from the rows (term_stats holds those of now): the group's rows read once through
-- its key, each lexeme's current rows through the text index (docs/as-of-search.md).
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
    held_of text;
    r text;
    ended uuid[];
    held_lexemes text[];
    held_dfs double precision[];
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
    IF p_as_of IS NULL THEN
        -- now: the group's statistics (term_stats), kept current by the writes
        SELECT sum(s.docs), sum(s.length) INTO n, total FROM timestone.term_stats AS s
        WHERE s.group_id = g AND s.kind = p_kind AND s.lexeme = '';
        IF coalesce(n, 0) <= 0 THEN
            RETURN;
        END IF;
        avgdl := greatest(total / n, 1);
        -- the question's lexemes the group's rows hold, the MAX_TERMS rarest, rarest first
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
    ELSE
        -- As of a moment: the statistics of the rows of the kind held then, counted as
        -- note_terms counts the current rows (a row a document; its length its words for
        -- the episode kinds, its lexemes for the others; 'told episodes' the episodes
        -- that are not records of facts), so that the lexemes chosen, their weights and
        -- the scores are those of the search made then. The rows held then are the
        -- current ones created by then and the versions that ended after it: the group's
        -- rows are read once through its key for their number and length (the ids of
        -- the ended ones kept), and each lexeme's rows counted, the current ones through
        -- the text index, the ended ones among those ids.
        held_of := CASE p_kind
            WHEN 'facts' THEN 'timestone.facts'
            WHEN 'entities' THEN 'timestone.entities'
            WHEN 'communities' THEN 'timestone.communities'
            ELSE 'timestone.episodes' END || ' AS r WHERE r.group_id = $1'
            || CASE WHEN p_kind = 'told episodes' THEN ' AND r.source <> ''facts''' ELSE '' END;
        EXECUTE 'SELECT count(*), sum('
            || CASE WHEN p_kind IN ('episodes', 'told episodes')
                    THEN 'coalesce(r.fts_words::bigint, length(r.fts))'
                    ELSE 'length(r.fts)' END
            || '), array_agg(r.version_id) FILTER (WHERE r.expired_at IS NOT NULL) FROM '
            || held_of || ' AND r.created_at <= $2 AND (r.expired_at IS NULL OR r.expired_at > $2)'
        INTO n, total, ended USING g, p_as_of;
        IF coalesce(n, 0) <= 0 THEN
            RETURN;
        END IF;
        avgdl := greatest(total / n, 1);
        -- each distinct lexeme of the question held by a row then, and its rows: the
        -- current ones created by then (the text index), the ended ones held then
        EXECUTE 'SELECT array_agg(u.lexeme), array_agg(u.df) FROM (SELECT x.lexeme,'
            ' ((SELECT count(*) FROM ' || held_of || ' AND r.expired_at IS NULL'
            ' AND r.fts @@ x.q AND r.created_at <= $2)'
            || CASE WHEN ended IS NULL THEN '' ELSE
                   ' + (SELECT count(*) FROM ' || held_of || ' AND r.version_id = ANY($4)'
                   ' AND r.fts @@ x.q)' END
            || ')::double precision AS df'
            ' FROM (SELECT DISTINCT y AS lexeme, (chr(39) || replace(replace(y, chr(92),'
            ' chr(92) || chr(92)), chr(39), chr(39) || chr(39)) || chr(39))::tsquery AS q'
            ' FROM unnest($3) AS y WHERE y IS NOT NULL AND y <> '''') AS x'
            ' OFFSET 0) AS u WHERE u.df > 0'  -- each count made once
        INTO held_lexemes, held_dfs USING g, p_as_of, p_terms, ended;
        -- chosen and weighed as above, by the statistics of then
        SELECT array_agg(t.lexeme ORDER BY t.nr),
               array_agg(ln(1 + (n - t.df + 0.5) / (t.df + 0.5)) ORDER BY t.nr),
               array_agg(t.lexeme ORDER BY t.nr) FILTER (
                   WHERE t.running <= common_rows::bigint AND (t.nr = 1
                        OR (t.running <= candidate_rows::bigint
                            AND (2 * t.df <= n OR t.running <= p_max_rows))))
        INTO lexemes, idfs, chosen
        FROM (SELECT k.lexeme, k.df, sum(k.df) OVER (ORDER BY k.df, k.lexeme) AS running,
                     row_number() OVER (ORDER BY k.df, k.lexeme) AS nr
              FROM (SELECT d.lexeme, d.df FROM unnest(held_lexemes, held_dfs) AS d(lexeme, df)
                    ORDER BY 2, 1 LIMIT 64) AS k) AS t;
    END IF;
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
    ELSE
        -- the row of the kind held: now, a current one; as of a moment, a current one
        -- created by then (through the text index), or one of the versions ended after
        -- it (their ids, read with the statistics above, by key)
        r := CASE p_kind WHEN 'entities' THEN 'e' WHEN 'communities' THEN 'c' ELSE 'p' END;
        rows_of := CASE p_kind
            WHEN 'entities' THEN
                'SELECT e.version_id, e.fts FROM timestone.entities AS e'
                ' WHERE e.group_id = $1 AND e.fts @@ $2'
                ' AND ($6 IS NULL OR e.labels && $6) AND %1$s.%2$s'
            WHEN 'communities' THEN
                'SELECT c.version_id, c.fts FROM timestone.communities AS c'
                ' WHERE c.group_id = $1 AND c.fts @@ $2 AND %1$s.%2$s'
            ELSE
                'SELECT p.version_id, p.fts, p.fts_words FROM timestone.episodes AS p'
                ' WHERE p.group_id = $1 AND p.fts @@ $2'
                ' AND ($3 IS NULL OR p.reference_time <= $3)'
                || CASE WHEN p_kind = 'told episodes' THEN ' AND p.source <> ''facts'''
                        ELSE '' END
                || ' AND %1$s.%2$s' END;
        IF p_as_of IS NULL THEN
            rows_of := format(rows_of, r, 'expired_at IS NULL');
        ELSE
            rows_of := format(rows_of, r, 'expired_at IS NULL AND '
                              || r || '.created_at <= $4')
                || CASE WHEN ended IS NULL THEN '' ELSE ' UNION ALL '
                        || format(rows_of, r, 'version_id = ANY('
                                  || quote_literal(ended::text) || '::uuid[])') END;
        END IF;
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
