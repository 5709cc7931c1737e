-- An entity's current mentions, in recording order.
--
-- A write that adds mentions to an entity continues the fold of its current
-- version when everything the entity was told before was recorded earlier;
-- it checks that with the latest recording time of the entity's current
-- mentions, which this index answers from its last entry (a busy entity's
-- mentions are not read). It replaces the index on (group_id, entity_id),
-- which its first two columns serve.
CREATE INDEX mentions_entity_order ON timestone.mentions (group_id, entity_id, recorded_at)
    WHERE expired_at IS NULL;
DROP INDEX timestone.mentions_entity;
