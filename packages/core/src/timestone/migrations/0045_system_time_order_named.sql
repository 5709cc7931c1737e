-- Every versioned table checks that a version ends no earlier than it began
-- (expired_at >= created_at). The checks were left unnamed, so Postgres called them
-- <table>_check or <table>_check1, and a write refused by one said only that. Named
-- <table>_held_in_order, the refusal is recognised and explained: a write that closes a
-- version at a clock earlier than the version's start (the server's clock went back)
-- raises ClockWentBack (db/_database.wrap_db_error).
DO $rename$
DECLARE
    k record;
BEGIN
    FOR k IN
        SELECT c.relname AS tab, con.conname AS name
        FROM pg_constraint AS con
        JOIN pg_class AS c ON c.oid = con.conrelid
        WHERE con.connamespace = 'timestone'::regnamespace
          AND con.contype = 'c'
          AND pg_get_constraintdef(con.oid)
              = 'CHECK (((expired_at IS NULL) OR (expired_at >= created_at)))'
          AND con.conname <> c.relname || '_held_in_order'
    LOOP
        EXECUTE format('ALTER TABLE timestone.%I RENAME CONSTRAINT %I TO %I',
                       k.tab, k.name, k.tab || '_held_in_order');
    END LOOP;
END
$rename$;
