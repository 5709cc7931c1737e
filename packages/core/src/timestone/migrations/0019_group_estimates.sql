-- The planner takes any group for the whole table.
--
-- A search statement runs with a generic plan (one plan for every group,
-- planned once per connection), and every choice that depends on a group's
-- size is made per call, by an explicit count: a group with few current
-- rows is ranked exactly, a larger one through the HNSW indexes that every
-- group shares. A generic plan estimates a group's rows as the table over
-- the number of distinct groups. In a database of many tenants that made
-- every group look small, and the branch meant for a large group traded the
-- vector index for a scan of the group's rows and a sort by distance: with
-- the planner believing 2,000 groups, a search of a 95k-fact group in the
-- 100k-fact benchmark database took 321 ms at p50 instead of 6 to 9.
--
-- Pinning the number of distinct groups to 1 makes a generic plan assume the
-- largest group, which is the case the branches were built for; the
-- statements of a small group read their rows by key either way. Plans made
-- for a known group (the full-text function plans per call) still use the
-- table's statistics of that group: ANALYZE keeps its most common values.

DO $n$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['facts', 'entities', 'episodes', 'communities']
    LOOP
        EXECUTE format('ALTER TABLE timestone.%I ALTER COLUMN group_id SET (n_distinct = 1)', t);
        -- in force from the column's next analysis: now (a sample, seconds at 1M facts)
        EXECUTE format('ANALYZE timestone.%I (group_id)', t);
    END LOOP;
END
$n$;
