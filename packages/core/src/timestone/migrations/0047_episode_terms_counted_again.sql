-- The statistics of the kinds 'episodes' and 'told episodes' counted again from the
-- current rows, as 0042 counted 'episodes': 0046 as first written moved graph records
-- out of the told episodes through the episodes' term trigger, which on a database
-- upgraded from schema 37 or earlier ran that schema's definition (lengths in lexemes,
-- not words) and left the group's lengths and a 'told episodes' row wrong. Pending
-- rows (0041) of the two kinds go with the rest: each kind is one row per lexeme again.
DELETE FROM timestone.term_stats WHERE kind IN ('episodes', 'told episodes');
INSERT INTO timestone.term_stats (id, group_id, kind, lexeme, docs, length)
OVERRIDING SYSTEM VALUE
SELECT 0, d.group_id, d.kind, d.lexeme, sum(d.docs), sum(d.length)
FROM (
    SELECT r.group_id, r.kind, t.lexeme, 1::bigint AS docs, 0::bigint AS length
    FROM (SELECT p.group_id, 'episodes' AS kind, p.fts FROM timestone.episodes AS p
          WHERE p.expired_at IS NULL
          UNION ALL SELECT p.group_id, 'told episodes', p.fts FROM timestone.episodes AS p
          WHERE p.expired_at IS NULL AND p.source <> 'facts') AS r,
         unnest(tsvector_to_array(r.fts)) AS t(lexeme)
    UNION ALL
    SELECT p.group_id, x.kind, '', 1, p.fts_words
    FROM timestone.episodes AS p
    CROSS JOIN LATERAL (VALUES ('episodes'), (CASE WHEN p.source <> 'facts'
                                                   THEN 'told episodes' END)) AS x(kind)
    WHERE p.expired_at IS NULL AND x.kind IS NOT NULL
) AS d
GROUP BY d.group_id, d.kind, d.lexeme;
