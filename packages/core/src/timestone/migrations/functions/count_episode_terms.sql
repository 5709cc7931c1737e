-- timestone.count_episode_terms: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0036.

-- The trigger of episodes: every episode under 'episodes', and those that are not
-- the record of structured facts also under 'told episodes' (migration 0031); an
-- episode's length is its words (fts_words, migration 0038).
CREATE OR REPLACE FUNCTION timestone.count_episode_terms()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
DECLARE
    groups text[];
    kinds text[];
    vectors tsvector[];
    signs integer[];
    lengths integer[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(x.group_id), array_agg(x.kind), array_agg(x.fts), array_agg(1),
               array_agg(r.fts_words)
        INTO groups, kinds, vectors, signs, lengths
        FROM new_rows AS r
        CROSS JOIN LATERAL (VALUES (r.group_id, 'episodes', r.fts),
                                   (CASE WHEN r.source <> 'facts' THEN r.group_id END,
                                    'told episodes', r.fts)) AS x(group_id, kind, fts)
        WHERE r.expired_at IS NULL AND x.group_id IS NOT NULL;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(x.group_id), array_agg(x.kind), array_agg(x.fts), array_agg(-1),
               array_agg(r.fts_words)
        INTO groups, kinds, vectors, signs, lengths
        FROM old_rows AS r
        CROSS JOIN LATERAL (VALUES (r.group_id, 'episodes', r.fts),
                                   (CASE WHEN r.source <> 'facts' THEN r.group_id END,
                                    'told episodes', r.fts)) AS x(group_id, kind, fts)
        WHERE r.expired_at IS NULL AND x.group_id IS NOT NULL;
    ELSE
        SELECT array_agg(x.group_id), array_agg(x.kind), array_agg(x.fts), array_agg(y.sign),
               array_agg(y.fts_words)
        INTO groups, kinds, vectors, signs, lengths
        FROM (SELECT r.group_id, r.source, r.fts, r.fts_words, -1 AS sign FROM old_rows AS r
              WHERE r.expired_at IS NULL
              UNION ALL
              SELECT r.group_id, r.source, r.fts, r.fts_words, 1 FROM new_rows AS r
              WHERE r.expired_at IS NULL) AS y
        CROSS JOIN LATERAL (VALUES (y.group_id, 'episodes', y.fts),
                                   (CASE WHEN y.source <> 'facts' THEN y.group_id END,
                                    'told episodes', y.fts)) AS x(group_id, kind, fts)
        WHERE x.group_id IS NOT NULL;
    END IF;
    PERFORM timestone.note_terms(groups, kinds, vectors, signs, lengths);
    RETURN NULL;
END
$fn$;

REVOKE ALL ON FUNCTION timestone.count_episode_terms() FROM PUBLIC;
