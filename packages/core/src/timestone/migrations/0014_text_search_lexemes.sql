-- Full-text search reads fewer postings.
--
-- A GIN index answers `a & b & c` by walking the posting list of every
-- lexeme, and its cost is the length of those lists. Measured at 1M facts
-- (a question like "Where does Karin Tal 11 live?"): the three name lexemes
-- are each in about 25k facts and cost 4.6 ms together, and `live`, in a
-- fifth of all facts, added 2.3 ms while removing a handful of rows.
--
-- Two changes, neither of which changes what a search finds:
--
-- 1. The current facts' text index is split like the vector indexes (0012):
--    periods still open, and periods closed in world time. A search at a
--    moment reads the open index and only the closed periods ending after
--    that moment; a third of the postings at 1M facts are closed periods.
--
-- 2. The index reads only the lexemes that narrow the match. When a query is
--    a plain conjunction of lexemes, those the table's statistics (ANALYZE's
--    most common elements) put in more than a tenth of the rows are left out
--    of the index condition, as long as one lexeme is left; every row the
--    index returns is then checked against the whole query (`ts_match_vq`,
--    a function call the planner does not turn back into an index condition;
--    a query read whole skips that check, the plan folding `q = p_query`).
--    The match, and so the rank, is the same; only the work differs. Queries
--    with OR, NOT or phrases, tables not yet analyzed and lexemes that are not
--    common are read as written, and so is every query on a table of fewer
--    than 250,000 rows (the setting `timestone.text_narrowing_rows` changes
--    that number): there the lists are short and the statistics lookup
--    (0.4 ms) cost more than it saved, measured at 10k and 100k facts; at 1M
--    it saved 2.8 ms a question.

DROP INDEX timestone.facts_fts;
CREATE INDEX facts_fts_open ON timestone.facts USING gin (fts)
    WITH (gin_pending_list_limit = 256)
    WHERE expired_at IS NULL AND invalid_at IS NULL;
CREATE INDEX facts_fts_closed ON timestone.facts USING gin (fts)
    WITH (gin_pending_list_limit = 256)
    WHERE expired_at IS NULL AND invalid_at IS NOT NULL;

-- The part of `p_query` an index should read on table `p_table` (see above).
-- Its statistics lookup keeps one plan: the caller plans its own query per call,
-- and planning the `pg_stats` view each time cost more (0.9 ms) than reading it.
CREATE FUNCTION timestone.index_query(p_query tsquery, p_table text)
RETURNS tsquery
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    parts text[];
    kept text[];
    lexemes text[];
    shares real[];
    floor_rows text := coalesce(
        nullif(current_setting('timestone.text_narrowing_rows', true), ''), '250000');
