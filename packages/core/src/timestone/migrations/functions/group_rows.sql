-- timestone.group_rows: its current definition, a repeatable migration (README.md here).

-- How many current rows of kind p_kind (facts, entities, episodes, told episodes,
-- communities) the caller's group (timestone.group_id) holds: the count its term
-- statistics keep exact (the lexeme '', migrations 0036 and 0040), one index entry or
-- a few away instead of a count of the group's rows. A definer function: the library
-- role has no privilege on the statistics, and this reads the caller's group alone.
CREATE OR REPLACE FUNCTION timestone.group_rows(p_kind text)
RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET enable_seqscan = off
AS $fn$
    SELECT coalesce(sum(s.docs), 0)::bigint FROM timestone.term_stats AS s
    WHERE s.group_id = current_setting('timestone.group_id', true)
      AND s.kind = p_kind AND s.lexeme = ''
$fn$;

REVOKE ALL ON FUNCTION timestone.group_rows(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.group_rows(text) TO timestone_app;
