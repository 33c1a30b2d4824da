"""medkg as a Model Context Protocol server for LLM agents, through the official ``mcp`` SDK: a cited answer,
a differential diagnosis, entity lookup, neighbours, paths, passage search and a radiology report draft, each a
read-only tool with typed inputs (the HTTP API's bounds) and typed, structured outputs (the HTTP API's models).

Two transports: stdio (``medkg mcp``, for an agent that starts medkg itself) and streamable HTTP at ``/mcp`` on
every ``medkg serve`` (``medkg mcp --http`` starts one), where the HTTP API's own layers apply: API keys, the
loopback-only open mode and its Host/Origin check, the rate limit, the body limit, the in-flight limit, metrics.
The HTTP transport is stateless (JSON responses, no session), so any replica answers any call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import HTTPException
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError
from starlette.routing import Match, Route

from kg.curie import CurieError
from kg.errors import InvalidInput
from kg.graph.base import GraphStoreUnavailable
from kg.model import Entity, Neighbour
from service.api.routes import differential as differential_route
from service.api.routes import graph as graph_routes
from service.api.routes.differential import DifferentialRequest, DifferentialResponse
from service.api.routes.text import PassageHit
from service.qa.engine import QAOptions, QAResponse, UnknownSession
from service.qa.llm import LLMError
from service.radiology.generator import GeneratedReport, UnknownImage

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from service.container import Container

__all__ = ["MCP_PATH", "build_server", "http_endpoint", "mcp_route"]

log = logging.getLogger("medkg.mcp")
MCP_PATH = "/mcp"
INSTRUCTIONS = (
    "medkg answers clinical questions from a biomedical knowledge graph (HPO, Disease Ontology, drugs and their "
    "indications) and PubMed abstracts. Every statement of an answer or a report draft cites an evidence id "
    "(KG:... a graph fact, PMID:...#s.. a passage, IMG:... a prior study, IUXR:... a prior report); keep the "
    "citations when you quote it. Entity ids are CURIEs (HP:0001250, OMIM:154700, DOID:9352, DB00945): find one "
    "by name with find_entities. Drafts are preliminary and for a radiologist to review."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
Id = Annotated[str, Field(min_length=1, max_length=200, description="An entity id (CURIE), e.g. HP:0001250.")]


@contextmanager
def _as_tool_errors() -> Iterator[None]:
    """What the HTTP API answers 4xx/503 an agent gets as the tool's error, with the same message."""
    try:
        yield
    except HTTPException as exc:
        raise ToolError(str(exc.detail)) from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
        raise ToolError(problems) from None
    except (InvalidInput, CurieError) as exc:  # NotConfigured included (mode "llm" without an LLM)
        raise ToolError(str(exc)) from None
    except GraphStoreUnavailable as exc:
        raise ToolError(f"{exc}; retry in a few seconds") from None
    except UnknownImage as exc:
        raise ToolError(f"no indexed image {exc.args[0]!r}") from None
    except UnknownSession as exc:
        raise ToolError(str(exc)) from None
    except LLMError as exc:
        raise ToolError(f"the LLM failed ({exc.status}): {exc}") from None


