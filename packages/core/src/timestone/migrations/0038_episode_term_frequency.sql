-- Okapi BM25 of episodes with term frequency: a word an episode repeats counts as
-- often as it occurs, and an episode's length is its number of words.
--
-- The length is stored beside the text vector: the words (runs of letters and
-- digits) of the same text the vector is built from, stop words included. The
-- term frequency needs no column: it is the number of positions the vector holds
-- for a lexeme (search_terms reads them for the question's lexemes only).
-- Changing nothing of the vector, the column adds itself to the rows already
-- written (the table is rewritten once).
ALTER TABLE timestone.episodes ADD COLUMN fts_words integer GENERATED ALWAYS AS
    (regexp_count(left(name || ' ' || content, 80000), '\w+')) STORED;

-- The total length of the episode kinds' statistics (under the lexeme ''), in words
-- from now on (count_episode_terms passes them to note_terms): recounted from the
-- current rows, as migration 0036 counted them.
DELETE FROM timestone.term_stats
WHERE kind IN ('episodes', 'told episodes') AND lexeme = '';
INSERT INTO timestone.term_stats (group_id, kind, lexeme, docs, length)
SELECT p.group_id, k.kind, '', count(*), sum(p.fts_words)
FROM timestone.episodes AS p
CROSS JOIN LATERAL (VALUES ('episodes'),
                           (CASE WHEN p.source <> 'facts' THEN 'told episodes' END)) AS k(kind)
WHERE p.expired_at IS NULL AND k.kind IS NOT NULL
GROUP BY p.group_id, k.kind;
