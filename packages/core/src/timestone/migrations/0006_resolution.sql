-- Entity resolution that stays fast when many names look alike.
--
-- A folded spelling (no accents, punctuation or spaces; computed by the library)
-- finds "Château Nord" for "Chateau Nord" by an index lookup, and the trigram
-- function takes a minimum similarity, so that resolution asks only for the
-- near-identical candidates it could merge. With the 0.3 default, names such as
-- "Customer 0012" and "Customer 0345" are all candidates of one another, and a
-- bulk load becomes quadratic.

ALTER TABLE timestone.entities ADD COLUMN fold_name text;

ALTER TABLE timestone.entities NO FORCE ROW LEVEL SECURITY;
UPDATE timestone.entities SET fold_name = regexp_replace(norm_name, '[^[:alnum:]]+', '', 'g');
ALTER TABLE timestone.entities FORCE ROW LEVEL SECURITY;

CREATE INDEX entities_fold ON timestone.entities (group_id, fold_name) WHERE expired_at IS NULL;

DROP FUNCTION timestone.similar_entities(text[], integer);
CREATE FUNCTION timestone.similar_entities(
    queries text[], max_per_query integer DEFAULT 5, min_similarity real DEFAULT 0.3
)
RETURNS TABLE (query text, id uuid, name text, entity_type text, similarity real)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $fn$
DECLARE
    previous real := show_limit();
BEGIN
    -- every use of % goes through this function, which sets the threshold it needs
    PERFORM set_limit(min_similarity);
    RETURN QUERY
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
    ) AS e;
    PERFORM set_limit(previous);
END
$fn$;
REVOKE ALL ON FUNCTION timestone.similar_entities(text[], integer, real) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.similar_entities(text[], integer, real) TO timestone_app;
