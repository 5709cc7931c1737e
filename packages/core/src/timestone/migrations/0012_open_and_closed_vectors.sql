-- Fact vectors in two HNSW indexes: the open periods (invalid_at IS NULL) and
-- the closed ones.
--
-- A search of the present wants open periods, and facts whose period ends in
-- the future. With one index over every current version, a third or more of
-- what the graph walk meets in a long-lived group is closed periods, which the
-- time filter then throws away: the scan has to go around again, and the
-- closed periods take places a true fact should have had. Now a search of the
-- present reads the open index, and the few periods that end after the moment
-- it asks about through facts_closing below; a search of history (valid_at in
-- the past, or every period) reads both indexes.
--
-- The binding builds the HNSW indexes (their opclass needs the embedder's
-- dimension): dropping the old one here makes the next open build the two new
-- ones, which takes a while on a large database.
DROP INDEX IF EXISTS timestone.facts_embedding_hnsw;
-- version_id rides along so that reading the periods ending after a moment is
-- an index-only scan, which even a generic plan for a small table prefers to
-- reading the table.
CREATE INDEX facts_closing ON timestone.facts (group_id, invalid_at) INCLUDE (version_id)
    WHERE expired_at IS NULL AND invalid_at IS NOT NULL;
