-- Row level security applies to the library role, not to the schema owner.
--
-- Every table of a group's data had its policy forced on its owner too. A
-- superuser (the embedded server's user) is never subject to row level
-- security, so that changed nothing there; on a managed server the DSN's user
-- is an ordinary role that owns the schema, and the SECURITY DEFINER
-- functions run as that owner. Under a policy, a condition that is not
-- LEAKPROOF cannot be an index condition: the text match (@@) of
-- search_text and the trigram match (%) of similar_entities read every row
-- of the table instead of their indexes, and graph_ids_elsewhere, which asks
-- whether another group holds an id, could see no other group.
--
-- The library's queries run as timestone_app, which the policies still bind
-- (it is not the owner and has no BYPASSRLS). The functions that run as the
-- owner filter by the same per-transaction group setting themselves, and with
-- no group set they answer nothing. The owner's own connection runs only
-- migrations, index builds, ANALYZE and re-embedding, which are meant to
-- cover every group.

DO $rls$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['episodes', 'entities', 'mentions', 'assertions', 'facts',
                             'purges', 'communities', 'llm_budgets', 'llm_ledger', 'items']
    LOOP
        EXECUTE format('ALTER TABLE timestone.%I NO FORCE ROW LEVEL SECURITY', t);
    END LOOP;
END
$rls$;
