-- The full-text indexes that searches of facts and episodes read keep no
-- pending list.
--
-- With fastupdate on (Postgres's default), a GIN index takes new entries into
-- a pending list that every lookup reads in full until a vacuum or the list's
-- limit merges it. Migration 0009 bounded the list at 256 kB; in the 100k-fact
-- benchmark database, a search still took 7.74 and 7.37 ms at p50 with about
-- 1,300 facts in the list against 6.41 and 6.71 once it was merged (nothing
-- else changed, two rounds). Written through (fastupdate off), each fact's
-- lexemes go into the index as it is inserted: no search reads a list.
-- Streaming writes of 100 facts a call measured the same either way, within
-- the noise of the machine (3,000 facts, three rounds each way in turn). A
-- bulk load drops these indexes and builds them at its end, so it does not
-- pay for the change.
--
-- The entity indexes keep their short list: an entity is written again each
-- time a fact touches it, and the trigram index takes a dozen entries a name.

ALTER INDEX IF EXISTS timestone.facts_fts_open SET (fastupdate = off);
ALTER INDEX IF EXISTS timestone.facts_fts_closed SET (fastupdate = off);
ALTER INDEX IF EXISTS timestone.episodes_fts SET (fastupdate = off);

-- what the lists already hold goes into the indexes now, not at the next vacuum
SELECT gin_clean_pending_list(i)
FROM unnest(ARRAY[
    to_regclass('timestone.facts_fts_open'),
    to_regclass('timestone.facts_fts_closed'),
    to_regclass('timestone.episodes_fts')
]) AS i
WHERE i IS NOT NULL;
