-- The tables with HNSW indexes are vacuumed once 1% of their rows are dead,
-- not 20%.
--
-- A row version that is deleted (a purge, a removal) or closed by an update
-- (the date fight expiring a version, an entity's state replaced) stays in
-- the HNSW indexes until a vacuum removes it, and an index scan keeps
-- visiting it: it is reached, read from the table, found dead, and passed
-- over. Dead versions gather where their group's vectors are (the vectors
-- are keyed by group), so a purged or busy tenant slows down the searches
-- of whichever tenants are keyed near it. Measured in the 1M-fact benchmark
-- database after another tenant's 28,000 rows were purged (3% of the
-- table, far below autovacuum's default 20%): the vector list of a
-- 1,128-fact tenant read 6.8 ms at p50 (22 of 40 questions over 5 ms,
-- 5,000 to 15,000 index buffers each) and 1.3 ms after a vacuum (2 of 40
-- over 5 ms, about 500 to 1,000 buffers); its searches end to end 15 to 16
-- ms at p50 against 8.8 to 9.5.
--
-- A vacuum that finds dead rows rereads every HNSW index of its table (3 s
-- for facts at 100k facts, 41 s at 1M, unthrottled); one that finds none
-- costs next to nothing. At 1% of rows plus 1,000, a table of a million
-- facts is vacuumed after about 11,000 dead versions.

DO $n$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['facts', 'entities', 'episodes', 'communities']
    LOOP
        EXECUTE format(
            'ALTER TABLE timestone.%I SET (autovacuum_vacuum_scale_factor = 0.01,'
            ' autovacuum_vacuum_threshold = 1000)',
            t
        );
    END LOOP;
END
$n$;
