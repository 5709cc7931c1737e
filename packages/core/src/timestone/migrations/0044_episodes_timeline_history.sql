-- The episodes next to one in the group's timeline (reference time, then id) as they
-- were held at a moment: an episodes search as of a system time lends a hit's credit
-- to the neighbours held then (search/_episodes_sql.py), among every version, where
-- episodes_timeline (migration 0036) holds the current ones only.
CREATE INDEX IF NOT EXISTS episodes_timeline_history
    ON timestone.episodes (group_id, reference_time, id);
