-- The term statistics keep one index, their primary key (group_id, kind, lexeme, id),
-- in place of the key (group_id, id) and the index (group_id, kind, lexeme), and a
-- lexeme's rows of a group and kind fold into one main row, id 0 (note_terms.sql).
--
-- Every statement of the functions that read and write the table (note_terms,
-- search_terms, search_text) names a group, a kind and its lexemes. With two indexes
-- that both begin with the group, a plan made while a group's statistics held a few
-- rows (a new database's table, not yet analysed, is one page) could read them through
-- either, and a pooled connection kept that plan: a write of three words then read all
-- of its group's rows through (group_id, id) and kept those of its words, thousands of
-- rows a write once the group had grown, until the table was next analysed. With one
-- index, each statement reads it by every column it names. The main row's key lets a
-- write add to it with one insert (ON CONFLICT ... DO UPDATE); the rows other writers
-- leave meanwhile keep their own ids.
ALTER TABLE timestone.term_stats DROP CONSTRAINT term_stats_pkey;
INSERT INTO timestone.term_stats (id, group_id, kind, lexeme, docs, length)
OVERRIDING SYSTEM VALUE
SELECT 0, s.group_id, s.kind, s.lexeme, sum(s.docs), sum(s.length)
FROM timestone.term_stats AS s
GROUP BY s.group_id, s.kind, s.lexeme
HAVING sum(s.docs) <> 0 OR sum(s.length) <> 0;
DELETE FROM timestone.term_stats WHERE id <> 0;
ALTER TABLE timestone.term_stats ADD PRIMARY KEY (group_id, kind, lexeme, id);
DROP INDEX timestone.term_stats_key;
