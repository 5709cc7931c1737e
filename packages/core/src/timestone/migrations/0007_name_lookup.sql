-- Reads name an entity by its normalized name in any version (ids are stable, and an
-- as-of read may ask for an entity removed since): index that lookup for every
-- version, not only the current ones.
CREATE INDEX entities_norm_all ON timestone.entities (group_id, norm_name);
