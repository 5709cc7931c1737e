-- Items indexed by several texts: one vector per text, an item scored by its
-- best one.
--
-- A LangGraph store configured with fields=["text", "color"] embeds each field
-- path separately and scores an item by the field nearest to the query (as
-- LangGraph's own stores do). Joining the fields into one text gave one
-- blurred vector instead: a query equal to one field no longer scored 1.
-- put_item(index=[...]) with two texts or more keeps their vectors here, and
-- leaves embedding NULL; one text still goes to embedding. Untyped like
-- embedding: searches compare only the vectors of the query's dimension.

ALTER TABLE timestone.items ADD COLUMN field_embeddings vector[];
