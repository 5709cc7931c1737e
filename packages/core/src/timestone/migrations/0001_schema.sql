-- Timestone schema, version 1.
--
-- Every table is keyed by group_id first and holds row versions: a change
-- expires the old version (expired_at) and inserts a new one; nothing is
-- updated in place but expired_at (the library role may update no other
-- column). "What did the graph hold at T" is the predicate
--     created_at <= T AND (expired_at IS NULL OR expired_at > T).
--
-- Embedding columns are declared as plain `vector` here; the embedder
-- binding step types them vector(d) and builds their HNSW indexes, so the
-- dimension is the embedder's, recorded in meta.

CREATE TABLE timestone.episodes (
    group_id           text        NOT NULL,
    version_id         uuid        NOT NULL DEFAULT gen_random_uuid(),
    id                 uuid        NOT NULL,
    name               text        NOT NULL,
    content            text        NOT NULL,
    source             text        NOT NULL
        CHECK (source IN ('text', 'message', 'json', 'facts', 'document')),
    source_description text        NOT NULL DEFAULT '',
    reference_time     timestamptz NOT NULL,
    saga               text,
    idempotency_key    text        NOT NULL,
    actor              text,
    document_uri       text,
    document_version   integer,
    chunk_index        integer,
    char_start         integer,
    char_end           integer,
    metadata           jsonb       NOT NULL DEFAULT '{}',
    llm_calls          integer     NOT NULL DEFAULT 0,
    llm_tokens         integer     NOT NULL DEFAULT 0,
    recorded_at        timestamptz NOT NULL,
    embedding          vector,
    fts                tsvector GENERATED ALWAYS AS
        (to_tsvector('english'::regconfig, name || ' ' || content)) STORED,
    created_at         timestamptz NOT NULL,
    expired_at         timestamptz,
    PRIMARY KEY (group_id, version_id),
    CHECK (expired_at IS NULL OR expired_at >= created_at)
);
CREATE UNIQUE INDEX episodes_current_id ON timestone.episodes (group_id, id)
    WHERE expired_at IS NULL;
CREATE UNIQUE INDEX episodes_current_key ON timestone.episodes (group_id, idempotency_key)
    WHERE expired_at IS NULL;
CREATE INDEX episodes_id ON timestone.episodes (group_id, id, created_at);
CREATE INDEX episodes_saga ON timestone.episodes (group_id, saga, reference_time)
    WHERE expired_at IS NULL AND saga IS NOT NULL;
CREATE INDEX episodes_document ON timestone.episodes (group_id, document_uri, chunk_index)
    WHERE expired_at IS NULL AND document_uri IS NOT NULL;
CREATE INDEX episodes_fts ON timestone.episodes USING gin (fts) WHERE expired_at IS NULL;

CREATE TABLE timestone.entities (
    group_id    text        NOT NULL,
    version_id  uuid        NOT NULL DEFAULT gen_random_uuid(),
    id          uuid        NOT NULL,
    name        text        NOT NULL CHECK (name <> ''),
    norm_name   text        NOT NULL CHECK (norm_name <> ''),
    entity_type text        NOT NULL,
    labels      text[]      NOT NULL DEFAULT '{}',
    attributes  jsonb       NOT NULL DEFAULT '{}',
    summary     text        NOT NULL DEFAULT '',
    name_embedding vector,
    fts         tsvector GENERATED ALWAYS AS
        (to_tsvector('simple'::regconfig, name || ' ' || summary)) STORED,
    created_at  timestamptz NOT NULL,
    expired_at  timestamptz,
    PRIMARY KEY (group_id, version_id),
    CHECK (expired_at IS NULL OR expired_at >= created_at)
);
CREATE UNIQUE INDEX entities_current_id ON timestone.entities (group_id, id)
    WHERE expired_at IS NULL;
CREATE UNIQUE INDEX entities_current_name ON timestone.entities (group_id, entity_type, norm_name)
    WHERE expired_at IS NULL;
CREATE INDEX entities_norm ON timestone.entities (group_id, norm_name) WHERE expired_at IS NULL;
CREATE INDEX entities_trgm ON timestone.entities USING gin (norm_name gin_trgm_ops)
    WHERE expired_at IS NULL;
CREATE INDEX entities_fts ON timestone.entities USING gin (fts) WHERE expired_at IS NULL;
CREATE INDEX entities_history ON timestone.entities (group_id, id, created_at);

-- What an episode said about an entity: the entity's current state is a
-- function of its current mentions.
CREATE TABLE timestone.mentions (
    group_id    text        NOT NULL,
    version_id  uuid        NOT NULL DEFAULT gen_random_uuid(),
    id          uuid        NOT NULL,
    episode_id  uuid        NOT NULL,
    entity_id   uuid        NOT NULL,
    name        text        NOT NULL,
    labels      text[]      NOT NULL DEFAULT '{}',
    attributes  jsonb       NOT NULL DEFAULT '{}',
    summary     text,
    position    integer     NOT NULL,
    recorded_at timestamptz NOT NULL,
    created_at  timestamptz NOT NULL,
    expired_at  timestamptz,
    PRIMARY KEY (group_id, version_id),
    CHECK (expired_at IS NULL OR expired_at >= created_at)
);
CREATE UNIQUE INDEX mentions_current_id ON timestone.mentions (group_id, id)
    WHERE expired_at IS NULL;
