-- Relation names take one normal form, UPPER_SNAKE_CASE (timestone._names.relation_name).
--
-- An earlier version stored a relation name as it was given: `directs`,
-- `Directs` and `worksAt` were three relations, and a read now names
-- `DIRECTS` or `WORKS_AT` only. This migration brings every stored name to
-- its normal form: the assertions and facts (every row version, history
-- included: a data move of the migration, run by the schema owner; the
-- versions keep their created_at and expired_at), the graph link items
-- (their value's relation, and their key, a sha256 over source, relation and
-- target), and the edge types of an ontology stored in meta.
--
-- Where two spellings now meet in one slot (one group, one source, one normal
-- name):
--   * current cardinality-one facts whose periods overlap are refused: the
--     slot's exclusion constraint forbids them, and which one held is what the
--     date fight over the assertions says, which is the library's to run. The
--     error names the group, the slot and the spellings; the way out is in
--     docs/upgrading.md. Nothing is changed then.
--   * otherwise the rows are renamed. Facts of two spellings that the date
--     fight would join (one target, periods that overlap or meet: a
--     cardinality-many slot said under two names) stay two facts until the
--     next write into the slot, whose date fight makes them one.
--   * current link items of one source, target and normal name merge into one
--     new version, the attributes of the later written winning (as a second
--     write of the link does); the versions they replace are expired.
--   * edge types of the stored ontology that are equal once renamed are kept
--     once; edge types that differ keep both, and loading the ontology names
--     them (store a corrected one with `timestone init --ontology FILE`).
-- A stored name that has no normal form (`_`, `_2nd`: the library refuses it
-- now) is left as it is.
--
-- Also: the function graph_ids_elsewhere and the index items_graph_chunk_key,
-- which nothing uses any more, are dropped.

