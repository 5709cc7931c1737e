-- timestone.known_names: its current definition, a repeatable migration (README.md here).

-- Of p_names (the words of a question written with a capital), those the caller's group
-- (timestone.group_id) knows as names: a current entity's name holds the word, or an
-- episode gives it as a speaker ("Caroline: ..." at the start of a line, as messages
-- are written). Only the first 200 episodes holding the word are read: a speaker's name
-- starts most of the lines that hold it. A definer function, as search_terms: under the
-- library's role, row level security keeps a full-text match (not leakproof) from the
-- indexes, and each word then read every episode of the group (200 ms for two words
-- among 7,249 document chunks); with custom plans each word is looked up through them
-- (docs/decisions/032-a-bounded-text-list.md).
--
-- As of a moment (the setting timestone.as_of of the transaction, set beside its group
-- by an as-of search), the names the group knew then: the entities and episodes held
-- at that moment (created by then, not ended by then), as the search reads them. The
-- current ones created by then are found through the same indexes; the versions that
-- ended after the moment, in no text index, through the group's key.
CREATE OR REPLACE FUNCTION timestone.known_names(p_names text[])
RETURNS SETOF text
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 3
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan
AS $fn$
DECLARE
    g text := current_setting('timestone.group_id', true);
    p_as_of timestamptz := nullif(current_setting('timestone.as_of', true), '')::timestamptz;
    w text;
    word text;
BEGIN
    IF g IS NULL OR g = '' THEN
        RETURN;
    END IF;
    FOREACH w IN ARRAY coalesce(p_names, '{}') LOOP
        CONTINUE WHEN w IS NULL OR w = '' OR length(w) > 200;
        -- the word as a regular expression matches it literally (every character
        -- that is not a letter, digit or underscore escaped)
        word := regexp_replace(w, '(\W)', '\\\1', 'g');
        IF p_as_of IS NULL THEN
            IF EXISTS (SELECT 1 FROM timestone.entities AS e
                       WHERE e.group_id = g AND e.expired_at IS NULL
                         AND e.fts @@ plainto_tsquery('simple', w)
                         AND e.norm_name ~* ('(^|\W)' || word || '(\W|$)'))
               OR EXISTS (SELECT 1 FROM (SELECT p.content FROM timestone.episodes AS p
                                         WHERE p.group_id = g AND p.expired_at IS NULL
                                           AND p.fts @@ plainto_tsquery('english', w)
                                         LIMIT 200) AS p
                          WHERE p.content ~ ('(^|\n)' || word || ':')) THEN
                RETURN NEXT w;
            END IF;
        ELSIF EXISTS (SELECT 1 FROM timestone.entities AS e
                      WHERE e.group_id = g AND e.expired_at IS NULL
                        AND e.created_at <= p_as_of
                        AND e.fts @@ plainto_tsquery('simple', w)
                        AND e.norm_name ~* ('(^|\W)' || word || '(\W|$)'))
           OR EXISTS (SELECT 1 FROM timestone.entities AS e
                      WHERE e.group_id = g AND e.expired_at IS NOT NULL
                        AND e.expired_at > p_as_of AND e.created_at <= p_as_of
                        AND e.fts @@ plainto_tsquery('simple', w)
                        AND e.norm_name ~* ('(^|\W)' || word || '(\W|$)'))
           OR EXISTS (SELECT 1 FROM (
                          (SELECT p.content FROM timestone.episodes AS p
                           WHERE p.group_id = g AND p.expired_at IS NULL
                             AND p.created_at <= p_as_of
                             AND p.fts @@ plainto_tsquery('english', w))
                          UNION ALL
                          (SELECT p.content FROM timestone.episodes AS p
                           WHERE p.group_id = g AND p.expired_at IS NOT NULL
                             AND p.expired_at > p_as_of AND p.created_at <= p_as_of
                             AND p.fts @@ plainto_tsquery('english', w))
                          LIMIT 200) AS p
                      WHERE p.content ~ ('(^|\n)' || word || ':')) THEN
            RETURN NEXT w;
        END IF;
    END LOOP;
END
$fn$;

REVOKE ALL ON FUNCTION timestone.known_names(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.known_names(text[]) TO timestone_app;
