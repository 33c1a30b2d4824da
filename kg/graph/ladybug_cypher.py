"""Every Cypher statement the Ladybug adapter runs (Ladybug's dialect: typed tables, walk semantics).
Values always travel as parameters; the only text assembled from pieces is a choice of fixed fragments
(direction arrows, optional filters) and the integer path length, which Ladybug's grammar wants as a literal.
"""

from kg.graph.rows import BRIEF_ENTITY_COLUMNS

# Edges of a list of nodes: the UNWIND form has a large fixed cost (150 ms directed, 300 ms undirected), the
# IN form ~0.2 ms per id (9 ids: 12 ms against 620 ms; ladybug 0.22, 50k entities / 200k relations). So edge
# queries exist in both forms and by_ids picks IN below this many ids.
EDGE_UNWIND_FROM = 1000


def by_ids(template: str, n_ids: int, var: str, **fragments: str) -> str:
    """Fill ``{ids_head}``, ``{ids_key}`` and ``{ids_where}`` of an edge query for ``n_ids`` ids
    bound to ``$ids`` and matched on node ``var``."""
    if n_ids < EDGE_UNWIND_FROM:
        ids = {"ids_head": "", "ids_key": "", "ids_where": f"{var}.id IN $ids AND "}
    else:
        ids = {"ids_head": "UNWIND $ids AS i ", "ids_key": " {id: i}", "ids_where": ""}
    return template.format(**ids, **fragments)


ENTITY_COLUMNS = (
    "id",
    "name",
    "name_key",
    "category",
    "synonyms",
    "synonym_keys",
    "description",
    "xrefs",
    "sources",
    "obsolete",
    "created_at",
)
RELATION_COLUMNS = (
    "key",
    "type",
    "subject",
    "object",
    "source",
    "evidence",
    "confidence",
    "negated",
    "valid_from",
    "valid_to",
)


# Named columns, not whole node or relationship values: ~3x faster to return (ladybug 0.22).
def _project(var: str, columns: tuple[str, ...]) -> str:
    return ", ".join(f"{var}.{c}" for c in columns)


E = _project("e", ENTITY_COLUMNS)
B = _project("b", ENTITY_COLUMNS)
R = _project("r", RELATION_COLUMNS)

SCHEMA = [
    """CREATE NODE TABLE IF NOT EXISTS Entity(
        id STRING PRIMARY KEY, name STRING, name_key STRING, category STRING,
        synonyms STRING[], synonym_keys STRING[], description STRING,
        xrefs STRING[], sources STRING[], obsolete BOOLEAN, created_at STRING)""",
    """CREATE REL TABLE IF NOT EXISTS Rel(FROM Entity TO Entity,
        key STRING, type STRING, subject STRING, object STRING, source STRING, evidence STRING,
        confidence DOUBLE, negated BOOLEAN, valid_from STRING, valid_to STRING)""",
]

# Node lookups by a list of ids always UNWIND: 3-14 ms for 1-4,000 ids, where ``WHERE e.id IN $ids`` grows
# with the list (4,000 ids: 570 ms; ladybug 0.22, 50k entities / 200k relations).
FETCH_ENTITIES = f"UNWIND $ids AS i MATCH (e:Entity {{id: i}}) RETURN {E}"

EXISTING_IDS = "UNWIND $ids AS i MATCH (e:Entity {id: i}) RETURN e.id"

DEGREES = "UNWIND $ids AS i MATCH (e:Entity {id: i}) RETURN e.id, COUNT { MATCH (e)-[:Rel]-(:Entity) }"

COPY_ENTITIES = "COPY Entity FROM arrow_table"

UPDATE_ENTITIES = """
UNWIND $rows AS row
MATCH (e:Entity {id: row.id})
SET e.name = row.name, e.name_key = row.name_key, e.category = row.category,
    e.synonyms = row.synonyms, e.synonym_keys = row.synonym_keys, e.description = row.description,
    e.xrefs = row.xrefs, e.sources = row.sources, e.obsolete = row.obsolete
"""

SCAN_ENTITIES = f"""
MATCH (e:Entity) WHERE e.id > $after {{xrefs_filter}}
RETURN {E} ORDER BY e.id LIMIT $limit
"""
XREFS_FILTER = "AND size(e.xrefs) > 0"

