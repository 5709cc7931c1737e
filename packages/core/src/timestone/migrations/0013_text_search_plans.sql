-- Full-text search plans its query for each call.
--
-- A search statement runs with a generic plan (one plan for every group: the
-- vector lists choose between index and exact scan per call, on the group's
-- size). The plan cache setting reaches into this function too, and a generic
-- plan of its query cannot tell a group that is most of the table from one
-- that is a sliver of it: it intersected the text match with every row of the
-- group (10 ms for a 95k-fact group, against 1 ms reading the text match and
-- filtering it). Planned per call, the query sees the group's share.
ALTER FUNCTION timestone.search_text(text, tsquery, timestamptz, timestamptz, text[], text[], integer)
    SET plan_cache_mode = force_custom_plan;
