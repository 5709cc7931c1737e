-- An as-of search of a moment long past ranks what was held then exactly.
--
-- The current versions a search as of a moment T may return are those created
-- by T. The HNSW indexes hold every current version, so when few were created
-- by T (a moment before most of the group was written: before a large import,
-- say) a filtered index scan went on to hnsw.max_scan_tuples for too few rows,
-- and the versions were then ranked by a scan of every current row of the
-- group (about 0.5 s at 1M facts). This index reads a group's current versions
-- in creation order: a search as of T counts those created by T up to the
-- exact-ranking bound, and below it ranks them exactly, by key, without the
-- HNSW scan (timestone.search._run_async._few_created). A bulk load drops it with
-- the other read indexes and builds it at its end.

CREATE INDEX facts_created ON timestone.facts (group_id, created_at, id)
    WHERE expired_at IS NULL;
