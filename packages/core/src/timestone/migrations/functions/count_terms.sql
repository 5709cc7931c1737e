-- timestone.count_terms: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0036.

-- The trigger of facts, entities and communities (kind: the trigger's argument).
CREATE OR REPLACE FUNCTION timestone.count_terms()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
DECLARE
    groups text[];
    kinds text[];
    vectors tsvector[];
    signs integer[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(r.group_id), array_agg(TG_ARGV[0]), array_agg(r.fts), array_agg(1)
        INTO groups, kinds, vectors, signs
        FROM new_rows AS r WHERE r.expired_at IS NULL;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(r.group_id), array_agg(TG_ARGV[0]), array_agg(r.fts), array_agg(-1)
        INTO groups, kinds, vectors, signs
        FROM old_rows AS r WHERE r.expired_at IS NULL;
    ELSE
        SELECT array_agg(x.group_id), array_agg(TG_ARGV[0]), array_agg(x.fts),
               array_agg(x.sign)
        INTO groups, kinds, vectors, signs
        FROM (SELECT r.group_id, r.fts, -1 AS sign FROM old_rows AS r
              WHERE r.expired_at IS NULL
              UNION ALL
              SELECT r.group_id, r.fts, 1 FROM new_rows AS r WHERE r.expired_at IS NULL) AS x;
    END IF;
    PERFORM timestone.note_terms(groups, kinds, vectors, signs);
    RETURN NULL;
END
$fn$;

REVOKE ALL ON FUNCTION timestone.count_terms() FROM PUBLIC;
