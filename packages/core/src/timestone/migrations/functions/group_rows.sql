-- timestone.group_rows: its current definition, a repeatable migration (README.md here).

-- How many current rows of kind p_kind (facts, entities, episodes, told episodes,
-- communities) the caller's group (timestone.group_id) holds: the count its term
-- statistics keep exact (the lexeme '', migrations 0036 and 0040), one index entry or
-- a few away instead of a count of the group's rows. A definer function: the library
-- role has no privilege on the statistics, and this reads the caller's group alone.
CREATE OR REPLACE FUNCTION timestone.group_rows(p_kind text)
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET enable_seqscan = off
AS $fn$
DECLARE
    -- a variable, not the setting in the statement: on Citus a query by the group's
    -- value is routed to its shard, one that calls current_setting is not
    g text := current_setting('timestone.group_id', true);
    n bigint;
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('facts', 'entities', 'episodes', 'told episodes',
                                        'communities') THEN
        RAISE EXCEPTION 'unknown search kind %', p_kind USING ERRCODE = '22023';
    END IF;
    IF g IS NULL OR g = '' THEN
        RETURN 0;
    END IF;
    SELECT coalesce(sum(s.docs), 0)::bigint INTO n FROM timestone.term_stats AS s
    WHERE s.group_id = g AND s.kind = p_kind AND s.lexeme = '';
    RETURN n;
END
$fn$;

REVOKE ALL ON FUNCTION timestone.group_rows(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.group_rows(text) TO timestone_app;
