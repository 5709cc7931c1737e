-- Full-text ranking made for questions: Okapi BM25 over per-group term statistics.
--
-- A question is not a conjunction: "When did Caroline go to the LGBTQ support
-- group?" is answered by a turn that says "I went to a LGBTQ support group".
-- search_terms (below) lets any of the question's lexemes match and scores each
-- row like BM25: for each lexeme, its inverse document frequency in the group
-- times its saturated frequency in the row, the row's length normalised by the
-- group's average. ts_rank_cd has no inverse document frequency: "group" and
-- "LGBTQ" counted alike.
--
-- The statistics: term_stats holds, per group and kind (facts, entities,
-- episodes, told episodes, communities), how many current rows hold each lexeme,
-- and under the lexeme '' how many current rows there are and their total length
-- (distinct lexemes, length(fts)). Statement-level triggers with transition
-- tables keep it exact in the transaction that writes: an insert adds the new
-- current rows, an expiry (the one column updated in place) or a delete (a
-- purge) removes them, and a rollback of the transaction takes its deltas with
-- it. Nothing of one group is counted in another's.
--
-- Writers of one group run side by side (a shared group lock): a counter row
-- per lexeme, updated in place, would serialize them on their common words and
-- could deadlock two multi-statement writes. Each statement instead inserts its
-- deltas (no conflict, no lock), and folds the rows of the lexemes it touched
-- into one when no other writer of the kind is folding (a transaction-level
-- try-lock): a row deleted by a fold is deleted once, so the sums stay exact
-- under any interleaving, and a lexeme keeps a few rows, not one per write.
--
-- Only SECURITY DEFINER functions read or write the table (the library role
-- has no privilege on it), and each reads only the group of its transaction.

CREATE TABLE timestone.term_stats (
    id       bigint GENERATED ALWAYS AS IDENTITY,
    group_id text   NOT NULL,
    kind     text   NOT NULL,
    lexeme   text   NOT NULL,
    docs     bigint NOT NULL,
    length   bigint NOT NULL,
    PRIMARY KEY (group_id, id)  -- group first, as every key (a tenant's rows on one shard)
);
CREATE INDEX term_stats_key ON timestone.term_stats (group_id, kind, lexeme);
ALTER TABLE timestone.term_stats ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON timestone.term_stats FROM PUBLIC;

-- Add the rows (sign 1) or remove them (sign -1), then fold what they touched.
CREATE FUNCTION timestone.note_terms(
    p_groups text[], p_kinds text[], p_fts tsvector[], p_signs integer[]
)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
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
        SELECT r.group_id, r.kind, '', r.sign, r.sign * length(r.fts)
        FROM unnest(p_groups, p_kinds, p_fts, p_signs) AS r(group_id, kind, fts, sign)
    ) AS d
    GROUP BY d.group_id, d.kind, d.lexeme
    HAVING sum(d.docs) <> 0 OR sum(d.length) <> 0;
    -- the fold, of the first group's rows (a write is of one group)
    IF NOT pg_try_advisory_xact_lock(
            hashtextextended('timestone-term-stats' || chr(31) || p_groups[1], 0)) THEN
        RETURN;  -- another writer is folding: these deltas are folded by a later write
    END IF;
    WITH touched AS (
        SELECT DISTINCT r.group_id, r.kind, t.lexeme
        FROM unnest(p_groups, p_kinds, p_fts) AS r(group_id, kind, fts),
             unnest(array_append(tsvector_to_array(r.fts), '')) AS t(lexeme)
        WHERE r.group_id = p_groups[1]
    ), gone AS (
        DELETE FROM timestone.term_stats AS s USING touched AS t
        WHERE s.group_id = p_groups[1]  -- one group's rows: one shard on Citus
          AND s.group_id = t.group_id AND s.kind = t.kind AND s.lexeme = t.lexeme
        RETURNING s.group_id, s.kind, s.lexeme, s.docs, s.length
    )
    INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)
    SELECT g.group_id, g.kind, g.lexeme, sum(g.docs), sum(g.length)
    FROM gone AS g GROUP BY g.group_id, g.kind, g.lexeme
    HAVING sum(g.docs) <> 0 OR sum(g.length) <> 0;
END
$fn$;
REVOKE ALL ON FUNCTION timestone.note_terms(text[], text[], tsvector[], integer[]) FROM PUBLIC;

