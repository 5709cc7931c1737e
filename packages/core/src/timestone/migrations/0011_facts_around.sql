-- The facts at each end of an entity, newest in world time first.
--
-- Search reads the facts around the entities a query names and around their
-- neighbours, a fixed number per neighbour. Read from these indexes in
-- valid_at order, that number is all a search touches even when a neighbour
-- is a hub with thousands of facts (a city, a skill, the user); through the
-- (group_id, target_id) index it read every one of them (about 20 ms of a
-- search at 1M facts, against about 5 ms this way). The new target index
-- replaces the old one, which its first two columns serve; the source index
-- (group_id, source_id, relation) stays for the slot reads of every write.
CREATE INDEX facts_source_recent ON timestone.facts (group_id, source_id, valid_at)
    WHERE expired_at IS NULL;
CREATE INDEX facts_target_recent ON timestone.facts (group_id, target_id, valid_at)
    WHERE expired_at IS NULL;
DROP INDEX timestone.facts_target;
