-- A property graph upsert (graph_upsert, the LlamaIndex store) records its call as an
-- episode: the JSON of the nodes and relations it wrote. It was stored as source
-- 'json', a told episode, so context() and the episodes scope served the record of a
-- relation beside the fact, and went on serving it once the relation was deleted
-- (graph_retract expires the facts, not the record). Like add_facts' record it is a
-- record of structured facts (source 'facts'): the facts answer for it.
--
-- The episodes' term trigger is off for the move: an upgrade runs the numbered
-- migrations before the functions' current files (functions/README.md), so the trigger
-- would run the definition an earlier schema left, which may not know the statistics'
-- rows of this one (one key, 0040; lengths in words, 0038): it failed, or counted
-- wrong. 0047 counts the episodes' statistics again from the rows.
ALTER TABLE timestone.episodes DISABLE TRIGGER episodes_terms_update;
UPDATE timestone.episodes SET source = 'facts'
WHERE source = 'json' AND source_description = 'property graph store'
  AND name LIKE 'graph upsert at %' AND idempotency_key LIKE 'graph:%';
ALTER TABLE timestone.episodes ENABLE TRIGGER episodes_terms_update;
