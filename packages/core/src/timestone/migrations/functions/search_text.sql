-- timestone.search_text: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0003, 0014, 0015, 0025, 0029, 0030, 0031, 0032.

-- Full-text matches of the caller's group (timestone.group_id) for one scope
-- (p_kind: facts, entities, episodes, told episodes, communities), ranked by
-- ts_rank_cd, as of a system time, valid at a world time, filtered by relations
-- and labels. It reads the group's own term statistics of the question's words
-- at each call (and, for a plan, the planner's statistics of the table), and keeps
-- nothing in session settings (docs/sql.md).
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
    words text[];
    rows_held real;
    held bigint;
    shares real[];
    docs real;
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
        -- A question only of words most of the group's facts hold: no list. The
        -- group's own term statistics (0036) tell how many current facts it has (the
        -- lexeme '') and how many of them hold each word; the facts that hold them all
        -- are estimated as if the words were independent. Other groups' facts change
        -- nothing here (the planner's statistics of the whole table chose the common
        -- words before: docs/decisions/024-common-words-from-the-groups-statistics.md).
        -- A word that is not plain (OR, NOT, a phrase, a prefix, a weight) keeps the list.
        words := ARRAY[''];
        FOREACH part IN ARRAY string_to_array(p_query::text, ' & ') LOOP
            IF part !~ '^''([^''\\]|'''')*''$' THEN
                words := NULL;
                EXIT;
            END IF;
            part := replace(substr(part, 2, length(part) - 2), '''''', '''');
            IF NOT part = ANY (words) THEN
                words := words || part;
            END IF;
        END LOOP;
        IF words IS NOT NULL THEN
            SELECT coalesce(max(d.docs) FILTER (WHERE d.lexeme = ''), 0),
                   count(*) FILTER (WHERE d.lexeme <> ''),
                   array_agg(d.docs) FILTER (WHERE d.lexeme <> '')
            INTO rows_held, held, shares
            FROM (SELECT s.lexeme, sum(s.docs)::real AS docs
                  FROM timestone.term_stats AS s
                  WHERE s.group_id = g AND s.kind = 'facts' AND s.lexeme = ANY (words)
                  GROUP BY s.lexeme HAVING sum(s.docs) > 0) AS d;
            IF rows_held >= common_rows::real AND held = cardinality(words) - 1 THEN
                estimate := rows_held;
                FOREACH docs IN ARRAY shares LOOP
                    estimate := estimate * docs / rows_held;
                END LOOP;
                IF estimate >= common_rows::real THEN
                    RETURN;
                END IF;
            END IF;
        END IF;
        q := timestone.index_query(p_query, 'facts');
        IF p_as_of IS NULL AND p_valid_at IS NOT NULL THEN
            -- whether the group holds half the table (0029), from the planner's
            -- statistics: it chooses a plan, never what is found. Planned once per
            -- connection: planning pg_catalog.pg_stats cost 0.5 ms a call.
            PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
            SELECT (s.most_common_vals::text::text[])[1] = g AND s.most_common_freqs[1] >= 0.5
            INTO dominant
            FROM pg_catalog.pg_stats AS s
            WHERE s.schemaname = 'timestone' AND s.tablename = 'facts'
              AND s.attname = 'group_id';
            PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
            IF coalesce(dominant, false) THEN
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
