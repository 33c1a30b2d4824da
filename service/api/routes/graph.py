"""Knowledge-graph endpoints: stats, entity lookup and search, neighbours, bounded paths."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BaseModel

from kg.curie import CurieError
from kg.graph.base import BaseGraphStore
from kg.model import Entity, GraphStats, Neighbour, Relation, Subgraph
from service.api.deps import get_container, get_graph
from service.container import Container

router = APIRouter(prefix="/v1", tags=["graph"])
Graph = Annotated[BaseGraphStore, Depends(get_graph)]


class PathOut(BaseModel):
    nodes: list[Entity]
    relations: list[Relation]
    cost: int
    length: int


def _known(graph: BaseGraphStore, entity_id: str) -> Entity:
    """The entity, or 404 for an id the graph does not hold (rather than an empty answer that looks like no
    edges), an id that cannot be read as a CURIE included: no entity has it, and the detail says why."""
    try:
        found = graph.get_entity(entity_id)
    except CurieError as exc:
        raise HTTPException(status_code=404, detail=f"no entity {entity_id!r}: {exc}") from None
    if found is None:
        raise HTTPException(status_code=404, detail=f"no entity {entity_id!r}")
    return found


@router.get("/stats", response_model=GraphStats)
def stats(graph: Graph) -> GraphStats:
    return graph.stats()


@router.get("/entities", response_model=list[Entity])
def find_entities(
    graph: Graph,
    c: Annotated[Container, Depends(get_container)],
    q: Annotated[str, Query(min_length=1, max_length=500, description="A name or synonym (case-insensitive).")],
    category: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
    match: Annotated[
        Literal["exact", "prefix"],
        Query(description="exact: the whole name or a synonym; prefix: a word of it starts with q (autocomplete)."),
    ] = "exact",
) -> list[Entity]:
    if match == "exact":
        return graph.find_entities(q, category=category, limit=limit)
    found = c.name_index.complete(q, category=category, limit=limit)
    entities = graph.get_entities(f.id for f in found)
    return [entities[f.id] for f in found if f.id in entities]


NOT_FOUND = {404: {"description": "No entity has the id (an id that is not a CURIE included)."}}


@router.get("/entities/{entity_id:path}/neighbours", response_model=list[Neighbour], responses=NOT_FOUND)
def neighbours(
    graph: Graph,
    entity_id: str,
    type: Annotated[list[str] | None, Query(description="Relation types to follow.")] = None,
    direction: Literal["out", "in", "both"] = "both",
    include_invalid: bool = False,
    limit: Annotated[int, Query(ge=1, le=5000)] = 100,
) -> list[Neighbour]:
    _known(graph, entity_id)
    return graph.neighbours(
        entity_id, rel_types=type, direction=direction, include_invalid=include_invalid, limit=limit
    )


@router.get("/entities/{entity_id:path}/neighbourhood", response_model=Subgraph, responses=NOT_FOUND)
def neighbourhood(
    graph: Graph,
    entity_id: str,
    hops: Annotated[int, Query(ge=1, le=3)] = 2,
    type: Annotated[list[str] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
) -> Subgraph:
    _known(graph, entity_id)
    return graph.neighbourhood(entity_id, hops=hops, rel_types=type, limit=limit)


# Ids may hold "/" (e.g. DOI:10.1000/xyz): the routes take the rest of the path, the one-entity route
# last so that ".../neighbours" and ".../neighbourhood" are not read as part of an id.
@router.get("/entities/{entity_id:path}", response_model=Entity, responses=NOT_FOUND)
def get_entity(graph: Graph, entity_id: str) -> Entity:
    return _known(graph, entity_id)


@router.get("/paths", response_model=list[PathOut], responses=NOT_FOUND)
@router.get("/graph/paths", response_model=list[PathOut], responses=NOT_FOUND)
def paths(
    graph: Graph,
    source: Annotated[str, Query(min_length=1, max_length=200, description="An entity id (CURIE).")],
    target: Annotated[str, Query(min_length=1, max_length=200, description="An entity id (CURIE).")],
    max_hops: Annotated[int, Query(ge=1, le=4)] = 3,
    free_same_as: Annotated[int, Query(ge=0, le=3)] = 2,
    type: Annotated[list[str] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> list[PathOut]:
    _known(graph, source)  # no path between two known entities is [], an unknown one is not a question
    _known(graph, target)
    found = graph.paths(source, target, max_hops=max_hops, rel_types=type, limit=limit, free_same_as=free_same_as)
    entities = graph.get_entities({n for p in found for n in p.nodes})
    return [
        PathOut(nodes=[entities[n] for n in p.nodes], relations=p.relations, cost=p.cost, length=p.length)
        for p in found
    ]
