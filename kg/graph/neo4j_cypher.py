"""Every Cypher statement the Neo4j adapter runs (Neo4j 5.26: relationship types are real types, written
and matched through the dynamic ``$(...)`` syntax, so even types travel as parameters). The only text
assembled from pieces is a choice of fixed fragments and the integer path length, which Cypher wants as a literal.
"""

from kg.graph.rows import BRIEF_ENTITY_COLUMNS

SCHEMA = [
    "CREATE CONSTRAINT medkg_entity_id IF NOT EXISTS FOR (e:Entity) REQUIRE e.id IS UNIQUE",
    "CREATE INDEX medkg_entity_name_key IF NOT EXISTS FOR (e:Entity) ON (e.name_key)",
    "CREATE INDEX medkg_entity_category IF NOT EXISTS FOR (e:Entity) ON (e.category)",
]

_ENTITY = "e {.*} AS e"
# A relationship's subject and object are its start and end nodes, not copied into properties: a property
# named like a node key read in the same statement made the planner add an Eager barrier (bulk writes 10x slower).
_REL = "r {.*, type: type(r), subject: startNode(r).id, object: endNode(r).id}"

# Node lookups by id carry USING INDEX hints, so plans never fall back to scans on stale statistics (Neo4j
# re-plans at most every ~10 s).
FETCH_ENTITIES = f"UNWIND $ids AS i MATCH (e:Entity {{id: i}}) USING INDEX e:Entity(id) RETURN {_ENTITY}"

EXISTING_IDS = "UNWIND $ids AS i MATCH (e:Entity {id: i}) USING INDEX e:Entity(id) RETURN e.id"

DEGREES = "UNWIND $ids AS i MATCH (e:Entity {id: i}) USING INDEX e:Entity(id) RETURN e.id, COUNT { (e)--() }"

# Insert and update are one idempotent MERGE; the category is also a label (Disease, Gene, ...).
UPSERT_ENTITIES = """
UNWIND $rows AS row
MERGE (e:Entity {id: row.id})
ON CREATE SET e.created_at = row.created_at
WITH e, row, e.category AS old
FOREACH (_ IN CASE WHEN old IS NOT NULL AND old <> row.category AND old <> 'Entity' THEN [1] ELSE [] END |
    REMOVE e:$(old))
SET e.name = row.name, e.name_key = row.name_key, e.category = row.category,
    e.synonyms = row.synonyms, e.synonym_keys = row.synonym_keys, e.description = row.description,
    e.xrefs = row.xrefs, e.sources = row.sources, e.obsolete = row.obsolete, e:$(row.category)
"""

SCAN_ENTITIES = {
    False: f"MATCH (e:Entity) WHERE e.id > $after RETURN {_ENTITY} ORDER BY e.id LIMIT $limit",
    True: f"MATCH (e:Entity) WHERE e.id > $after AND size(coalesce(e.xrefs, [])) > 0 "
    f"RETURN {_ENTITY} ORDER BY e.id LIMIT $limit",
}

FIND_BY_KEY = f"""
CALL () {{
    MATCH (e:Entity {{name_key: $key}}) RETURN e
    UNION
    MATCH (e:Entity) WHERE $key IN e.synonym_keys RETURN e
}}
WITH e WHERE $category IS NULL OR e.category = $category
RETURN {_ENTITY} ORDER BY e.id LIMIT $limit
"""

# Edges by key: seek the subject by index, then expand from it inside a subquery, so that no plan
# (not even one made from stale statistics) can scan all relationships.
_BY_KEY = """
UNWIND $rows AS row
MATCH (a:Entity {id: row.subject}) USING INDEX a:Entity(id)
CALL (a, row) {
    MATCH (a)-[r]->(b:Entity) WHERE r.key = row.key AND r.current AND b.id = row.object
    RETURN r
}
"""
CURRENT_BY_KEY = _BY_KEY + f"RETURN {_REL}"

# New facts are CREATEd: the caller has just read, in the same transaction, that no current edge
# has their key. (MERGE would match the relationship with a plan chosen from statistics; on a small
# or freshly cleared graph that plan scans all relationships per row, and bulk loads ran 20x slower.)
CREATE_RELATIONS = """
UNWIND $rows AS row
MATCH (a:Entity {id: row.subject}), (b:Entity {id: row.object})
USING INDEX a:Entity(id) USING INDEX b:Entity(id)
CREATE (a)-[r:$(row.type)]->(b)
SET r.key = row.key, r.current = true, r.source = row.source, r.evidence = row.evidence,
    r.confidence = row.confidence, r.negated = row.negated, r.valid_from = row.valid_from
"""

