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
-- timestone._models.check_relation. NULL for anything else, or where the
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

-- the name a stored relation takes: its normal form, or itself when it has none
CREATE FUNCTION pg_temp.renamed(name text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT
AS $fn$ SELECT coalesce(timestone.normal_relation(name), name) $fn$;

DO $refuse$
DECLARE
    hit record;
    slots bigint;
BEGIN
    WITH spelled AS (
        SELECT f.group_id, f.source_id, f.relation, pg_temp.renamed(f.relation) AS normal,
               f.valid_at, f.invalid_at, f.episodes
        FROM timestone.facts AS f
        WHERE f.expired_at IS NULL AND f.cardinality = 'one'
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
                'slot of %L (entity %s) and %s would hold overlapping facts spelled %s '
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
UPDATE timestone.assertions SET relation = timestone.normal_relation(relation)
WHERE timestone.normal_relation(relation) <> relation;
UPDATE timestone.facts SET relation = timestone.normal_relation(relation)
WHERE timestone.normal_relation(relation) <> relation;

-- Graph links: the key is sha256(source || x'1f' || relation || x'1f' || target) in hex
-- (timestone._aio._graph._link_key).
CREATE FUNCTION pg_temp.link_key(source text, relation text, target text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT
AS $fn$
    SELECT encode(sha256(convert_to(source || chr(31) || relation || chr(31) || target,
                                    'UTF8')), 'hex')
$fn$;

CREATE TEMP TABLE merged_links ON COMMIT DROP AS
SELECT i.group_id, i.namespace,
       pg_temp.link_key(i.value ->> 'source', pg_temp.renamed(i.value ->> 'relation'),
                        i.value ->> 'target') AS key,
       i.value ->> 'source' AS source, pg_temp.renamed(i.value ->> 'relation') AS relation,
       i.value ->> 'target' AS target,
       min(i.item_created_at) AS item_created_at,
       max(i.created_at) AS last_created_at,
       array_agg(i.version_id) AS replaced
FROM timestone.items AS i
WHERE i.namespace = '{graph,links}' AND i.expired_at IS NULL
GROUP BY 1, 2, 3, 4, 5, 6
HAVING count(*) > 1;

-- the versions a merge replaces end now (later than any of them began)
UPDATE timestone.items AS i SET expired_at = greatest(now(), m.last_created_at)
FROM merged_links AS m
WHERE i.group_id = m.group_id AND i.version_id = ANY(m.replaced);

UPDATE timestone.items AS i
SET value = jsonb_set(i.value, '{relation}', to_jsonb(timestone.normal_relation(i.value ->> 'relation'))),
    key = pg_temp.link_key(i.value ->> 'source', timestone.normal_relation(i.value ->> 'relation'),
                           i.value ->> 'target')
WHERE i.namespace = '{graph,links}'
  AND timestone.normal_relation(i.value ->> 'relation') <> i.value ->> 'relation';

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
                        THEN jsonb_set(x.edge, '{name}',
                                       to_jsonb(pg_temp.renamed(x.edge ->> 'name')))
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
