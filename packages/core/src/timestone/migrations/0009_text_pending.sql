-- GIN indexes keep a short pending list.
--
-- A GIN index takes new entries into a pending list that every search reads in
-- full until a vacuum or the list's limit merges it into the index. With the
-- default limit (4 MB), a group under steady ingestion measured 14-27 ms per
-- full-text lookup at 100k facts, against about 2 ms once merged. A 256 kB
-- limit bounds that scan; the merge it triggers more often is small, and it
-- did not change ingestion throughput in a measurement.
ALTER INDEX timestone.facts_fts SET (gin_pending_list_limit = 256);
ALTER INDEX timestone.entities_fts SET (gin_pending_list_limit = 256);
ALTER INDEX timestone.episodes_fts SET (gin_pending_list_limit = 256);
ALTER INDEX timestone.communities_fts SET (gin_pending_list_limit = 256);
-- the trigram index serves entity resolution inside every write
ALTER INDEX timestone.entities_trgm SET (gin_pending_list_limit = 256);
ALTER INDEX timestone.communities_members SET (gin_pending_list_limit = 256);
