-- timestone.similar_entities: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0002, 0006, 0035.

-- the overload migration 0002 made (0006 replaced it)
DROP FUNCTION IF EXISTS timestone.similar_entities(text[], integer);

-- similar_entities reads the group into a variable before its statement, as
-- search_text does: the statement then compares group_id with a value (a
-- parameter of the function's plan), not with a call of current_setting.
--
-- On one server the two are the same plan. On a Citus coordinator
-- (docs/scale.md) a statement reaches one shard only when its group is a
-- value the planner can read: compared with current_setting(...), the lookup
-- went to every shard, and its LIMIT inside the lateral subquery was refused
-- there ("cannot push down this subquery").
--
-- The search path now lists pg_temp last, as a SECURITY DEFINER function
-- must (otherwise a temporary object of the caller's would be found first
-- and run as the owner).

CREATE OR REPLACE FUNCTION timestone.similar_entities(
    queries text[], max_per_query integer DEFAULT 5, min_similarity real DEFAULT 0.3
)
RETURNS TABLE (query text, id uuid, name text, entity_type text, similarity real)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
DECLARE
    previous real := show_limit();
    g text := current_setting('timestone.group_id', true);
BEGIN
    IF g IS NULL OR g = '' THEN
        RETURN;
    END IF;
    -- every use of % goes through this function, which sets the threshold it needs
    PERFORM set_limit(min_similarity);
    RETURN QUERY
    SELECT q.query, e.id, e.name, e.entity_type, similarity(e.norm_name, q.query)
    FROM unnest(queries) AS q(query)
    CROSS JOIN LATERAL (
        SELECT c.id, c.name, c.entity_type, c.norm_name
        FROM timestone.entities AS c
        WHERE c.group_id = g
          AND c.expired_at IS NULL
          AND c.norm_name % q.query
        ORDER BY similarity(c.norm_name, q.query) DESC, c.id
        LIMIT max_per_query
    ) AS e;
    PERFORM set_limit(previous);
END
$fn$;

REVOKE ALL ON FUNCTION timestone.similar_entities(text[],integer,real) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.similar_entities(text[],integer,real) TO timestone_app;
