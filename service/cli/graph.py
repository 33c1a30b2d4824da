"""Looking into the graph and the indexes: counts, the configuration, an entity, names, neighbours,
paths, entities by meaning and passages for a query."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from kg.settings import Settings, SettingsError, load_settings
from service.cli.common import JsonOpt, container, emit, fail, out


def stats(as_json: JsonOpt = False) -> None:
    """Entity and relation counts of the configured graph store."""
    with container() as c:
        s = c.graph.stats()

    def render(data: dict[str, Any]) -> None:
        out.print(
            f"backend: [bold]{data['backend']}[/]  entities: {data['entities']:,}  "
            f"relations: {data['relations']:,} current, {data['invalidated_relations']:,} invalidated"
        )
        for title, counts in (("category", data["categories"]), ("relation type", data["relation_types"])):
            if counts:
                table = Table(title_justify="left")
                table.add_column(title)
                table.add_column("count", justify="right")
                for name, n in counts.items():
                    table.add_row(name, f"{n:,}")
                out.print(table)

    emit(s.model_dump(), as_json, render)


def config() -> None:
    """The effective configuration (secrets masked)."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        raise fail(str(exc)) from None
    data = json.loads(settings.model_dump_json())
    for name in Settings.model_fields:
        data[f"MEDKG_{name.upper()}"] = data.pop(name)
    emit(data, True)


def entity(
    entity_id: str,
    limit: Annotated[int, typer.Option(help="At most this many relations shown.")] = 200,
    as_json: JsonOpt = False,
) -> None:
    """One entity by CURIE (any source spelling: MIM:154700, Gene::4313, ...) with its current relations."""
    with container() as c:
        found = c.graph.get_entity(entity_id)
        if found is None:
            raise fail(f"no entity {entity_id!r}", code=1)
        nbrs = c.graph.neighbours(found.id, limit=limit)
    data = {**found.model_dump(mode="json"), "relations": [n.model_dump(mode="json") for n in nbrs]}

    def render(d: dict[str, Any]) -> None:
        out.print(f"[bold]{d['id']}[/]  {d['name']}  ({d['category']}{', obsolete' if d['obsolete'] else ''})")
        if d["description"]:
            out.print(d["description"], highlight=False)
        for label in ("synonyms", "xrefs", "sources"):
            if d[label]:
                out.print(f"{label}: " + ", ".join(d[label]), highlight=False)
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for n in d["relations"]:
            groups.setdefault((n["relation"]["type"], n["direction"]), []).append(n)
        for (rel_type, direction), items in sorted(groups.items()):
            arrow = f"-[{rel_type}]->" if direction == "out" else f"<-[{rel_type}]-"
            out.print(f"\n[bold]{arrow}[/] ({len(items)})")
            for n in items:
                rel, other = n["relation"], n["entity"]
                pmids = rel["evidence"].get("pmids") or []
                cited = f"  [{', '.join(pmids[:6])}{' ...' if len(pmids) > 6 else ''}]" if pmids else ""
                neg = "NOT " if rel["negated"] else ""
                out.print(f"  {neg}{other['name']} ({other['id']}){cited}", highlight=False)
        if len(d["relations"]) >= limit:
            out.print(f"(first {limit} relations; --limit for more)")

    emit(data, as_json, render)


def find(
    name: str,
    category: Annotated[str | None, typer.Option(help="Only this category, e.g. Disease.")] = None,
    limit: int = 20,
) -> None:
    """Entities whose name or synonym is NAME (case-insensitive)."""
    with container() as c:
        found = c.graph.find_entities(name, category=category, limit=limit)
    emit([e.model_dump(mode="json") for e in found], True)


def neighbours(
    entity_id: str,
    rel_type: Annotated[list[str] | None, typer.Option("--type", help="Relation type(s) to follow.")] = None,
    direction: Annotated[str, typer.Option(help="out, in or both.")] = "both",
    include_invalid: Annotated[bool, typer.Option(help="Also show invalidated (historic) edges.")] = False,
    limit: int = 50,
) -> None:
    """Neighbours of an entity with the relations that join them."""
    with container() as c:
        found = c.graph.neighbours(
            entity_id,
            rel_types=rel_type,
            direction=direction,  # type: ignore[arg-type]
            include_invalid=include_invalid,
            limit=limit,
        )
    emit([n.model_dump(mode="json") for n in found], True)


def paths(
    source: str,
    target: str,
    max_hops: Annotated[int, typer.Option(help="Hops that are not SAME_AS.")] = 3,
    free_same_as: Annotated[int, typer.Option(help="SAME_AS hops allowed on top, free of charge.")] = 2,
    rel_type: Annotated[list[str] | None, typer.Option("--type", help="Relation type(s) allowed.")] = None,
    limit: int = 10,
    as_json: JsonOpt = False,
) -> None:
    """Bounded paths between two entities (SAME_AS hops free)."""
    with container() as c:
        found = c.graph.paths(
            source, target, max_hops=max_hops, rel_types=rel_type, limit=limit, free_same_as=free_same_as
        )
        names = c.graph.get_entities({n for p in found for n in p.nodes})

    def render(data: list[dict[str, Any]]) -> None:
        if not data:
            out.print("no path")
        for p in data:
            parts = [f"{p['nodes'][0]} ({names[p['nodes'][0]].name})"]
            for rel, node in zip(p["relations"], p["nodes"][1:], strict=True):
                arrow = f"-[{rel['type']}]->" if rel["object"] == node else f"<-[{rel['type']}]-"
                parts.append(f"{arrow} {node} ({names[node].name})")
            out.print(f"cost {p['cost']}: " + " ".join(parts), highlight=False)

    emit([{**p.model_dump(mode="json"), "cost": p.cost} for p in found], as_json, render)


def similar(
    text: str,
    k: Annotated[int, typer.Option(help="How many entities.")] = 10,
) -> None:
    """Entities nearest in meaning to TEXT (the entity vector index)."""
    with container() as c:
        hits = c.entity_index.search(text, k=k)
        names = c.graph.get_entities(i for i, _ in hits)
    emit([{"id": i, "name": names[i].name if i in names else None, "score": round(s, 4)} for i, s in hits], True)


def search(
    query: str,
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="How many passages.")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid (BM25 + dense, RRF), bm25 or dense.")] = "hybrid",
    as_json: JsonOpt = False,
) -> None:
    """Passages for QUERY from the ingested abstracts, with their PMIDs."""
    if mode not in ("hybrid", "bm25", "dense"):
        raise fail(f"--mode must be hybrid, bm25 or dense (got {mode!r})")
    with container() as c:
        hits = c.text_index.search(query, k=k, mode=mode, floor=c.settings.search_floor)  # type: ignore[arg-type]
        data = [hit.__dict__ for hit in hits]

    def render(rows: list[dict[str, Any]]) -> None:
        if not rows:
            out.print("no passage matches (is anything ingested? `medkg ingest pubmed PATH`)")
            return
        for i, row in enumerate(rows, 1):
            flag = " [red]RETRACTED[/]" if row["retracted"] else ""
            title = row["title"] or ""
            out.print(f"[bold]{i}. {row['id']}[/] {title} ({row['year'] or 'n.d.'}){flag}", highlight=False)
            out.print(f"   score {row['score']}  cosine {row['dense']}  bm25 {row['bm25']}", highlight=False)
            out.print(f"   {row['text']}", highlight=False, soft_wrap=True)

    emit(data, as_json, render)


COMMANDS = [stats, config, entity, find, neighbours, paths, similar, search]
