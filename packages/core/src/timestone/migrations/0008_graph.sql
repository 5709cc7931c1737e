-- The property graph view (timestone/graph/_nodes.py): chunk and link items, node ids.
--
-- A node id is an entity id or a chunk key. Ids are global (UUIDs, or the
-- keys a toolkit mints), so a write that names an id held by another group is
-- a mistake to refuse clearly, not a new node to create. Row level security
-- hides other groups, so the check is a function that runs as the schema
-- owner and answers only which of the given ids another group holds now: no
-- group, no content. With no group set it answers nothing.

CREATE INDEX entities_current_id_any ON timestone.entities (id) WHERE expired_at IS NULL;
CREATE INDEX items_graph_chunk_key ON timestone.items (key)
    WHERE namespace = '{graph,chunks}' AND expired_at IS NULL;
-- the walk finds a node's links by either end
CREATE INDEX items_graph_link_source ON timestone.items (group_id, (value ->> 'source'))
    WHERE namespace = '{graph,links}' AND expired_at IS NULL;
CREATE INDEX items_graph_link_target ON timestone.items (group_id, (value ->> 'target'))
    WHERE namespace = '{graph,links}' AND expired_at IS NULL;

CREATE FUNCTION timestone.graph_ids_elsewhere(ids text[])
RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $fn$
    SELECT q.id
    FROM unnest(ids) AS q(id)
    WHERE current_setting('timestone.group_id', true) <> ''
      AND (
        EXISTS (
            SELECT 1 FROM timestone.items AS i
            WHERE i.namespace = '{graph,chunks}' AND i.expired_at IS NULL AND i.key = q.id
              AND i.group_id <> current_setting('timestone.group_id', true))
        OR EXISTS (
            SELECT 1 FROM timestone.entities AS e
            WHERE e.expired_at IS NULL
              AND e.id = CASE
                  WHEN q.id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                  THEN q.id::uuid END
              AND e.group_id <> current_setting('timestone.group_id', true))
      )
$fn$;
REVOKE ALL ON FUNCTION timestone.graph_ids_elsewhere(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.graph_ids_elsewhere(text[]) TO timestone_app;