CREATE INDEX mentions_entity ON timestone.mentions (group_id, entity_id) WHERE expired_at IS NULL;
CREATE INDEX mentions_episode ON timestone.mentions (group_id, episode_id);

-- What an episode said about a slot: facts are a function of the current
-- assertions, recomputed per slot by the date fight.
CREATE TABLE timestone.assertions (
    group_id    text        NOT NULL,
    version_id  uuid        NOT NULL DEFAULT gen_random_uuid(),
    id          uuid        NOT NULL,
    episode_id  uuid        NOT NULL,
    position    integer     NOT NULL,
    source_id   uuid        NOT NULL,
    relation    text        NOT NULL CHECK (relation <> ''),
    target_id   uuid        NOT NULL,
    cardinality text        NOT NULL CHECK (cardinality IN ('one', 'many')),
    fact        text        NOT NULL,
    attributes  jsonb       NOT NULL DEFAULT '{}',
    valid_at    timestamptz NOT NULL,
    invalid_at  timestamptz,
    recorded_at timestamptz NOT NULL,
    created_at  timestamptz NOT NULL,
    expired_at  timestamptz,
    PRIMARY KEY (group_id, version_id),
    CHECK (invalid_at IS NULL OR invalid_at > valid_at),
    CHECK (expired_at IS NULL OR expired_at >= created_at)
);
CREATE UNIQUE INDEX assertions_current_id ON timestone.assertions (group_id, id)
    WHERE expired_at IS NULL;
CREATE INDEX assertions_slot ON timestone.assertions (group_id, source_id, relation)
    WHERE expired_at IS NULL;
CREATE INDEX assertions_episode ON timestone.assertions (group_id, episode_id);

CREATE TABLE timestone.facts (
    group_id    text        NOT NULL,
    version_id  uuid        NOT NULL DEFAULT gen_random_uuid(),
    id          uuid        NOT NULL,
    source_id   uuid        NOT NULL,
    relation    text        NOT NULL,
    target_id   uuid        NOT NULL,
    cardinality text        NOT NULL CHECK (cardinality IN ('one', 'many')),
    fact        text        NOT NULL,
    attributes  jsonb       NOT NULL DEFAULT '{}',
    episodes    uuid[]      NOT NULL CHECK (cardinality(episodes) > 0),
    valid_at    timestamptz NOT NULL,
    invalid_at  timestamptz,
    embedding   vector,
    fts         tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, fact)) STORED,
    created_at  timestamptz NOT NULL,
    expired_at  timestamptz,
    PRIMARY KEY (group_id, version_id),
    CHECK (invalid_at IS NULL OR invalid_at > valid_at),
    CHECK (expired_at IS NULL OR expired_at >= created_at),
    -- A cardinality-one slot holds at most one current fact at any world time.
    CONSTRAINT facts_one_slot_no_overlap EXCLUDE USING gist (
        group_id WITH =, source_id WITH =, relation WITH =,
        tstzrange(valid_at, invalid_at) WITH &&
    ) WHERE (expired_at IS NULL AND cardinality = 'one')
);
CREATE UNIQUE INDEX facts_current_id ON timestone.facts (group_id, id) WHERE expired_at IS NULL;
CREATE INDEX facts_source ON timestone.facts (group_id, source_id, relation)
    WHERE expired_at IS NULL;
CREATE INDEX facts_target ON timestone.facts (group_id, target_id) WHERE expired_at IS NULL;
CREATE INDEX facts_fts ON timestone.facts USING gin (fts) WHERE expired_at IS NULL;
CREATE INDEX facts_history_source ON timestone.facts (group_id, source_id, created_at);
CREATE INDEX facts_history_target ON timestone.facts (group_id, target_id, created_at);

-- Physical erasures are recorded, without the content they erased.
CREATE TABLE timestone.purges (
    group_id    text        NOT NULL,
    id          uuid        NOT NULL DEFAULT gen_random_uuid(),
    episode_id  uuid        NOT NULL,
    purged_at   timestamptz NOT NULL,
    rows_erased integer     NOT NULL,
    PRIMARY KEY (group_id, id)
);

-- Tenancy: forced row level security on a per-transaction group setting.
-- A transaction that sets no group reads nothing and cannot write.
DO $rls$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['episodes', 'entities', 'mentions', 'assertions', 'facts', 'purges']
    LOOP
        EXECUTE format('ALTER TABLE timestone.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE timestone.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant ON timestone.%I '
            'USING (group_id = current_setting(''timestone.group_id'', true)) '
            'WITH CHECK (group_id = current_setting(''timestone.group_id'', true))', t);
        EXECUTE format('GRANT SELECT, INSERT, DELETE ON timestone.%I TO timestone_app', t);
    END LOOP;
END
$rls$;

-- Row versions are never updated in place: the library role may only stamp
-- expired_at.
GRANT UPDATE (expired_at) ON timestone.episodes, timestone.entities, timestone.mentions,
    timestone.assertions, timestone.facts TO timestone_app;
