-- Index-backed lookups under row level security.
--
-- Under RLS, a predicate that is not LEAKPROOF (trigram %, full-text @@) cannot
-- be an index condition, so the planner falls back to a sequential scan. These
-- functions run as the schema owner, filter by the same per-transaction group
-- setting the policies read (no group set: no rows), and are the only way the
-- library role reaches these indexes. search_path is pinned.

CREATE FUNCTION timestone.similar_entities(queries text[], max_per_query integer DEFAULT 5)
RETURNS TABLE (query text, id uuid, name text, entity_type text, similarity real)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $fn$
    SELECT q.query, e.id, e.name, e.entity_type, similarity(e.norm_name, q.query)
    FROM unnest(queries) AS q(query)
    CROSS JOIN LATERAL (
        SELECT c.id, c.name, c.entity_type, c.norm_name
        FROM timestone.entities AS c
        WHERE c.group_id = current_setting('timestone.group_id', true)
          AND c.expired_at IS NULL
          AND c.norm_name % q.query
        ORDER BY similarity(c.norm_name, q.query) DESC, c.id
        LIMIT max_per_query
    ) AS e
$fn$;
REVOKE ALL ON FUNCTION timestone.similar_entities(text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.similar_entities(text[], integer) TO timestone_app;
