-- The cardinality of relations the ontology does not declare, as a model answered it.
--
-- With an LLM configured (and Memory.open(infer_cardinality=True), the default), the
-- first write of a group that names a relation the ontology does not declare asks the
-- model once whether a subject can hold several such relations at once
-- (timestone.extract._cardinality_async). The answer is kept here, per group, and never asked
-- again for that name in that group: the primary key makes it one answer, and writers
-- that meet serialize on an advisory lock of the group and name before asking. A
-- declared edge type always wins over a row here. The call itself is in llm_ledger
-- (step "relation cardinality").

CREATE TABLE timestone.relation_cardinalities (
    group_id    text        NOT NULL,
    relation    text        NOT NULL,
    cardinality text        NOT NULL CHECK (cardinality IN ('one', 'many')),
    model       text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, relation)
);

ALTER TABLE timestone.relation_cardinalities ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant ON timestone.relation_cardinalities
    USING (group_id = current_setting('timestone.group_id', true))
    WITH CHECK (group_id = current_setting('timestone.group_id', true));
GRANT SELECT, INSERT ON timestone.relation_cardinalities TO timestone_app;
