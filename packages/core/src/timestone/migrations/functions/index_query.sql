-- timestone.index_query: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0014, 0026.

-- A long question reads at most 16 of its words from the text indexes.
--
-- A question of many words (a pasted paragraph: some 1,400 words fit in the
-- 10,000 characters a search takes) is a conjunction of as many lexemes.
-- Postgres prices a GIN scan by its lexemes, found the scan of 1,400 dearer
-- than matching the query against every row, and chose that: 309 ms over
-- 40,000 facts, and more with every fact. A row that holds all the words
-- holds any 16 of them, so the index reads the first 16 (of those 0014 keeps,
-- at 250,000 rows and more) and every row it returns is checked against the
-- whole question (search_text's ts_match_vq), as with the common lexemes
-- 0014 leaves out. What a search finds is unchanged; questions of 16 words or
-- fewer, and those with OR, NOT or phrases, are read as before.

CREATE OR REPLACE FUNCTION timestone.index_query(p_query tsquery, p_table text)
RETURNS tsquery
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    parts text[];
    kept text[];
    lexemes text[];
    shares real[];
    small boolean;
    floor_rows text := coalesce(
        nullif(current_setting('timestone.text_narrowing_rows', true), ''), '250000');
BEGIN
    IF floor_rows !~ '^[0-9]{1,15}$' THEN
        RAISE EXCEPTION 'timestone.text_narrowing_rows must be a whole number of rows, not %',
            floor_rows USING ERRCODE = '22023';
    END IF;
    IF p_query IS NULL OR numnode(p_query) < 3 THEN
        RETURN p_query;
    END IF;
    small := (SELECT c.reltuples FROM pg_class AS c
              WHERE c.oid = ('timestone.' || p_table)::regclass) < floor_rows::real;
    IF small AND numnode(p_query) <= 2 * 16 - 1 THEN
        RETURN p_query;  -- 16 lexemes or fewer, on a table whose lists are short
    END IF;
    -- The text form of a conjunction is 'a' & 'b' & ...: a lexeme holds no space,
    -- quotes inside one are doubled, and any other operator fails the pattern.
    parts := string_to_array(p_query::text, ' & ');
    IF EXISTS (SELECT 1 FROM unnest(parts) AS p WHERE p !~ '^''([^''\\]|'''')*''$') THEN
        RETURN p_query;
    END IF;
    IF small THEN
        RETURN array_to_string(parts[1:16], ' & ')::tsquery;
    END IF;
    SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs
    INTO lexemes, shares
    FROM pg_stats AS s
    WHERE s.schemaname = 'timestone' AND s.tablename = p_table AND s.attname = 'fts';
    IF lexemes IS NOT NULL THEN  -- not yet analyzed: no lexeme is known to be common
        SELECT array_agg(p.part ORDER BY p.n) INTO kept
        FROM unnest(parts) WITH ORDINALITY AS p(part, n)
        WHERE coalesce(shares[array_position(
                  lexemes, replace(substr(p.part, 2, length(p.part) - 2), '''''', ''''))],
                  0) <= 0.1;
    END IF;
    kept := coalesce(kept, parts);  -- every lexeme common: all are read (up to 16)
    IF cardinality(kept) = cardinality(parts) AND cardinality(parts) <= 16 THEN
        RETURN p_query;
    END IF;
    RETURN array_to_string(kept[1:16], ' & ')::tsquery;
END
$fn$;

REVOKE ALL ON FUNCTION timestone.index_query(tsquery,text) FROM PUBLIC;
