-- timestone.normal_relation: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0034.

-- The normal form of a relation name that is an identifier (letters, digits
-- and underscores, not starting with a digit, at most 128 characters):
-- timestone._records.check_relation. NULL for anything else, or where the
-- normal form is empty, starts with a digit or is longer than 128 characters.
-- COLLATE "C": upper-case ASCII letters only, whatever the database's locale.
CREATE OR REPLACE FUNCTION timestone.normal_relation(name text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN n ~ '^[A-Z][A-Z0-9_]*$' AND length(n) <= 128 THEN n END
    FROM (
        SELECT btrim(regexp_replace(
            upper(regexp_replace(name COLLATE "C", '([a-z0-9])([A-Z])', '\1_\2', 'g')),
            '_+', '_', 'g'), '_') AS n
    ) AS s
    WHERE name COLLATE "C" ~ '^[A-Za-z_][A-Za-z0-9_]{0,127}$'
$fn$;

REVOKE ALL ON FUNCTION timestone.normal_relation(text) FROM PUBLIC;
