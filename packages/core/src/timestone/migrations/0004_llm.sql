-- LLM ingestion: the per-group budget and the ledger of every model call.
--
-- llm_budgets holds versions like every other table: changing a budget
-- expires the current version and inserts the new one. llm_ledger is
-- append-only: one row per model call, recorded with the episode that used it
-- (in the episode's transaction), or on its own when the work failed and
-- wrote nothing else, so that spent calls always count against the budget.

CREATE TABLE timestone.llm_budgets (
    group_id    text        NOT NULL,
    version_id  uuid        NOT NULL DEFAULT gen_random_uuid(),
    max_calls   integer     CHECK (max_calls IS NULL OR max_calls >= 0),
    max_tokens  bigint      CHECK (max_tokens IS NULL OR max_tokens >= 0),
    period      interval    NOT NULL CHECK (period > interval '0'),
    created_at  timestamptz NOT NULL,
    expired_at  timestamptz,
    PRIMARY KEY (group_id, version_id),
    CHECK (expired_at IS NULL OR expired_at >= created_at)
);
CREATE UNIQUE INDEX llm_budgets_current ON timestone.llm_budgets (group_id)
    WHERE expired_at IS NULL;

CREATE TABLE timestone.llm_ledger (
    group_id          text        NOT NULL,
    id                uuid        NOT NULL DEFAULT gen_random_uuid(),
    episode_id        uuid,
    step              text        NOT NULL,
    model             text        NOT NULL,
    prompt_tokens     integer     NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens integer     NOT NULL CHECK (completion_tokens >= 0),
    ok                boolean     NOT NULL,
    created_at        timestamptz NOT NULL,
    PRIMARY KEY (group_id, id)
);
CREATE INDEX llm_ledger_time ON timestone.llm_ledger (group_id, created_at);
CREATE INDEX llm_ledger_episode ON timestone.llm_ledger (group_id, episode_id)
    WHERE episode_id IS NOT NULL;

DO $rls$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['llm_budgets', 'llm_ledger']
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

GRANT UPDATE (expired_at) ON timestone.llm_budgets TO timestone_app;
