-- The HNSW indexes hold each vector keyed by its group.
--
-- pgvector keeps at most ten rows of one vector in one graph node. When more
-- than ten groups hold the same sentence (seed data loaded into every tenant),
-- the later copies get nodes of their own, and those can fall out of the
-- graph's reach: a search through the index no longer finds them, even with
-- the query equal to the vector (bench.duplicates: 2 of 8 draws lost copies
-- from the eleventh group on).
--
-- The indexes are rebuilt on an expression: the vector normalized, followed by
-- eight coordinates drawn from the group id (timestone._vectors.keyed). The
-- copies of different groups are then different vectors, far apart, and a
-- group's vectors sit together in the graph, so a search filtered by group
-- reaches its rows sooner. Within a group the order by cosine distance is the
-- plain one. The expression needs the columns' dimension, which the binding
-- of the embedder gives: the indexes are dropped here and built again by
-- Memory.open (build_vector_indexes), as on a new binding.

DROP INDEX IF EXISTS timestone.episodes_embedding_hnsw;
DROP INDEX IF EXISTS timestone.entities_name_embedding_hnsw;
DROP INDEX IF EXISTS timestone.facts_embedding_hnsw;
DROP INDEX IF EXISTS timestone.facts_embedding_closed_hnsw;
DROP INDEX IF EXISTS timestone.communities_name_embedding_hnsw;