-- The normal form of a relation name that is an identifier (letters, digits
-- and underscores, not starting with a digit, at most 128 characters):
-- timestone._records.check_relation. NULL for anything else, or where the
-- normal form is empty, starts with a digit or is longer than 128 characters.
-- COLLATE "C": upper-case ASCII letters only, whatever the database's locale.
CREATE FUNCTION timestone.normal_relation(name text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN n ~ '^[A-Z][A-Z0-9_]*$' AND length(n) <= 128 THEN n END
    FROM (
        SELECT btrim(regexp_replace(
            upper(regexp_replace(name COLLATE "C", '([a-z0-9])([A-Z])', '\1_\2', 'g')),
            '_+', '_', 'g'), '_') AS n
    ) AS s
    WHERE name COLLATE "C" ~ '^[A-Za-z_][A-Za-z0-9_]{0,127}$'
$fn$;
REVOKE ALL ON FUNCTION timestone.normal_relation(text) FROM PUBLIC;

-- The stored names that change, old and new: a few distinct values, each renamed once; the
-- tables are then read once each, joined to this list.
CREATE TEMP TABLE renamed_relations ON COMMIT DROP AS
SELECT s.old, timestone.normal_relation(s.old) AS new
FROM (
    SELECT DISTINCT relation AS old FROM timestone.assertions
    UNION SELECT DISTINCT relation FROM timestone.facts
    UNION SELECT DISTINCT value ->> 'relation' FROM timestone.items
        WHERE namespace = '{graph,links}' AND value ->> 'relation' IS NOT NULL
) AS s
WHERE timestone.normal_relation(s.old) <> s.old;
ANALYZE renamed_relations;

DO $refuse$
DECLARE
    hit record;
BEGIN
    WITH spelled AS (
        -- the current cardinality-one facts of every name a renamed one joins
        SELECT f.group_id, f.source_id, f.relation, coalesce(r.new, f.relation) AS normal,
               f.valid_at, f.invalid_at, f.episodes
        FROM timestone.facts AS f
        LEFT JOIN renamed_relations AS r ON r.old = f.relation
        WHERE f.expired_at IS NULL AND f.cardinality = 'one'
          AND (r.old IS NOT NULL OR f.relation IN (SELECT new FROM renamed_relations))
    ), met AS (
        SELECT group_id, source_id, normal FROM spelled
        GROUP BY group_id, source_id, normal HAVING count(DISTINCT relation) > 1
    ), clash AS (
        SELECT a.group_id, a.source_id, a.normal, a.relation AS one, b.relation AS other,
               a.episodes AS one_episodes, b.episodes AS other_episodes
        FROM met
        JOIN spelled AS a USING (group_id, source_id, normal)
        JOIN spelled AS b USING (group_id, source_id, normal)
        WHERE a.relation < b.relation
          AND tstzrange(a.valid_at, a.invalid_at) && tstzrange(b.valid_at, b.invalid_at)
    )
    SELECT c.*, e.name AS source_name, count(*) OVER () AS clashes
    INTO hit
    FROM clash AS c
    LEFT JOIN timestone.entities AS e
        ON e.group_id = c.group_id AND e.id = c.source_id AND e.expired_at IS NULL
    ORDER BY c.group_id, c.source_id, c.normal, c.one, c.other
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format(
                'relation names take one normal form, and in group %L the cardinality-one '
                'slot (entity %L %s, relation %s) would hold overlapping facts spelled %s '
                '(episodes %s) and %s (episodes %s); %s overlapping pair(s) in all. '
                'Nothing was changed. With the Timestone version that wrote them, remove '
                'the episodes of one spelling (remove_episode) and add them again spelled '
                '%s, then open again (docs/upgrading.md)',
                hit.group_id, hit.source_name, hit.source_id, hit.normal, hit.one,
                array_to_string(hit.one_episodes, ', '), hit.other,
                array_to_string(hit.other_episodes, ', '), hit.clashes, hit.normal);
    END IF;
END
$refuse$;

-- Assertions and facts, every version. Only rows whose name changes are written.
UPDATE timestone.assertions AS a SET relation = r.new
FROM renamed_relations AS r WHERE a.relation = r.old;
UPDATE timestone.facts AS f SET relation = r.new
FROM renamed_relations AS r WHERE f.relation = r.old;

-- Graph links: the key is sha256(source || x'1f' || relation || x'1f' || target) in hex
-- (timestone.graph._nodes.link_key).
CREATE FUNCTION pg_temp.link_key(source text, relation text, target text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT
AS $fn$
    SELECT encode(sha256(convert_to(source || chr(31) || relation || chr(31) || target,
                                    'UTF8')), 'hex')
$fn$;

-- current links that one key takes once renamed, where a renamed one is among them
CREATE TEMP TABLE merged_links ON COMMIT DROP AS
SELECT l.group_id, l.namespace, pg_temp.link_key(l.source, l.relation, l.target) AS key,
       l.source, l.relation, l.target,
       min(l.item_created_at) AS item_created_at,
       max(l.created_at) AS last_created_at,
       array_agg(l.version_id) AS replaced
FROM (
    SELECT i.group_id, i.namespace, i.version_id, i.item_created_at, i.created_at,
           i.value ->> 'source' AS source, coalesce(r.new, i.value ->> 'relation') AS relation,
           i.value ->> 'target' AS target, r.old IS NOT NULL AS renamed
    FROM timestone.items AS i
    LEFT JOIN renamed_relations AS r ON r.old = i.value ->> 'relation'
    WHERE i.namespace = '{graph,links}' AND i.expired_at IS NULL
) AS l
GROUP BY l.group_id, l.namespace, l.source, l.relation, l.target
HAVING count(*) > 1 AND bool_or(l.renamed);

-- the versions a merge replaces end now (later than any of them began)
UPDATE timestone.items AS i SET expired_at = greatest(now(), m.last_created_at)
FROM merged_links AS m
WHERE i.group_id = m.group_id AND i.version_id = ANY(m.replaced);

UPDATE timestone.items AS i
SET value = jsonb_set(i.value, '{relation}', to_jsonb(r.new)),
    key = pg_temp.link_key(i.value ->> 'source', r.new, i.value ->> 'target')
FROM renamed_relations AS r
WHERE i.namespace = '{graph,links}' AND i.value ->> 'relation' = r.old;

-- one new version per merged link: each attribute as the latest written version had it
INSERT INTO timestone.items (group_id, namespace, key, value, item_created_at, created_at)
SELECT m.group_id, m.namespace, m.key,
       jsonb_build_object(
           'source', m.source, 'relation', m.relation, 'target', m.target,
           'attributes', coalesce((
               SELECT jsonb_object_agg(a.k, a.v) FROM (
                   SELECT DISTINCT ON (kv.key) kv.key AS k, kv.value AS v
                   FROM timestone.items AS i,
                        jsonb_each(coalesce(i.value -> 'attributes', '{}')) AS kv
                   WHERE i.group_id = m.group_id AND i.version_id = ANY(m.replaced)
                   ORDER BY kv.key, i.created_at DESC, i.version_id DESC
               ) AS a), '{}')),
       m.item_created_at, greatest(now(), m.last_created_at)
FROM merged_links AS m;

-- The ontology stored in meta (the command line's): edge type names, an edge type kept
-- once where two are equal once renamed.
UPDATE timestone.meta AS m
SET value = jsonb_set(m.value, '{edge_types}', (
    SELECT coalesce(jsonb_agg(t.edge ORDER BY t.first), '[]')
    FROM (
        SELECT e.edge, min(e.n) AS first
        FROM (
            SELECT CASE WHEN jsonb_typeof(x.edge -> 'name') = 'string'
                        THEN jsonb_set(x.edge, '{name}', to_jsonb(coalesce(
                            timestone.normal_relation(x.edge ->> 'name'), x.edge ->> 'name')))
                        ELSE x.edge END AS edge,
                   x.n
            FROM jsonb_array_elements(m.value -> 'edge_types') WITH ORDINALITY AS x(edge, n)
        ) AS e
        GROUP BY e.edge
    ) AS t))
WHERE m.key = 'ontology' AND jsonb_typeof(m.value -> 'edge_types') = 'array';

-- Nothing calls these any more: graph node ids are per group.
DROP FUNCTION timestone.graph_ids_elsewhere(text[]);
DROP INDEX timestone.items_graph_chunk_key;
