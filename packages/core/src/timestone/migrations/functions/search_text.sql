-- timestone.search_text: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0003, 0014, 0015, 0025, 0029, 0030, 0031, 0032.

-- Full-text matches of the caller's group (timestone.group_id) for one scope
-- (p_kind: facts, entities, episodes, told episodes, communities), ranked by
-- ts_rank_cd, as of a system time, valid at a world time, filtered by relations
-- and labels. It reads the planner's statistics of the group and the question's
-- words at each call and keeps nothing in session settings (docs/sql.md).
CREATE OR REPLACE FUNCTION timestone.search_text(
    p_kind text, p_query tsquery, p_as_of timestamptz, p_valid_at timestamptz,
    p_relations text[], p_labels text[], p_max_rows integer
)
RETURNS TABLE (version_id uuid, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 30
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
DECLARE
    g text := current_setting('timestone.group_id', true);
    q tsquery;
    r tsquery;
    dominant boolean;
    closing uuid[];
    common_rows text := coalesce(
        nullif(current_setting('timestone.text_common_rows', true), ''), '5000');
    table_rows real;
    lexemes text[];
    shares real[];
    parts text[];
    top real;
    at integer;
    estimate real;
    part text;
BEGIN
    IF common_rows !~ '^[0-9]{1,15}$' THEN
        RAISE EXCEPTION 'timestone.text_common_rows must be a whole number of rows, not %',
            common_rows USING ERRCODE = '22023';
    END IF;
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
        -- The planner's statistics, read at each call (0032): the group's rows (its
        -- share among the most common values of facts.group_id, times the table's
        -- rows), whether it holds half the table (0029), and for a group of
        -- text_common_rows or more, each word's share among the most common elements
        -- of facts.fts (0030).
        -- planned once per connection: planning pg_catalog.pg_stats cost 0.5 ms a call
        PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
        SELECT greatest(c.reltuples, 0), v.vals[1] = g AND s.most_common_freqs[1] >= 0.5,
               s.most_common_freqs[array_position(v.vals, g)] * greatest(c.reltuples, 0)
        INTO table_rows, dominant, estimate
        FROM pg_catalog.pg_class AS c
        LEFT JOIN pg_catalog.pg_stats AS s
          ON s.schemaname = 'timestone' AND s.tablename = 'facts' AND s.attname = 'group_id'
        LEFT JOIN LATERAL (SELECT s.most_common_vals::text::text[] AS vals) AS v ON true
        WHERE c.oid = 'timestone.facts'::pg_catalog.regclass;
        dominant := coalesce(dominant, false);
        -- a question only of words most of the group's facts hold: no list. The words'
        -- own shares are read (0.2 ms at 1,000 common words) only if as many words,
        -- each of the largest share (at most 16 of them), could reach the bound.
        IF estimate >= common_rows::real THEN
            parts := string_to_array(p_query::text, ' & ');
            -- the words' shares, then the least of them and the largest (and, for an
            -- array type, the share of nulls)
            SELECT s.most_common_elem_freqs,
                   (SELECT max(x.f) FROM unnest(s.most_common_elem_freqs) AS x(f))
            INTO shares, top
            FROM pg_catalog.pg_stats AS s
            WHERE s.schemaname = 'timestone' AND s.tablename = 'facts' AND s.attname = 'fts';
            IF coalesce(estimate * top ^ least(cardinality(parts), 16) >= common_rows::real,
                        false) THEN
                SELECT s.most_common_elems::text::text[] INTO lexemes
                FROM pg_catalog.pg_stats AS s
                WHERE s.schemaname = 'timestone' AND s.tablename = 'facts' AND s.attname = 'fts';
                FOREACH part IN ARRAY parts LOOP
                    IF part !~ '^''([^''\\]|'''')*''$' THEN
                        estimate := 0;  -- OR, NOT, a phrase, a prefix, a weight
                        EXIT;
                    END IF;
                    at := array_position(
                        lexemes, replace(substr(part, 2, length(part) - 2), '''''', ''''));
                    IF at IS NULL THEN
                        estimate := 0;  -- not a common word
                        EXIT;
                    END IF;
                    estimate := estimate * shares[at];
                END LOOP;
                IF estimate >= common_rows::real THEN
                    RETURN;
                END IF;
            END IF;
        END IF;
        PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
        q := timestone.index_query(p_query, 'facts');
        IF p_as_of IS NULL AND p_valid_at IS NOT NULL THEN
            IF dominant THEN
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
    ELSIF p_kind IN ('episodes', 'told episodes') THEN
        -- told episodes: not the records of structured facts (source 'facts'), which
        -- are left out before they are ranked
        IF p_as_of IS NULL THEN
            q := timestone.index_query(p_query, 'episodes');
            RETURN QUERY
                SELECT p.version_id, ts_rank_cd(p.fts, r)
                FROM timestone.episodes AS p
                WHERE p.group_id = g AND p.expired_at IS NULL
                  AND p.fts @@ q AND (q = p_query OR ts_match_vq(p.fts, p_query))
                  AND (p_valid_at IS NULL OR p.reference_time <= p_valid_at)
                  AND (p_kind = 'episodes' OR p.source <> 'facts')
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT p.version_id, ts_rank_cd(p.fts, r)
                FROM timestone.episodes AS p
                WHERE p.group_id = g AND p.created_at <= p_as_of
                  AND (p.expired_at IS NULL OR p.expired_at > p_as_of) AND p.fts @@ p_query
                  AND (p_valid_at IS NULL OR p.reference_time <= p_valid_at)
                  AND (p_kind = 'episodes' OR p.source <> 'facts')
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

REVOKE ALL ON FUNCTION timestone.search_text(text,tsquery,timestamp with time zone,timestamp with time zone,text[],text[],integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.search_text(text,tsquery,timestamp with time zone,timestamp with time zone,text[],text[],integer) TO timestone_app;