FIND_BY_KEY = f"""
MATCH (e:Entity)
WHERE (e.name_key = $key OR list_contains(e.synonym_keys, $key)) {{category_filter}}
RETURN {E} ORDER BY e.id LIMIT $limit
"""
CATEGORY_FILTER = "AND e.category = $category"

# Current out-edges of the given subjects; the caller keeps those whose key it asked for.
CURRENT_OF_SUBJECTS = f"""
{{ids_head}}MATCH (a:Entity{{ids_key}})-[r:Rel]->(b:Entity)
WHERE {{ids_where}}r.valid_to IS NULL
RETURN {R}
"""

# Updates and invalidations are rare next to inserts; matching each row by key costs ~0.3 ms a row.
DELETE_CURRENT_BY_KEY = """
UNWIND $rows AS row
MATCH (a:Entity {id: row.subject})-[r:Rel]->(b:Entity {id: row.object})
WHERE r.key = row.key AND r.valid_to IS NULL
DELETE r
"""

COPY_RELATIONS = "COPY Rel FROM arrow_table"

INVALIDATE_BY_KEY = """
UNWIND $rows AS row
MATCH (a:Entity {id: row.subject})-[r:Rel]->(b:Entity {id: row.object})
WHERE r.key = row.key AND r.valid_to IS NULL
SET r.valid_to = $at
RETURN count(r)
"""

# Direction fragments for EXPAND: (frontier)-[r]-(neighbour).
DIRECTIONS = {"out": ("-", "->"), "in": ("<-", "-"), "both": ("-", "-")}
EXPAND = f"""
{{ids_head}}MATCH (a:Entity{{ids_key}}){{left}}[r:Rel]{{right}}(b:Entity)
WHERE {{ids_where}}{{filters}}
RETURN a.id, {R}, {B} ORDER BY a.id, r.type, b.id, r.key, r.valid_from LIMIT $limit
"""
EXPAND_BRIEF = EXPAND.replace(B, _project("b", BRIEF_ENTITY_COLUMNS))
CURRENT_FILTER = "r.valid_to IS NULL"
ASSERTED_FILTER = "r.negated = false"
TYPE_FILTER = "list_contains($types, r.type)"
TRUE_FILTER = "true"

PATHS = """
MATCH p = (a:Entity {{id: $source}})-[:Rel*{shortest}..{longest} (r, n | WHERE {rel_filter})]-(b:Entity {{id: $target}})
WHERE is_acyclic(p)
RETURN properties(nodes(p), 'id'), rels(p)
LIMIT $cap
"""

RELATIONS_BY_ENDPOINTS = f"""
MATCH (a:Entity)-[r:Rel]->(b:Entity)
WHERE {{filters}}
RETURN {R} ORDER BY r.key, r.valid_from LIMIT $limit
"""
SUBJECT_FILTER = "a.id = $subject"
SUBJECTS_FILTER = "a.id IN $subjects"
OBJECT_FILTER = "b.id = $object"
RELTYPE_FILTER = "r.type = $type"
SOURCE_FILTER = "r.source = $source"
AFTER_KEY_FILTER = "r.key > $after"

# the entities at one end of the current edges of some types ("every disease a drug treats")
HOLDERS = {
    end: f"MATCH (a:Entity)-[r:Rel]->(b:Entity) WHERE r.type IN $types AND r.valid_to IS NULL RETURN DISTINCT {node}.id"
    for end, node in (("subject", "a"), ("object", "b"))
}

COUNT_ENTITIES_BY_CATEGORY = "MATCH (e:Entity) RETURN e.category, count(*)"
COUNT_ENTITIES = "MATCH (e:Entity) RETURN count(e)"  # no property read: the count store on Neo4j
COUNT_RELATIONS_BY_TYPE = "MATCH ()-[r:Rel]->() RETURN r.type, r.valid_to IS NULL, count(*)"
COUNT_CURRENT_BY_SOURCE = "MATCH ()-[r:Rel]->() WHERE r.valid_to IS NULL RETURN r.source, count(*)"

CLEAR = ["MATCH ()-[r:Rel]->() DELETE r", "MATCH (e:Entity) DELETE e"]
