-- A write that extends a timeline reads its last period, not all of it.
--
-- The date fight of a cardinality-one slot (one source, one relation) read
-- every assertion and current version of the slot: one assertion into a
-- timeline of 5,000 periods cost about 0.3 s, and more with every period. An
-- assertion later than all the slot holds can change only the slot's last
-- period (each earlier one ends where the next begins), so the write now
-- reads the assertions and versions from the start of that period
-- (timestone.write._facts_async.read_slots). Both reads, and the two lookups that
-- decide it (the slot's latest assertion, the start of its last version),
-- are ranges of these indexes, which add valid_at to the slot's columns. The
-- indexes they replace served only equality on the slot, which the new ones
-- serve as well. Built once, on upgrade, while writes to the two tables wait.

CREATE INDEX assertions_slot_time ON timestone.assertions (group_id, source_id, relation, valid_at)
    WHERE expired_at IS NULL;
DROP INDEX timestone.assertions_slot;
CREATE INDEX facts_source_time ON timestone.facts (group_id, source_id, relation, valid_at)
    WHERE expired_at IS NULL;
DROP INDEX timestone.facts_source;
