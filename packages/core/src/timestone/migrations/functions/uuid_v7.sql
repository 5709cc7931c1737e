-- timestone.uuid_v7: its current definition, a repeatable migration (README.md here).
-- Earlier definitions, kept as history: migration(s) 0024.

-- Ids the database mints are time-ordered (UUID version 7), like those the
-- library mints (timestone.write._ids): a random UUID with its first six bytes
-- replaced by the time in milliseconds and its version field set from 4 to 7
-- (bits 52 and 53, counted from the lowest bit of each byte). Postgres 18 has
-- uuidv7(); this is the same layout written with built-in functions.
CREATE OR REPLACE FUNCTION timestone.uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE
RETURN encode(
    set_bit(set_bit(
        overlay(uuid_send(gen_random_uuid())
            PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                FROM 3)
            FROM 1 FOR 6),
        52, 1), 53, 1),
    'hex')::uuid;

REVOKE ALL ON FUNCTION timestone.uuid_v7() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION timestone.uuid_v7() TO timestone_app;