-- The trigger of facts, entities and communities (kind: the trigger's argument).
CREATE FUNCTION timestone.count_terms()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
DECLARE
    groups text[];
    kinds text[];
    vectors tsvector[];
    signs integer[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(r.group_id), array_agg(TG_ARGV[0]), array_agg(r.fts), array_agg(1)
        INTO groups, kinds, vectors, signs
        FROM new_rows AS r WHERE r.expired_at IS NULL;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(r.group_id), array_agg(TG_ARGV[0]), array_agg(r.fts), array_agg(-1)
        INTO groups, kinds, vectors, signs
        FROM old_rows AS r WHERE r.expired_at IS NULL;
    ELSE
        SELECT array_agg(x.group_id), array_agg(TG_ARGV[0]), array_agg(x.fts),
               array_agg(x.sign)
        INTO groups, kinds, vectors, signs
        FROM (SELECT r.group_id, r.fts, -1 AS sign FROM old_rows AS r
              WHERE r.expired_at IS NULL
              UNION ALL
              SELECT r.group_id, r.fts, 1 FROM new_rows AS r WHERE r.expired_at IS NULL) AS x;
    END IF;
    PERFORM timestone.note_terms(groups, kinds, vectors, signs);
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION timestone.count_terms() FROM PUBLIC;

-- The trigger of episodes: every episode under 'episodes', and those that are not
-- the record of structured facts also under 'told episodes' (migration 0031).
CREATE FUNCTION timestone.count_episode_terms()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
DECLARE
    groups text[];
    kinds text[];
    vectors tsvector[];
    signs integer[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(x.group_id), array_agg(x.kind), array_agg(x.fts), array_agg(1)
        INTO groups, kinds, vectors, signs
        FROM new_rows AS r
        CROSS JOIN LATERAL (VALUES (r.group_id, 'episodes', r.fts),
                                   (CASE WHEN r.source <> 'facts' THEN r.group_id END,
                                    'told episodes', r.fts)) AS x(group_id, kind, fts)
        WHERE r.expired_at IS NULL AND x.group_id IS NOT NULL;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(x.group_id), array_agg(x.kind), array_agg(x.fts), array_agg(-1)
        INTO groups, kinds, vectors, signs
        FROM old_rows AS r
        CROSS JOIN LATERAL (VALUES (r.group_id, 'episodes', r.fts),
                                   (CASE WHEN r.source <> 'facts' THEN r.group_id END,
                                    'told episodes', r.fts)) AS x(group_id, kind, fts)
        WHERE r.expired_at IS NULL AND x.group_id IS NOT NULL;
    ELSE
        SELECT array_agg(x.group_id), array_agg(x.kind), array_agg(x.fts), array_agg(y.sign)
        INTO groups, kinds, vectors, signs
        FROM (SELECT r.group_id, r.source, r.fts, -1 AS sign FROM old_rows AS r
              WHERE r.expired_at IS NULL
              UNION ALL
              SELECT r.group_id, r.source, r.fts, 1 FROM new_rows AS r
              WHERE r.expired_at IS NULL) AS y
        CROSS JOIN LATERAL (VALUES (y.group_id, 'episodes', y.fts),
                                   (CASE WHEN y.source <> 'facts' THEN y.group_id END,
                                    'told episodes', y.fts)) AS x(group_id, kind, fts)
        WHERE x.group_id IS NOT NULL;
    END IF;
    PERFORM timestone.note_terms(groups, kinds, vectors, signs);
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION timestone.count_episode_terms() FROM PUBLIC;

DO $triggers$
DECLARE
    t text;
    fn text;
    arg text;
BEGIN
    FOREACH t IN ARRAY ARRAY['facts', 'entities', 'episodes', 'communities'] LOOP
        fn := CASE WHEN t = 'episodes' THEN 'count_episode_terms' ELSE 'count_terms' END;
        arg := CASE WHEN t = 'episodes' THEN '' ELSE quote_literal(t) END;
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON timestone.%I'
                       ' REFERENCING NEW TABLE AS new_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION timestone.%I(%s)',
                       t || '_terms_insert', t, fn, arg);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON timestone.%I'
                       ' REFERENCING OLD TABLE AS old_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION timestone.%I(%s)',
                       t || '_terms_delete', t, fn, arg);
        EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON timestone.%I'
                       ' REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION timestone.%I(%s)',
                       t || '_terms_update', t, fn, arg);
    END LOOP;
END
$triggers$;

