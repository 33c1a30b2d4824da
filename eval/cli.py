"""``medkg eval ...``: the evaluations on the configured store. Mounted into the one ``medkg`` entry point
through the ``medkg.cli`` entry-point group (pyproject.toml), so the service layer never imports eval."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from service.cli.common import container, fail, settings

app = typer.Typer(help="Evaluations on the configured store.", no_args_is_help=True)
_EVAL_OUT_HELP = "Output folder (default: MEDKG_EVAL_DIR, which the page /eval plots; eval-results if unset)."


def _eval_dir(out: Path | None) -> Path:
    """``--out``, else the configured ``MEDKG_EVAL_DIR``: where the page /eval looks."""
    if out is not None:
        return out
    return settings().eval_dir


@app.command("phenopackets")
def eval_phenopackets(
    file: Annotated[Path, typer.Argument(help="Phenopacket cases, one JSON per line.", exists=True, dir_okay=False)],
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N cases.")] = None,
    out: Annotated[Path | None, typer.Option(help=_EVAL_OUT_HELP, file_okay=False)] = None,
    text: Annotated[
        bool, typer.Option("--text", help="Also write each case as text, link it back (with negation) and rank.")
    ] = False,
) -> None:
    """Differential diagnosis on published cases: top-1/3/10 and MRR beside two baselines (Resnik
    best-match average, pyhpo's set similarity), with 95% intervals of the differences; the figures go
    to OUT/<FILE's stem>.differential.json, which the web page /eval plots."""
    # eval drives the service layer; imported here, when the command runs, not at start-up.
    from eval.phenopackets import evaluate, report, save

    out = _eval_dir(out)
    try:  # before the run, not after it
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"cannot create the folder {out}: {exc.strerror or exc}") from None
    with container() as c:
        if not c.phenotype_index.diseases:
            raise fail("no disease annotations in the graph: run `medkg ingest hpo` first")
        result = evaluate(c.phenotype_index, c.graph, file, limit, linker=c.linker if text else None)
    report(result)
    Console(highlight=False, soft_wrap=True).print(f"wrote {save(result, out, file)}")


def _qa_eval_command(benchmark: str, summary: str) -> None:
    """``medkg eval <benchmark> FILE``: one QA benchmark through one answer mode (eval/qa_bench.py)."""

    @app.command(
        benchmark,
        short_help=f"{summary}: accuracy by answer mode (offline, closed-book, rag, kg-rag).",
        help=f"{summary}: accuracy (95% CI), per subject, parse rate, latency, tokens; per-question JSONL, "
        "metrics and summary.md in --out. Resumes: questions already answered there are skipped.",
    )
    def command(
        file: Annotated[Path, typer.Argument(help="The questions (or MIRAGE's benchmark.json).", dir_okay=False)],
        mode: Annotated[str, typer.Option(help="offline (no LLM), closed-book, rag (passages), kg-rag.")] = "offline",
        limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
        url: Annotated[str | None, typer.Option(help="A running medkg server: POST /v1/qa (kg-rag).")] = None,
        out: Annotated[Path | None, typer.Option(help=_EVAL_OUT_HELP, file_okay=False)] = None,
        k: Annotated[int, typer.Option(min=1, max=50, help="Passages to retrieve at most.")] = 8,
        hops: Annotated[int, typer.Option(min=0, max=4, help="Longest path between linked entities.")] = 2,
        budget: Annotated[int | None, typer.Option(min=100, max=16000, help="Evidence tokens at most.")] = None,
        context: Annotated[bool, typer.Option(help="PubMedQA: with the abstract (reasoning-required).")] = True,
        fresh: Annotated[bool, typer.Option("--fresh", help="Start over instead of resuming.")] = False,
        json_schema: Annotated[bool, typer.Option("--json-schema/--free-text", help="LLM answer format.")] = True,
        api_key: Annotated[
            str | None, typer.Option(envvar="MEDKG_EVAL_API_KEY", help="Key of the --url server.")
        ] = None,
    ) -> None:
        from eval.qa_bench import EvalError, run_cli, summary_line

        try:
            result = run_cli(
                benchmark, file, mode=mode, limit=limit, url=url, out=_eval_dir(out), k=k, hops=hops, budget=budget,
                context=context, fresh=fresh, json_schema=json_schema, api_key=api_key,
            )  # fmt: skip
        except EvalError as exc:
            raise fail(str(exc)) from None
        out_console = Console(highlight=False, soft_wrap=True)
        out_console.print(summary_line(result))
        files = result["files"]
        out_console.print(f"wrote {files['jsonl']}, {files['summary']}, {files['report']}")
        if result["interrupted"]:
            raise fail("interrupted: run the same command again to resume", code=130)


@app.command("plot")
def eval_plot(
    folder: Annotated[
        Path | None, typer.Argument(help="An output folder of `medkg eval` (default: MEDKG_EVAL_DIR).", file_okay=False)
    ] = None,
    out: Annotated[Path | None, typer.Option(help="The HTML file (default: FOLDER/report.html).")] = None,
) -> None:
    """Plot the runs in FOLDER (accuracy by dataset and mode, latency distributions, differential
    diagnosis runs) as one self-contained HTML page; the web page /eval shows the same charts for
    MEDKG_EVAL_DIR."""
    from service.web.eval_charts import collect_differential, collect_runs, render_report

    folder = _eval_dir(folder)
    if not folder.is_dir():
        raise fail(f"{folder} is not a folder: run `medkg eval medqa FILE --out {folder}` first")
    target = out or folder / "report.html"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_report(folder), encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {target}: {exc.strerror or exc}") from None
    runs = len(collect_runs(folder)) + len(collect_differential(folder))
    Console(highlight=False, soft_wrap=True).print(f"wrote {target} ({runs} runs)")


@app.command("pubmedqa-retrieval")
def eval_pubmedqa_retrieval(
    file: Annotated[Path | None, typer.Argument(help="PubMedQA JSON (default: the shared dev file).")] = None,
    distractors: Annotated[str | None, typer.Option(help="More abstracts (PubMed XML); '' for none.")] = None,
    floor: Annotated[float | None, typer.Option(help="Similarity floor of the floored hybrid run.")] = None,
    out: Annotated[Path | None, typer.Option(help=_EVAL_OUT_HELP, file_okay=False)] = None,
) -> None:
    """PubMedQA gold-abstract retrieval: Recall@1/5 and MRR of BM25, dense and hybrid (eval/pubmedqa_retrieval.py)."""
    from eval.pubmedqa_retrieval import main as retrieval_main

    out = _eval_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"cannot create the folder {out}: {exc.strerror or exc}") from None
    argv = [f"--file={file}"] if file else []
    argv += [f"--distractors={distractors}"] if distractors is not None else []
    argv += [f"--floor={floor}"] if floor is not None else []
    code = retrieval_main([*argv, "--json", str(out / "pubmedqa-retrieval.json")])
    if code:
        raise typer.Exit(code)


for _name, _summary in (
    ("medqa", "MedQA-USMLE"),
    ("medmcqa", "MedMCQA"),
    ("mmlu", "MMLU-Med"),
    ("pubmedqa", "PubMedQA yes/no/maybe"),
    ("kgrag-mcq", "KG-RAG gene multiple choice"),
    ("kgrag-tf", "KG-RAG true/false"),
):
    _qa_eval_command(_name, _summary)
