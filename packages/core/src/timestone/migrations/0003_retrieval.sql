-- Retrieval: full-text search functions and communities.
--
-- Full-text search under row level security: `@@` is not LEAKPROOF, so a
-- query run as the library role cannot use the GIN indexes and scans every
-- row. These functions run as the schema owner with search_path pinned,
-- filter by the same per-transaction group setting the policies read (no
-- group set: no rows), and are the only way the library role reaches the
-- full-text indexes. Current rows (`expired_at IS NULL`) use the partial GIN
-- indexes; an as-of search (a point in system time) reads history rows, which
-- those indexes do not hold, and scans the group's rows exactly.

CREATE FUNCTION timestone.search_text(
    p_kind text, p_query tsquery, p_as_of timestamptz, p_valid_at timestamptz,
    p_relations text[], p_labels text[], p_max_rows integer
)
RETURNS TABLE (version_id uuid, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 30
SET search_path = pg_catalog, public
AS $fn$
DECLARE
    g text := current_setting('timestone.group_id', true);
BEGIN
    IF g IS NULL OR g = '' OR p_query IS NULL OR numnode(p_query) = 0 THEN
        RETURN;
    END IF;
    IF p_kind = 'facts' THEN
        IF p_as_of IS NULL THEN
            RETURN QUERY
                SELECT f.version_id, ts_rank_cd(f.fts, p_query)
                FROM timestone.facts AS f
                WHERE f.group_id = g AND f.expired_at IS NULL AND f.fts @@ p_query
                  AND (p_valid_at IS NULL OR (f.valid_at <= p_valid_at
                       AND (f.invalid_at IS NULL OR f.invalid_at > p_valid_at)))
                  AND (p_relations IS NULL OR f.relation = ANY(p_relations))
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT f.version_id, ts_rank_cd(f.fts, p_query)
                FROM timestone.facts AS f
                WHERE f.group_id = g AND f.created_at <= p_as_of
                  AND (f.expired_at IS NULL OR f.expired_at > p_as_of) AND f.fts @@ p_query
                  AND (p_valid_at IS NULL OR (f.valid_at <= p_valid_at
                       AND (f.invalid_at IS NULL OR f.invalid_at > p_valid_at)))
                  AND (p_relations IS NULL OR f.relation = ANY(p_relations))
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        END IF;
    ELSIF p_kind = 'entities' THEN
        IF p_as_of IS NULL THEN
            RETURN QUERY
                SELECT e.version_id, ts_rank_cd(e.fts, p_query)
                FROM timestone.entities AS e
                WHERE e.group_id = g AND e.expired_at IS NULL AND e.fts @@ p_query
                  AND (p_labels IS NULL OR e.labels && p_labels)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT e.version_id, ts_rank_cd(e.fts, p_query)
                FROM timestone.entities AS e
                WHERE e.group_id = g AND e.created_at <= p_as_of
                  AND (e.expired_at IS NULL OR e.expired_at > p_as_of) AND e.fts @@ p_query
                  AND (p_labels IS NULL OR e.labels && p_labels)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        END IF;
    ELSIF p_kind = 'episodes' THEN
        IF p_as_of IS NULL THEN
            RETURN QUERY
                SELECT p.version_id, ts_rank_cd(p.fts, p_query)
                FROM timestone.episodes AS p
                WHERE p.group_id = g AND p.expired_at IS NULL AND p.fts @@ p_query
                  AND (p_valid_at IS NULL OR p.reference_time <= p_valid_at)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT p.version_id, ts_rank_cd(p.fts, p_query)
                FROM timestone.episodes AS p
                WHERE p.group_id = g AND p.created_at <= p_as_of
                  AND (p.expired_at IS NULL OR p.expired_at > p_as_of) AND p.fts @@ p_query
                  AND (p_valid_at IS NULL OR p.reference_time <= p_valid_at)
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        END IF;
    ELSIF p_kind = 'communities' THEN
        IF p_as_of IS NULL THEN
            RETURN QUERY
                SELECT c.version_id, ts_rank_cd(c.fts, p_query)
                FROM timestone.communities AS c
                WHERE c.group_id = g AND c.expired_at IS NULL AND c.fts @@ p_query
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        ELSE
            RETURN QUERY
                SELECT c.version_id, ts_rank_cd(c.fts, p_query)
                FROM timestone.communities AS c
                WHERE c.group_id = g AND c.created_at <= p_as_of
                  AND (c.expired_at IS NULL OR c.expired_at > p_as_of) AND c.fts @@ p_query
                ORDER BY 2 DESC, 1 LIMIT p_max_rows;
        END IF;
    ELSE
        RAISE EXCEPTION 'unknown search kind %', p_kind USING ERRCODE = '22023';
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION
    timestone.search_text(text, tsquery, timestamptz, timestamptz, text[], text[], integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    timestone.search_text(text, tsquery, timestamptz, timestamptz, text[], text[], integer)
    TO timestone_app;

-- Communities: groups of entities found by label propagation over the current
-- fact graph, versioned in system time like every other table. The name
-- embedding is exact-scanned (a group holds few communities). `basis` is the
-- extractive digest of the community's facts: a rebuild rewrites (and renames)
-- a community only when its members or its basis changed.
CREATE TABLE timestone.communities (
    group_id       text        NOT NULL,
    version_id     uuid        NOT NULL DEFAULT gen_random_uuid(),
    id             uuid        NOT NULL,
    name           text        NOT NULL CHECK (name <> ''),
    summary        text        NOT NULL DEFAULT '',
    basis          text        NOT NULL DEFAULT '',
    members        uuid[]      NOT NULL CHECK (cardinality(members) > 0),
    fact_count     integer     NOT NULL DEFAULT 0,
    name_embedding vector,
    fts            tsvector GENERATED ALWAYS AS
        (to_tsvector('english'::regconfig, name || ' ' || summary)) STORED,
    created_at     timestamptz NOT NULL,
    expired_at     timestamptz,
    PRIMARY KEY (group_id, version_id),
    CHECK (expired_at IS NULL OR expired_at >= created_at)
);
CREATE UNIQUE INDEX communities_current_id ON timestone.communities (group_id, id)
    WHERE expired_at IS NULL;
CREATE INDEX communities_members ON timestone.communities USING gin (members)
    WHERE expired_at IS NULL;
CREATE INDEX communities_fts ON timestone.communities USING gin (fts) WHERE expired_at IS NULL;
CREATE INDEX communities_history ON timestone.communities (group_id, id, created_at);

ALTER TABLE timestone.communities ENABLE ROW LEVEL SECURITY;
ALTER TABLE timestone.communities FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON timestone.communities
    USING (group_id = current_setting('timestone.group_id', true))
    WITH CHECK (group_id = current_setting('timestone.group_id', true));
GRANT SELECT, INSERT, DELETE ON timestone.communities TO timestone_app;
GRANT UPDATE (expired_at) ON timestone.communities TO timestone_app;
