"""Printing an answer for people: the answer, then each citation with where to check it."""

from __future__ import annotations

from rich.console import Console

from service.qa.engine import QAResponse

__all__ = ["print_answer"]


def print_answer(console: Console, r: QAResponse, show_timings: bool = True) -> None:
    console.print(f"[bold]Q:[/] {r.question}", highlight=False)
    if r.expanded_query != r.question:
        console.print(f"[dim]searched as: {r.expanded_query}[/]", highlight=False)
    label = "insufficient evidence" if r.insufficient_evidence else f"confidence {r.confidence:.2f}"
    console.print(f"[bold]A[/] ({r.mode}, {label}): {r.answer}", highlight=False, soft_wrap=True)
    for c in r.citations:
        title = f" {c.title}" if c.kind == "passage" and c.title else ""
        text = " ".join(c.text.split())
        text = text if c.kind == "kg" else text[:200] + ("..." if len(text) > 200 else "")
        console.print(f"  [{c.id}]{title}", highlight=False, soft_wrap=True)
        console.print(f"      {text}", highlight=False, soft_wrap=True)
        if c.url:
            console.print(f"      {c.url}", highlight=False)
    if r.dropped_citations:
        console.print(f"  [yellow]dropped (not in the evidence):[/] {', '.join(r.dropped_citations)}", highlight=False)
    for p in r.kg_paths[:3]:
        hops = [p.nodes[0]["name"]]
        for step, node in zip(p.steps, p.nodes[1:], strict=True):
            hops.append(f"-[{step.type}]- {node['name']} ({node['id']})")
        console.print("  path: " + " ".join(hops), highlight=False, soft_wrap=True)
    if show_timings:
        stages = ", ".join(f"{k} {v:.0f}" for k, v in r.timings_ms.items() if k != "total")
        console.print(
            f"[dim]{r.timings_ms.get('total', 0):.0f} ms ({stages}); {r.evidence.items} evidence items, "
            f"{r.evidence.tokens} tokens[/]",
            highlight=False,
        )
