-- A property graph upsert (graph_upsert, the LlamaIndex store) records its call as an
-- episode: the JSON of the nodes and relations it wrote. It was stored as source
-- 'json', a told episode, so context() and the episodes scope served the record of a
-- relation beside the fact, and went on serving it once the relation was deleted
-- (graph_retract expires the facts, not the record). Like add_facts' record it is a
-- record of structured facts (source 'facts'): the facts answer for it. The term
-- statistics follow (the episodes' trigger moves each record out of 'told episodes').
UPDATE timestone.episodes SET source = 'facts'
WHERE source = 'json' AND source_description = 'property graph store'
  AND name LIKE 'graph upsert at %' AND idempotency_key LIKE 'graph:%';