def build_server(container: Callable[[], Container], observe: Callable[[QAResponse], None] | None = None) -> MCPServer:
    """The MCP server, its tools calling into ``container()`` (the server's, or the stdio process's own);
    ``observe``: told of each answer (the HTTP app's metrics)."""
    server = MCPServer(name="medkg", title="medkg", instructions=INSTRUCTIONS, version="0.1.0")

    def tool(fn: Callable[..., Any]) -> Callable[..., Any]:  # read-only; its docstring on one line
        description = " ".join((fn.__doc__ or "").split())
        return server.tool(annotations=READ_ONLY, description=description)(fn)

    @tool
    def ask(
        question: Annotated[str, Field(min_length=1, max_length=4000, description="A clinical question.")],
        k: Annotated[int, Field(ge=1, le=50, description="Passages to retrieve at most.")] = 8,
        hops: Annotated[int, Field(ge=0, le=4, description="Longest graph path between linked entities.")] = 2,
        mode: Annotated[
            Literal["auto", "extractive", "llm"], Field(description="auto: the LLM when configured, else extractive.")
        ] = "auto",
        image_id: Annotated[
            str | None, Field(max_length=200, description="An indexed study (IMG:...) whose priors to compare.")
        ] = None,
    ) -> QAResponse:
        """A cited answer to a clinical question from knowledge-graph facts and paths and literature passages;
        every sentence cites its evidence, and the answer abstains when the evidence does not support one."""
        with _as_tool_errors():
            options = QAOptions(k=k, hops=hops, mode=mode)
            answer = container().qa.ask(question, None, options, None, image_id)
        if observe is not None:
            observe(answer)
        return answer

    @tool
    def differential(
        terms: Annotated[
            list[str] | None, Field(max_length=200, description="Observed HPO terms (HP:0001250).")
        ] = None,
        text: Annotated[
            str | None, Field(max_length=5000, description='The patient in words; negated ones ("no ataxia") excluded.')
        ] = None,
        excluded: Annotated[list[str] | None, Field(max_length=500, description="HPO terms ruled out.")] = None,
        genes: Annotated[
            list[str] | None, Field(max_length=100, description="Candidate genes (HGNC symbols): only their diseases.")
        ] = None,
        namespaces: Annotated[
            list[str] | None, Field(max_length=5, description="Only these disease namespaces: OMIM, ORPHA, DECIPHER.")
        ] = None,
        top_k: Annotated[int, Field(ge=1, le=500)] = 10,
        phenopacket: Annotated[
            dict[str, Any] | None,
            Field(description="A GA4GH Phenopacket v2: its features and interpretations' genes join the case."),
        ] = None,
        sex: Annotated[
            Literal["male", "female"] | None, Field(description="The patient's sex: weighs X- and Y-linked diseases.")
        ] = None,
        age_years: Annotated[
            float | None, Field(ge=0, le=130, description="The patient's age: a later-onset disease weighs less.")
        ] = None,
    ) -> DifferentialResponse:
        """Rare diseases (OMIM, Orphanet) ranked for a patient's phenotypes (HPO terms, text or a phenopacket),
        each with its matched phenotypes, likelihood ratios, genes and PMIDs."""
        with _as_tool_errors():
            request = DifferentialRequest.model_validate(
                {
                    "terms": terms or [],
                    "text": text,
                    "excluded": excluded or [],
                    "genes": genes or [],
                    "namespaces": namespaces or [],
                    "top_k": top_k,
                    "phenopacket": phenopacket,
                    "sex": sex,
                    "age_years": age_years,
                }  # fmt: skip
            )
            return differential_route.differential(container(), request)

    @tool
    def get_entity(entity_id: Id) -> Entity:
        """One entity of the graph by its id: name, category, synonyms, definition, cross-references."""
        with _as_tool_errors():
            return graph_routes.get_entity(container().graph, entity_id)

    @tool
    def find_entities(
        name: Annotated[str, Field(min_length=1, max_length=500, description="A name or synonym.")],
        category: Annotated[str | None, Field(max_length=64, description="Disease, Phenotype, Drug, Gene, ...")] = None,
        match: Annotated[
            Literal["exact", "prefix"], Field(description="exact: a whole name or synonym; prefix: a word starts so.")
        ] = "exact",
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> list[Entity]:
        """Entities whose name or a synonym is ``name`` (case-insensitive), or, with match "prefix", has a word
        that starts with it."""
        with _as_tool_errors():
            c = container()
            return graph_routes.find_entities(c.graph, c, name, category, limit, match)

    @tool
    def neighbours(
        entity_id: Id,
        relation_types: Annotated[
            list[str] | None, Field(description="Relation types to follow (HAS_PHENOTYPE, TREATS, ...).")
        ] = None,
        direction: Literal["out", "in", "both"] = "both",
        limit: Annotated[int, Field(ge=1, le=5000)] = 100,
    ) -> list[Neighbour]:
        """The entities one relation away, with the relation (type, source, evidence)."""
        with _as_tool_errors():
            return graph_routes.neighbours(container().graph, entity_id, relation_types, direction, False, limit)

    @tool
    def paths(
        source: Id,
        target: Id,
        max_hops: Annotated[int, Field(ge=1, le=4)] = 3,
        relation_types: Annotated[list[str] | None, Field(description="Relation types to follow.")] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
    ) -> list[graph_routes.PathOut]:
        """The shortest paths between two entities (SAME_AS steps free), each with its nodes and relations."""
        with _as_tool_errors():
            return graph_routes.paths(container().graph, source, target, max_hops, 2, relation_types, limit)

    @tool
    def search_passages(
        query: Annotated[str, Field(min_length=1, max_length=2000, description="A question or keywords.")],
        k: Annotated[int, Field(ge=1, le=100)] = 10,
        mode: Literal["hybrid", "bm25", "dense"] = "hybrid",
    ) -> list[PassageHit]:
        """Passages of the ingested abstracts (and reports) for a query: id (what an answer cites), text,
        scores, whether the article is retracted."""
        with _as_tool_errors():
            c = container()
            hits = c.text_index.search(query, k=k, mode=mode, floor=c.settings.search_floor)
            return [PassageHit(**hit.__dict__) for hit in hits]

    @tool
    def draft_report(
        image_id: Annotated[str, Field(min_length=1, max_length=200, description="An indexed study (IMG:...).")],
        indication: Annotated[str, Field(max_length=2000, description="Why the study was done.")] = "",
        findings: Annotated[str, Field(max_length=10_000, description="The study's own findings, if known.")] = "",
        k: Annotated[int, Field(ge=1, le=20, description="Prior reports to draw on.")] = 5,
        mode: Literal["auto", "extractive", "llm"] = "auto",
    ) -> GeneratedReport:
        """A preliminary radiology report (technique, findings, impression, clinical context) for an indexed
        study, from the most similar prior studies and reports; every sentence cited."""
        with _as_tool_errors():
            generator = container().report_generator
            return generator.generate(indication, None, image_id, findings or None, k, mode)

    return server


def http_endpoint(server: MCPServer) -> ASGIApp:
    """The streamable HTTP endpoint of ``server`` as an ASGI app, for the medkg app's ``/mcp`` route
    (:func:`mcp_route`), whose middleware does the security (keys, open mode's Host/Origin check, limits): the
    SDK's own Host check is off. Stateless, JSON answers. ``server.session_manager.run()`` must be running
    while it serves (the app's lifespan), and runs once: each start of the app builds a new server."""
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    (route,) = [r for r in app.routes if isinstance(r, Route) and r.path == MCP_PATH]
    return route.endpoint


def mcp_route(current: Callable[[], ASGIApp]) -> Route:
    """``/mcp``, answered by ``current()`` (the endpoint of the server the app's lifespan runs). It names
    itself in the request's scope, as FastAPI's routes do, so the metrics label its requests ``/mcp``."""
    return _NamedRoute(MCP_PATH, endpoint=_Current(current))


class _Current:
    def __init__(self, current: Callable[[], ASGIApp]) -> None:
        self.current = current

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.current()(scope, receive, send)


class _NamedRoute(Route):
    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match != Match.NONE:
            child["route"] = self
        return match, child
