-- The facts' full text at a moment (valid_at given, the graph as it is now), for
-- a group holding half the facts table or more, through a plan made once per
-- connection instead of one per call.
--
-- search_text plans its queries for each call (force_custom_plan): the plan for
-- a small share of the table reads the group's own rows, the one for a large
-- share the text index, and only the call knows which. Planning is about half of
-- what the function costs at 100k facts (0.46 ms of 0.88). A group that holds
-- half the table or more is always read through the text index, so its plan can
-- be made once; but the plan made once for the periods that end later read
-- their text index too (0.22 ms), where a plan made per call reads the few
-- periods ending after the moment through facts_closing (0.01 ms), which is why
-- a plan made once gained nothing when it was tried before (docs/retrieval.md).
-- Here those periods are looked up first, through facts_closing, and read back
-- by key; the open periods through the text index, the group's test written so
-- that no plan can read them through a group index instead (a plan made once
-- does not know the group's share, and in a table of many groups would guess it
-- small). Measured on the 100k benchmark corpus, the query alone: 0.51 to 0.53
-- ms against 0.75 to 0.82 for the plan made per call, the same 30 rows for all
-- 300 questions; a search end to end, 0.43 to 0.52 ms less, the same ten facts.
--
-- Which group holds half the table comes from the planner's statistics (the
-- most common values of facts.group_id; at most one group can hold half), which
-- only the owner may read: looked up at most once a minute per connection and
-- kept in the session setting timestone.dominant_group ('<epoch seconds>:<group>').
-- The setting decides a plan, never which rows are read: every statement still
-- tests the group of the transaction. Searches as of a moment, of every period,
-- and a group with 1,000 periods or more ending after the moment are planned per
-- call as before.

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
    held text := current_setting('timestone.dominant_group', true);
    dominant text;
    closing uuid[];
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
        IF p_as_of IS NULL AND p_valid_at IS NOT NULL THEN
            -- the group holding half the table (see above), looked up once a minute
            IF held IS NULL OR held !~ '^[0-9]{1,15}:'
               OR split_part(held, ':', 1)::bigint < extract(epoch FROM now())::bigint - 60 THEN
                SELECT CASE WHEN s.most_common_freqs[1] >= 0.5
                            THEN (s.most_common_vals::text::text[])[1] END
                INTO dominant
                FROM pg_stats AS s
                WHERE s.schemaname = 'timestone' AND s.tablename = 'facts'
                  AND s.attname = 'group_id';
                held := extract(epoch FROM now())::bigint || ':' || coalesce(dominant, '');
                PERFORM set_config('timestone.dominant_group', held, false);
            END IF;
            IF substr(held, strpos(held, ':') + 1) = g THEN
                -- a plan made once (the function's SET ends with it); the periods
                -- ending after the moment by key, unless there are 1,000 or more
                PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
                SELECT array_agg(c.version_id) INTO closing FROM (
                    SELECT c.version_id FROM timestone.facts AS c
                    WHERE c.group_id = g AND c.expired_at IS NULL AND c.invalid_at IS NOT NULL
                      AND c.invalid_at > p_valid_at
                    ORDER BY c.invalid_at LIMIT 1000) AS c;
                IF coalesce(cardinality(closing), 0) < 1000 THEN
                    RETURN QUERY
                        SELECT x.version_id, x.rank FROM (
                            (SELECT f.version_id, ts_rank_cd(f.fts, r) AS rank
                             FROM timestone.facts AS f
                             WHERE (f.group_id = g) IS TRUE AND f.expired_at IS NULL
                               AND f.invalid_at IS NULL AND f.fts @@ q
                               AND (q = p_query OR ts_match_vq(f.fts, p_query))
                               AND f.valid_at <= p_valid_at
                               AND (p_relations IS NULL OR f.relation = ANY(p_relations))
                             ORDER BY 2 DESC, 1 LIMIT p_max_rows)
                            UNION ALL
                            (SELECT f.version_id, ts_rank_cd(f.fts, r) AS rank
                             FROM timestone.facts AS f
                             WHERE f.group_id = g AND f.version_id = ANY(closing)
                               AND f.expired_at IS NULL AND f.fts @@ p_query
                               AND f.valid_at <= p_valid_at
                               AND (p_relations IS NULL OR f.relation = ANY(p_relations))
                             ORDER BY 2 DESC, 1 LIMIT p_max_rows)
                        ) AS x
                        ORDER BY 2 DESC, 1 LIMIT p_max_rows;
                    RETURN;
                END IF;
                PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
            END IF;
        END IF;
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
