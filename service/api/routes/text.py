"""Text endpoints: passage search over the ingested abstracts, and entity linking of a question."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from kg.model import Entity
from service.api.deps import get_container
from service.container import Container

router = APIRouter(prefix="/v1", tags=["text"])
Deps = Annotated[Container, Depends(get_container)]


class PassageHit(BaseModel):
    id: str  # the passage, e.g. PMID:31675180#s4 (what an answer cites)
    doc_id: str
    title: str | None
    year: int | None
    text: str
    score: float
    dense: float | None
    bm25: float | None
    dense_rank: int | None
    bm25_rank: int | None
    retracted: bool


class LinkedMention(BaseModel):
    start: int
    end: int
    text: str
    method: str
    score: float
    entities: list[Entity]


@router.get("/search", response_model=list[PassageHit])
def search(
    c: Deps,
    q: Annotated[str, Query(min_length=1, max_length=2000, description="A question or keywords.")],
    k: Annotated[int, Query(ge=1, le=100)] = 10,
    mode: Literal["hybrid", "bm25", "dense"] = "hybrid",
) -> list[PassageHit]:
    hits = c.text_index.search(q, k=k, mode=mode, floor=c.settings.search_floor)
    return [PassageHit(**hit.__dict__) for hit in hits]


class SearchRequest(BaseModel):
    q: str = Field(min_length=1, max_length=2000, description="A question or keywords.")
    k: int = Field(default=10, ge=1, le=100)
    mode: Literal["hybrid", "bm25", "dense"] = "hybrid"


@router.post("/search", response_model=list[PassageHit])
def search_post(c: Deps, body: SearchRequest) -> list[PassageHit]:
    """The same search as ``GET /v1/search``, for long queries in a JSON body."""
    hits = c.text_index.search(body.q, k=body.k, mode=body.mode, floor=c.settings.search_floor)
    return [PassageHit(**hit.__dict__) for hit in hits]


@router.get("/link", response_model=list[LinkedMention])
def link(
    c: Deps, q: Annotated[str, Query(min_length=1, max_length=2000, description="A question.")]
) -> list[LinkedMention]:
    """The entities a question mentions (lexicon, abbreviations, everyday words, then the entity vector
    index)."""
    mentions = c.linker.link_query(q)
    entities = c.graph.get_entities({i for m in mentions for i in m.ids})
    return [
        LinkedMention(
            start=m.start,
            end=m.end,
            text=m.text,
            method=m.method,
            score=m.score,
            entities=[entities[i] for i in m.ids if i in entities],
        )
        for m in mentions
    ]
