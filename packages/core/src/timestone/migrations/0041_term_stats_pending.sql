-- The rows of term statistics other writers leave pending (id > 0, note_terms.sql)
-- get an index of their own, by group, kind and lexeme. The holder of a group's fold
-- lock reads it first: when the group has none (a group written by one writer at a
-- time, the common case), its deltas of every kind go to the main rows in one
-- statement, with no probe of the pending rows of each of its words.
CREATE INDEX term_stats_pending ON timestone.term_stats (group_id, kind, lexeme)
    WHERE id > 0;
