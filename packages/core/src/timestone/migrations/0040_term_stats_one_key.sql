-- The term statistics keep one index, their primary key (group_id, kind, lexeme, id),
-- in place of the key (group_id, id) and the index (group_id, kind, lexeme).
--
-- Every statement of the functions that read and write the table (note_terms,
-- search_terms, search_text) names a group, a kind and its lexemes. With two indexes
-- that both begin with the group, a plan made while a group's statistics held a few
-- rows (a new database's table, not yet analysed, is one page) could read them through
-- either, and a pooled connection kept that plan: a write of three words then read all
-- of its group's rows through (group_id, id) and kept those of its words, thousands of
-- rows a write once the group had grown, until the table was next analysed. With one
-- index, each statement reads it by every column it names. The id stays the last
-- column: a lexeme may have several rows (note_terms.sql), each its own key.
ALTER TABLE timestone.term_stats DROP CONSTRAINT term_stats_pkey;
ALTER TABLE timestone.term_stats ADD PRIMARY KEY (group_id, kind, lexeme, id);
DROP INDEX timestone.term_stats_key;
