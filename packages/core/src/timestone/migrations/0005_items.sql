-- Items: JSON documents under a namespace and a key, for key-value long-term
-- memory (a LangGraph store, user preferences, agent notes).
--
-- Versioned like every other table: a put expires the current version of the
-- key and inserts a new one, a delete only expires it, so "what did the store
-- hold at T" is the usual as-of predicate. item_created_at is the moment the
-- key was first put (kept across versions); created_at is this version's.
-- The embedding column is untyped: it holds the vector of the item's indexed
-- text under whatever embedder wrote it, and searches compare only vectors of
-- the query's dimension.

CREATE TABLE timestone.items (
    group_id        text        NOT NULL,
    version_id      uuid        NOT NULL DEFAULT gen_random_uuid(),
    namespace       text[]      NOT NULL,
    key             text        NOT NULL CHECK (key <> ''),
    value           jsonb       NOT NULL CHECK (jsonb_typeof(value) = 'object'),
    item_created_at timestamptz NOT NULL,
    embedding       vector,
    created_at      timestamptz NOT NULL,
    expired_at      timestamptz,
    PRIMARY KEY (group_id, version_id),
    CHECK (expired_at IS NULL OR expired_at >= created_at),
    CHECK (item_created_at <= created_at)
);
CREATE UNIQUE INDEX items_current_key ON timestone.items (group_id, namespace, key)
    WHERE expired_at IS NULL;
CREATE INDEX items_history ON timestone.items (group_id, namespace, key, created_at);

ALTER TABLE timestone.items ENABLE ROW LEVEL SECURITY;
ALTER TABLE timestone.items FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON timestone.items
    USING (group_id = current_setting('timestone.group_id', true))
    WITH CHECK (group_id = current_setting('timestone.group_id', true));
GRANT SELECT, INSERT, DELETE ON timestone.items TO timestone_app;
GRANT UPDATE (expired_at) ON timestone.items TO timestone_app;