REPLACE_RELATIONS = (
    _BY_KEY
    + """SET r.source = row.source, r.evidence = row.evidence, r.confidence = row.confidence,
    r.negated = row.negated, r.valid_from = row.valid_from"""
)

INVALIDATE_BY_KEY = _BY_KEY + "SET r.valid_to = $at, r.current = false RETURN count(r)"

DIRECTIONS = {"out": ("-", "->"), "in": ("<-", "-"), "both": ("-", "-")}
EXPAND = """
UNWIND $ids AS i
MATCH (a:Entity {{id: i}}){left}[r]{right}(b:Entity)
USING INDEX a:Entity(id)
WHERE {filters}
RETURN a.id AS from_id, r {{.*, type: type(r), subject: startNode(r).id, object: endNode(r).id}} AS rel, b {{.*}} AS nb
ORDER BY from_id, rel.type, nb.id, rel.key, rel.valid_from LIMIT $limit
"""
EXPAND_BRIEF = EXPAND.replace("b {{.*}} AS nb", "b {{" + ", ".join(f".{c}" for c in BRIEF_ENTITY_COLUMNS) + "}} AS nb")
CURRENT_FILTER = "r.valid_to IS NULL"
TYPE_FILTER = "type(r) IN $types"
TRUE_FILTER = "true"

PATHS = """
MATCH p = (a:Entity {{id: $source}})-[*{shortest}..{longest}]-(b:Entity {{id: $target}})
WHERE all(r IN relationships(p) WHERE r.valid_to IS NULL AND r.negated = false {type_filter})
  AND all(i IN range(0, size(nodes(p)) - 2) WHERE NOT nodes(p)[i] IN nodes(p)[i + 1..])
RETURN [n IN nodes(p) | n.id],
       [r IN relationships(p) | r {{.*, type: type(r), subject: startNode(r).id, object: endNode(r).id}}]
LIMIT $cap
"""
PATH_TYPE_FILTER = "AND type(r) IN $types"

RELATIONS_BY_ENDPOINTS = """
MATCH (a:Entity)-[r]->(b:Entity)
WHERE {filters}
RETURN r {{.*, type: type(r), subject: startNode(r).id, object: endNode(r).id}} AS rel
ORDER BY rel.key, rel.valid_from LIMIT $limit
"""
SUBJECT_FILTER = "a.id = $subject"
SUBJECTS_FILTER = "a.id IN $subjects"
OBJECT_FILTER = "b.id = $object"
RELTYPE_FILTER = "type(r) = $type"
SOURCE_FILTER = "r.source = $source"
AFTER_KEY_FILTER = "r.key > $after"

# Taken first in every write transaction: upserts read, then write, and Neo4j reads committed data only,
# so two writers could both find "no current edge" and both create one. One lock node serialises
# writers (as the embedded store's single writer does); readers never touch it.
WRITE_LOCK = "MERGE (l:MedkgWriteLock {id: 1}) SET l.n = coalesce(l.n, 0) + 1"
# the entities at one end of the current edges of some types ("every disease a drug treats")
HOLDERS = {
    end: f"MATCH (a:Entity)-[r]->(b:Entity) WHERE type(r) IN $types AND r.valid_to IS NULL RETURN DISTINCT {node}.id"
    for end, node in (("subject", "a"), ("object", "b"))
}

COUNT_ENTITIES_BY_CATEGORY = "MATCH (e:Entity) RETURN e.category, count(*)"
COUNT_ENTITIES = "MATCH (e:Entity) RETURN count(e)"  # no property read: the count store on Neo4j
COUNT_RELATIONS_BY_TYPE = "MATCH (:Entity)-[r]->(:Entity) RETURN type(r), r.valid_to IS NULL, count(*)"
COUNT_CURRENT_BY_SOURCE = "MATCH (:Entity)-[r]->(:Entity) WHERE r.valid_to IS NULL RETURN r.source, count(*)"

# Relationships first, in bounded transactions: DETACH DELETE of 10k nodes that include hubs (an HPO
# term with thousands of annotations) exceeded the transaction memory limit of a 1 GiB heap.
CLEAR_SOME = [
    "MATCH ()-[r]->() WITH r LIMIT 20000 DELETE r RETURN count(*)",
    "MATCH (e:Entity) WITH e LIMIT 20000 DETACH DELETE e RETURN count(*)",
]
