-- The texts an item's vectors were embedded from, so that a move to another embedder
-- (Memory.reembed) embeds the same texts again. Neither the index a put was given nor
-- the paths a LangGraph store reads its fields at are stored anywhere else: without
-- them the vectors of an item kept the old embedder's space, and every search of the
-- items lost its scores.
--
-- A put keeps the texts it embedded, one per vector and in their order (embedding:
-- one text; field_embeddings: one text each). An empty array when the one text is the
-- value's JSON (put_item's default, index=True), which the value holds already. NULL
-- when the item has no vector of the memory's embedder: index=False, the property
-- graph's chunks and links, and the vectors a caller gave (namespace graph/vectors).
--
-- A row written before this migration holds NULL too, its texts unknown. Reembed
-- refuses a database whose current items hold such a vector (putting each again keeps
-- its texts), and clears the vector of such a version of the past, which an as_of
-- search then ranks after the scored ones.

ALTER TABLE timestone.items ADD COLUMN IF NOT EXISTS index_texts text[];