BEGIN
    IF floor_rows !~ '^[0-9]{1,15}$' THEN
        RAISE EXCEPTION 'timestone.text_narrowing_rows must be a whole number of rows, not %',
            floor_rows USING ERRCODE = '22023';
    END IF;
    IF p_query IS NULL OR numnode(p_query) < 3
       OR (SELECT c.reltuples FROM pg_class AS c
           WHERE c.oid = ('timestone.' || p_table)::regclass) < floor_rows::real THEN
        RETURN p_query;
    END IF;
    -- The text form of a conjunction is 'a' & 'b' & ...: a lexeme holds no space,
    -- quotes inside one are doubled, and any other operator fails the pattern.
    parts := string_to_array(p_query::text, ' & ');
    IF EXISTS (SELECT 1 FROM unnest(parts) AS p WHERE p !~ '^''([^''\\]|'''')*''$') THEN
        RETURN p_query;
    END IF;
    SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs
    INTO lexemes, shares
    FROM pg_stats AS s
    WHERE s.schemaname = 'timestone' AND s.tablename = p_table AND s.attname = 'fts';
    IF lexemes IS NULL THEN
        RETURN p_query;
    END IF;
    SELECT array_agg(p.part ORDER BY p.n) INTO kept
    FROM unnest(parts) WITH ORDINALITY AS p(part, n)
    WHERE coalesce(shares[array_position(
              lexemes, replace(substr(p.part, 2, length(p.part) - 2), '''''', ''''))], 0) <= 0.1;
    IF kept IS NULL OR cardinality(kept) = cardinality(parts) THEN
        RETURN p_query;
    END IF;
    RETURN array_to_string(kept, ' & ')::tsquery;
END
$fn$;
REVOKE ALL ON FUNCTION timestone.index_query(tsquery, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION timestone.search_text(
    p_kind text, p_query tsquery, p_as_of timestamptz, p_valid_at timestamptz,
    p_relations text[], p_labels text[], p_max_rows integer
)
RETURNS TABLE (version_id uuid, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 30
SET search_path = pg_catalog, public
SET plan_cache_mode = force_custom_plan
AS $fn$
DECLARE
    g text := current_setting('timestone.group_id', true);
    q tsquery;
BEGIN
    IF g IS NULL OR g = '' OR p_query IS NULL OR numnode(p_query) = 0 THEN
        RETURN;
    END IF;
    IF p_kind = 'facts' THEN
        IF p_as_of IS NULL THEN
            q := timestone.index_query(p_query, 'facts');
            RETURN QUERY
                SELECT x.version_id, x.rank FROM (
                    (SELECT f.version_id, ts_rank_cd(f.fts, p_query) AS rank
                     FROM timestone.facts AS f
                     WHERE f.group_id = g AND f.expired_at IS NULL AND f.invalid_at IS NULL
                       AND f.fts @@ q AND (q = p_query OR ts_match_vq(f.fts, p_query))
                       AND (p_valid_at IS NULL OR f.valid_at <= p_valid_at)
                       AND (p_relations IS NULL OR f.relation = ANY(p_relations))
                     ORDER BY 2 DESC, 1 LIMIT p_max_rows)
                    UNION ALL
                    (SELECT f.version_id, ts_rank_cd(f.fts, p_query) AS rank
                     FROM timestone.facts AS f
                     WHERE f.group_id = g AND f.expired_at IS NULL AND f.invalid_at IS NOT NULL
                       AND f.fts @@ q AND (q = p_query OR ts_match_vq(f.fts, p_query))
                       AND (p_valid_at IS NULL OR (f.valid_at <= p_valid_at
                            AND f.invalid_at > p_valid_at))
                       AND (p_relations IS NULL OR f.relation = ANY(p_relations))
                     ORDER BY 2 DESC, 1 LIMIT p_max_rows)
                ) AS x
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT f.version_id, ts_rank_cd(f.fts, p_query)
                FROM timestone.facts AS f
                WHERE f.group_id = g AND f.created_at <= p_as_of
                  AND (f.expired_at IS NULL OR f.expired_at > p_as_of) AND f.fts @@ p_query
                  AND (p_valid_at IS NULL OR (f.valid_at <= p_valid_at
                       AND (f.invalid_at IS NULL OR f.invalid_at > p_valid_at)))
                  AND (p_relations IS NULL OR f.relation = ANY(p_relations))
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        END IF;
    ELSIF p_kind = 'entities' THEN
        IF p_as_of IS NULL THEN
            q := timestone.index_query(p_query, 'entities');
            RETURN QUERY
                SELECT e.version_id, ts_rank_cd(e.fts, p_query)
                FROM timestone.entities AS e
                WHERE e.group_id = g AND e.expired_at IS NULL
                  AND e.fts @@ q AND (q = p_query OR ts_match_vq(e.fts, p_query))
                  AND (p_labels IS NULL OR e.labels && p_labels)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT e.version_id, ts_rank_cd(e.fts, p_query)
                FROM timestone.entities AS e
                WHERE e.group_id = g AND e.created_at <= p_as_of
                  AND (e.expired_at IS NULL OR e.expired_at > p_as_of) AND e.fts @@ p_query
                  AND (p_labels IS NULL OR e.labels && p_labels)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        END IF;
    ELSIF p_kind = 'episodes' THEN
        IF p_as_of IS NULL THEN
            q := timestone.index_query(p_query, 'episodes');
            RETURN QUERY
                SELECT p.version_id, ts_rank_cd(p.fts, p_query)
                FROM timestone.episodes AS p
                WHERE p.group_id = g AND p.expired_at IS NULL
                  AND p.fts @@ q AND (q = p_query OR ts_match_vq(p.fts, p_query))
                  AND (p_valid_at IS NULL OR p.reference_time <= p_valid_at)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT p.version_id, ts_rank_cd(p.fts, p_query)
                FROM timestone.episodes AS p
                WHERE p.group_id = g AND p.created_at <= p_as_of
                  AND (p.expired_at IS NULL OR p.expired_at > p_as_of) AND p.fts @@ p_query
                  AND (p_valid_at IS NULL OR p.reference_time <= p_valid_at)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        END IF;
    ELSIF p_kind = 'communities' THEN
        IF p_as_of IS NULL THEN
            RETURN QUERY
                SELECT c.version_id, ts_rank_cd(c.fts, p_query)
                FROM timestone.communities AS c
                WHERE c.group_id = g AND c.expired_at IS NULL AND c.fts @@ p_query
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT c.version_id, ts_rank_cd(c.fts, p_query)
                FROM timestone.communities AS c
                WHERE c.group_id = g AND c.created_at <= p_as_of
                  AND (c.expired_at IS NULL OR c.expired_at > p_as_of) AND c.fts @@ p_query
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        END IF;
    ELSE
        RAISE EXCEPTION 'unknown search kind %', p_kind USING ERRCODE = '22023';
    END IF;
END
$fn$;
