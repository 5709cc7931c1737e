-- Evidence for a question is searched among the episodes that tell something,
-- not among the records of structured facts.
--
-- An episode of add_facts or bulk_load (source 'facts') is the record of the
-- facts it wrote; context() leaves such episodes out, since their facts are
-- candidates of their own, with dates. It used to leave them out after the
-- search had ranked them: they took places in the 60 candidates that told
-- episodes (messages, texts, document chunks) needed, and ranking their text
-- was most of the time of a context on the benchmark corpora, whose records
-- hold a thousand facts each (8 ms of the episodes statement at 100k facts,
-- 37 ms at 1M).
--
-- search_text takes the kind 'told episodes': the episodes of the group that
-- are not records of facts, left out before ranking. The statement counts and
-- ranks exactly a group's told episodes through episodes_told (below), and
-- otherwise reads the HNSW index of told episodes that Memory.open builds
-- (episodes_told_embedding_hnsw): an index scan filtered to told episodes in
-- an index holding every episode would walk past the records of facts.

CREATE INDEX episodes_told ON timestone.episodes (group_id, id)
    WHERE expired_at IS NULL AND source <> 'facts';

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
    common_rows text := coalesce(
        nullif(current_setting('timestone.text_common_rows', true), ''), '5000');
    table_rows real;
    sized text;
    shares text;
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
        -- the statistics (above), looked up once a minute, and again when the bound is
        -- set lower than the words kept allow: the group holding half the table (0029),
        -- each common group's rows, each common word's share
        shares := current_setting('timestone.text_lexemes', true);
        IF held IS NULL OR held !~ '^[0-9]{1,15}:'
           OR split_part(held, ':', 1)::bigint < extract(epoch FROM now())::bigint - 60
           OR shares IS NULL OR shares !~ '^[0-9]{1,15}:'
           OR split_part(shares, ':', 1)::real > common_rows::real THEN
            SELECT greatest(c.reltuples, 0) INTO table_rows
            FROM pg_class AS c WHERE c.oid = 'timestone.facts'::regclass;
            SELECT CASE WHEN s.most_common_freqs[1] >= 0.5
                        THEN (s.most_common_vals::text::text[])[1] END,
                   (SELECT ' ' || string_agg(x.v || '=' || round(x.f * table_rows)::bigint, ' ')
                           || ' '
                    FROM unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS x(v, f)
                    WHERE x.v IS NOT NULL AND x.f IS NOT NULL)
            INTO dominant, sized
            FROM pg_stats AS s
            WHERE s.schemaname = 'timestone' AND s.tablename = 'facts'
              AND s.attname = 'group_id';
            -- only the words that can reach the bound (a word's share times the table's
            -- rows bounds any estimate with it): a lookup in the list of them all cost
            -- 0.2 ms a search at 100k facts
            SELECT common_rows || ':' || chr(31)
                   || coalesce(string_agg(x.e || chr(30) || x.f::text, chr(31)) || chr(31), '')
            INTO shares
            FROM pg_stats AS s,
                 unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS x(e, f)
            WHERE s.schemaname = 'timestone' AND s.tablename = 'facts' AND s.attname = 'fts'
              AND x.e IS NOT NULL AND x.f IS NOT NULL
              AND x.f * table_rows >= common_rows::real;
            held := extract(epoch FROM now())::bigint || ':' || coalesce(dominant, '');
            PERFORM set_config('timestone.dominant_group', held, false);
            PERFORM set_config('timestone.text_groups', coalesce(sized, ''), false);
            PERFORM set_config('timestone.text_lexemes', shares, false);
        END IF;
        -- a question only of words most of the group's facts hold (above): no list
        sized := current_setting('timestone.text_groups', true);
        at := strpos(sized, ' ' || g || '=');
        IF at > 0 THEN
            estimate := split_part(substr(sized, at + length(g) + 2), ' ', 1)::real;
            IF estimate >= common_rows::real THEN
                FOREACH part IN ARRAY string_to_array(p_query::text, ' & ') LOOP
                    IF part !~ '^''([^''\\]|'''')*''$' THEN
                        estimate := 0;  -- OR, NOT, a phrase, a prefix, a weight
                        EXIT;
                    END IF;
                    at := strpos(shares, chr(31)
                        || replace(substr(part, 2, length(part) - 2), '''''', '''') || chr(30));
                    IF at = 0 THEN
                        estimate := 0;  -- not a common word
                        EXIT;
                    END IF;
                    estimate := estimate * split_part(
                        split_part(substr(shares, at + 1), chr(30), 2), chr(31), 1)::real;
                END LOOP;
                IF estimate >= common_rows::real THEN
                    RETURN;
                END IF;
            END IF;
        END IF;
        q := timestone.index_query(p_query, 'facts');
        IF p_as_of IS NULL AND p_valid_at IS NOT NULL THEN
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
