-- Full-text search ranks by what a row holds, not by what it lacks.
--
-- ts_rank_cd's cost grows with the negations in its query faster than with
-- its size: 400 negated words took 25 ms a row (5 s for 200 facts), 1,400
-- took 90 ms, and a query that only excludes words matches every row of the
-- group, each ranked. A question of a few thousand characters could hold a
-- core for hours.
--
-- A row matches the whole query, as before; it is ranked by the query's
-- positive part (querytree: the query without its negations), the words it
-- was asked for, whose cost is that of a query without negations. Where a
-- matched row holds no negated word (the usual case), the rank is the one
-- the whole query gave. A query with no positive part ('-foo', '-a or -b', 'a or
-- -b') is one the text indexes cannot read: it asks for rows by what they
-- lack, and the full-text list is then empty; the vector and graph lists
-- still answer it. (A word under a double negation, --x, which means x,
-- matches but is no positive part for querytree: it does not rank.)

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
    r tsquery;
BEGIN
    IF g IS NULL OR g = '' OR p_query IS NULL OR numnode(p_query) = 0
       OR querytree(p_query) IN ('T', '') THEN
        RETURN;
    END IF;
    r := querytree(p_query)::tsquery;
    IF p_kind = 'facts' THEN
        -- now: the current versions, open periods and closed ones; as of a moment,
        -- those created by then, and the versions that ended after it (facts_ended).
        -- The function's plans are custom, so the tests of p_as_of fold to constants
        -- and the branch not taken never runs.
        q := timestone.index_query(p_query, 'facts');
        RETURN QUERY
            SELECT x.version_id, x.rank FROM (
                (SELECT f.version_id, ts_rank_cd(f.fts, r) AS rank
                 FROM timestone.facts AS f
                 WHERE f.group_id = g AND f.expired_at IS NULL AND f.invalid_at IS NULL
                   AND f.fts @@ q AND (q = p_query OR ts_match_vq(f.fts, p_query))
                   AND (p_as_of IS NULL OR f.created_at <= p_as_of)
                   AND (p_valid_at IS NULL OR f.valid_at <= p_valid_at)
                   AND (p_relations IS NULL OR f.relation = ANY(p_relations))
                 ORDER BY 2 DESC, 1 LIMIT p_max_rows)
                UNION ALL
                (SELECT f.version_id, ts_rank_cd(f.fts, r) AS rank
                 FROM timestone.facts AS f
                 WHERE f.group_id = g AND f.expired_at IS NULL AND f.invalid_at IS NOT NULL
                   AND f.fts @@ q AND (q = p_query OR ts_match_vq(f.fts, p_query))
                   AND (p_as_of IS NULL OR f.created_at <= p_as_of)
                   AND (p_valid_at IS NULL OR (f.valid_at <= p_valid_at
                        AND f.invalid_at > p_valid_at))
                   AND (p_relations IS NULL OR f.relation = ANY(p_relations))
                 ORDER BY 2 DESC, 1 LIMIT p_max_rows)
                UNION ALL
                (SELECT f.version_id, ts_rank_cd(f.fts, r) AS rank
                 FROM timestone.facts AS f
                 WHERE p_as_of IS NOT NULL AND f.group_id = g AND f.expired_at IS NOT NULL
                   AND f.expired_at > p_as_of AND f.created_at <= p_as_of
                   AND f.fts @@ p_query
                   AND (p_valid_at IS NULL OR (f.valid_at <= p_valid_at
                        AND (f.invalid_at IS NULL OR f.invalid_at > p_valid_at)))
                   AND (p_relations IS NULL OR f.relation = ANY(p_relations))
                 ORDER BY 2 DESC, 1 LIMIT p_max_rows)
            ) AS x
            ORDER BY 2 DESC, 1 LIMIT p_max_rows;
    ELSIF p_kind = 'entities' THEN
        IF p_as_of IS NULL THEN
            q := timestone.index_query(p_query, 'entities');
            RETURN QUERY
                SELECT e.version_id, ts_rank_cd(e.fts, r)
                FROM timestone.entities AS e
                WHERE e.group_id = g AND e.expired_at IS NULL
                  AND e.fts @@ q AND (q = p_query OR ts_match_vq(e.fts, p_query))
                  AND (p_labels IS NULL OR e.labels && p_labels)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT e.version_id, ts_rank_cd(e.fts, r)
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
                SELECT p.version_id, ts_rank_cd(p.fts, r)
                FROM timestone.episodes AS p
                WHERE p.group_id = g AND p.expired_at IS NULL
                  AND p.fts @@ q AND (q = p_query OR ts_match_vq(p.fts, p_query))
                  AND (p_valid_at IS NULL OR p.reference_time <= p_valid_at)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT p.version_id, ts_rank_cd(p.fts, r)
                FROM timestone.episodes AS p
                WHERE p.group_id = g AND p.created_at <= p_as_of
                  AND (p.expired_at IS NULL OR p.expired_at > p_as_of) AND p.fts @@ p_query
                  AND (p_valid_at IS NULL OR p.reference_time <= p_valid_at)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        END IF;
    ELSIF p_kind = 'communities' THEN
        IF p_as_of IS NULL THEN
            RETURN QUERY
                SELECT c.version_id, ts_rank_cd(c.fts, r)
                FROM timestone.communities AS c
                WHERE c.group_id = g AND c.expired_at IS NULL AND c.fts @@ p_query
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT c.version_id, ts_rank_cd(c.fts, r)
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
