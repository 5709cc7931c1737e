-- An episode is full-text indexed on its first 80,000 characters.
--
-- Postgres caps a text vector at 1 MB ("string is too long for tsvector"),
-- and an episode's `fts` was the vector of its whole name and content: an
-- `add_facts` call whose facts held more distinct words than that (1,000
-- facts with 500-character names of random words; 120 sentences of 9,000)
-- could not be stored at all. Measured, a vector takes at most about 4 bytes
-- a character of ASCII text (hyphenated words, indexed whole and in their
-- parts) and 6 of Greek or Cyrillic; at 4 bytes a character in UTF-8 it
-- would be near 9. The first 80,000 characters fit in every case. The
-- content is stored whole, and the facts of an `add_facts` call are indexed
-- one by one; only the episode's own text match misses words past the cap.
-- (An episode of `add_episode` holds 100,000 characters at most unless
-- `max_chars` is raised; a document's chunks, 1,500.)
--
-- Changing a generated column's expression in place needs Postgres 17: the
-- column is dropped and added again, which rewrites the table once and
-- builds its text index again.
DROP INDEX timestone.episodes_fts;
ALTER TABLE timestone.episodes DROP COLUMN fts;
ALTER TABLE timestone.episodes ADD COLUMN fts tsvector GENERATED ALWAYS AS
    (to_tsvector('english'::regconfig, left(name || ' ' || content, 80000))) STORED;
CREATE INDEX episodes_fts ON timestone.episodes USING gin (fts)
    WITH (gin_pending_list_limit = 256) WHERE expired_at IS NULL;
