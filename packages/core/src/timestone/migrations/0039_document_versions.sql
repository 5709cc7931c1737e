-- Every version of each document's chunks, by uri and version.
--
-- add_document numbers a new version of a document after the highest it ever had,
-- removed versions included (a version number is never given twice). The index of
-- a document's chunks (episodes_document, 0001) holds the current rows only, so
-- that lookup read every episode of the group: 38 ms an add_document among 61,000
-- chunks, and a collection stored document by document took time in the square of
-- its size. With this index the highest version is one index entry away.
CREATE INDEX episodes_document_versions
    ON timestone.episodes (group_id, document_uri, document_version)
    WHERE document_uri IS NOT NULL;