-- The rows already written.
INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)
SELECT d.group_id, d.kind, d.lexeme, sum(d.docs), sum(d.length)
FROM (
    SELECT r.group_id, r.kind, t.lexeme, 1::bigint AS docs, 0::bigint AS length
    FROM (SELECT f.group_id, 'facts' AS kind, f.fts FROM timestone.facts AS f
          WHERE f.expired_at IS NULL
          UNION ALL SELECT e.group_id, 'entities', e.fts FROM timestone.entities AS e
          WHERE e.expired_at IS NULL
          UNION ALL SELECT c.group_id, 'communities', c.fts FROM timestone.communities AS c
          WHERE c.expired_at IS NULL
          UNION ALL SELECT p.group_id, 'episodes', p.fts FROM timestone.episodes AS p
          WHERE p.expired_at IS NULL
          UNION ALL SELECT p.group_id, 'told episodes', p.fts FROM timestone.episodes AS p
          WHERE p.expired_at IS NULL AND p.source <> 'facts') AS r,
         unnest(tsvector_to_array(r.fts)) AS t(lexeme)
    UNION ALL
    SELECT r.group_id, r.kind, '', 1, length(r.fts)
    FROM (SELECT f.group_id, 'facts' AS kind, f.fts FROM timestone.facts AS f
          WHERE f.expired_at IS NULL
          UNION ALL SELECT e.group_id, 'entities', e.fts FROM timestone.entities AS e
          WHERE e.expired_at IS NULL
          UNION ALL SELECT c.group_id, 'communities', c.fts FROM timestone.communities AS c
          WHERE c.expired_at IS NULL
          UNION ALL SELECT p.group_id, 'episodes', p.fts FROM timestone.episodes AS p
          WHERE p.expired_at IS NULL
          UNION ALL SELECT p.group_id, 'told episodes', p.fts FROM timestone.episodes AS p
          WHERE p.expired_at IS NULL AND p.source <> 'facts') AS r
) AS d
GROUP BY d.group_id, d.kind, d.lexeme;

-- The episodes next to one in the group's timeline (reference time, then id), read
-- for the neighbours of a hit (search_sql's episodes statement).
CREATE INDEX episodes_timeline ON timestone.episodes (group_id, reference_time, id)
    WHERE expired_at IS NULL;

-- The rows of kind p_kind that hold any of p_terms (lexemes of the question, as
-- to_tsvector gives them), best first by Okapi BM25 (k1 1.2, b 0.75) over the
-- group's statistics. The rare lexemes choose the candidates: in increasing
-- order of the rows that hold them, as long as those rows add up to no more than
-- 5,000 (the setting timestone.text_common_rows, as in 0030), and, but for the
-- rarest, held by half the rows or fewer unless all their rows fit in the list;
-- the common ones only add to the score of the rows chosen. (A lexeme most rows hold weighs next to nothing: as a
-- chooser it filled the list with rows tied on it, "works at" in every fact.) A question
-- whose rarest lexeme is held by more rows than that gets no list (the vector
-- list answers it), as a question of common words only did before (0030).
-- Filters as search_text's: as of a system time (the versions held then, the
-- statistics of now), valid at a world time, relations, labels.
CREATE FUNCTION timestone.search_terms(
    p_kind text, p_terms text[], p_as_of timestamptz, p_valid_at timestamptz,
    p_relations text[], p_labels text[], p_max_rows integer
)
RETURNS TABLE (version_id uuid, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 30
SET search_path = pg_catalog, public, pg_temp
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
BEGIN
    IF common_rows !~ '^[0-9]{1,15}$' THEN
        RAISE EXCEPTION 'timestone.text_common_rows must be a whole number of rows, not %',
            common_rows USING ERRCODE = '22023';
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
               WHERE t.running <= common_rows::bigint AND (t.nr = 1 OR 2 * t.df <= n
                    OR t.running <= p_max_rows))
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
        rows_of := 'SELECT p.version_id, p.fts FROM timestone.episodes AS p'
            ' WHERE p.group_id = $1 AND p.fts @@ $2'
            ' AND ($3 IS NULL OR p.reference_time <= $3)'
            || CASE WHEN p_kind = 'told episodes' THEN ' AND p.source <> ''facts''' ELSE '' END
            || ' AND '
            || CASE WHEN p_as_of IS NULL THEN 'p.expired_at IS NULL'
                    ELSE 'p.created_at <= $4 AND (p.expired_at IS NULL OR p.expired_at > $4)'
               END;
    END IF;
    -- The score: the weight of each lexeme the row holds (a match of that lexeme
    -- alone, a binary search of the row's sorted vector), the row's length
    -- normalised; a lexeme counts once per row (BM25 of a term frequency of one:
    -- reading each candidate's positions to count them cost 35 us a row, 12 ms
    -- for the 350 rows of a common name in a conversation).
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
REVOKE ALL ON FUNCTION timestone.search_terms(
    text, text[], timestamptz, timestamptz, text[], text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.search_terms(
    text, text[], timestamptz, timestamptz, text[], text[], integer) TO timestone_app;
