-- Items indexed by several texts (one vector per text, an item scored by its
-- best one), and values that read back as written.
--
-- A LangGraph store configured with fields=["text", "color"] embeds each field
-- path separately and scores an item by the field nearest to the query (as
-- LangGraph's own stores do). Joining the fields into one text gave one
-- blurred vector instead: a query equal to one field no longer scored 1.
-- put_item(index=[...]) with two texts or more keeps their vectors here, and
-- leaves embedding NULL; one text still goes to embedding. Untyped like
-- embedding: searches compare only the vectors of the query's dimension.

ALTER TABLE timestone.items ADD COLUMN field_embeddings vector[];

-- jsonb keeps numbers as numeric, which has no negative zero: -0.0 read back
-- as 0.0. An item whose value holds -0.0 also keeps its JSON text as written
-- (json keeps the text); reads take it when it is there. NULL for every other
-- item, so the text is not stored twice.

ALTER TABLE timestone.items ADD COLUMN value_exact json;
