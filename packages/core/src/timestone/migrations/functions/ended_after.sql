-- timestone.ended_after: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0016.

-- As-of vector search ranks the versions that ended after the moment by key.
--
-- A search as of a moment T ranks the current versions created by T through
-- the HNSW indexes, like a present search, and the versions that ended after
-- T, which no vector index holds, exactly. Those are read here, through
-- facts_ended (0015), in end order, up to a bound. The query is planned for
-- each call: the search statement's generic plan, not knowing T, read the
-- whole table instead of that index (400 ms at 1M facts, for no row).
CREATE OR REPLACE FUNCTION timestone.ended_after(p_group text, p_as_of timestamptz, p_max integer)
RETURNS TABLE (version_id uuid)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
BEGIN
    RETURN QUERY
        SELECT e.version_id FROM timestone.facts AS e
        WHERE e.group_id = p_group AND e.expired_at IS NOT NULL AND e.expired_at > p_as_of
        ORDER BY e.expired_at LIMIT p_max;
END
$fn$;

REVOKE ALL ON FUNCTION timestone.ended_after(text,timestamp with time zone,integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.ended_after(text,timestamp with time zone,integer) TO timestone_app;
