"""Question-answering benchmarks (MedQA, MedMCQA, MMLU-Med, PubMedQA, KG-RAG, MIRAGE) read into one
:class:`Item` model. A malformed record is reported as an :class:`Issue` and skipped; a file that
cannot be read at all raises :class:`DatasetError`.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from kg.errors import InvalidInput

__all__ = [
    "BENCHMARKS",
    "DatasetError",
    "Issue",
    "Item",
    "Kind",
    "LoadResult",
    "Question",
    "load",
    "load_jsonl_mcq",
    "load_kgrag_mcq",
    "load_kgrag_tf",
    "load_mirage",
    "load_pubmedqa",
]

Kind = Literal["mcq", "yesno", "truefalse"]
YES_NO_MAYBE = {"yes": "yes", "no": "no", "maybe": "maybe"}
TRUE_FALSE = {"True": "True", "False": "False"}
LETTERS = "ABCDEFGHIJ"


class DatasetError(InvalidInput):
    """The file cannot be read as the benchmark at all (missing, not JSON, wrong layout)."""


class Issue(BaseModel):
    file: str
    where: str  # "line 12", "id 25432938", "KG-RAG line 7"
    reason: str
    skipped: bool = True  # False: a quirk that was repaired and the item loaded

    def __str__(self) -> str:
        return f"{self.file}: {self.where}: {self.reason}{'' if self.skipped else ' (repaired, loaded)'}"


class Question(BaseModel):
    """What an answerer sees: the item without its answer (so no answer path can read the key)."""

    id: str
    dataset: str
    kind: Kind
    question: str
    options: dict[str, str]  # key -> text: letters for MCQs, yes/no/maybe, True/False
    subject: str | None = None
    context: str | None = None  # PubMedQA: the abstract without its conclusion


class Item(Question):
    answer: str = Field(description="The key of the right option.")

    @model_validator(mode="after")
    def _check(self) -> Item:
        if not self.question.strip():
            raise ValueError("the question is empty")
        if len(self.options) < 2:
            raise ValueError(f"{len(self.options)} option(s): at least 2 are needed")
        if any(not str(t).strip() for t in self.options.values()):
            raise ValueError("an option's text is empty")
        if self.answer not in self.options:
            raise ValueError(f"the answer {self.answer!r} is not one of the options {sorted(self.options)}")
        return self

    def public(self) -> Question:
        return Question(**self.model_dump(exclude={"answer"}))


class LoadResult(BaseModel):
    items: list[Item]
    issues: list[Issue]


def _err(exc: Exception) -> str:
    if hasattr(exc, "errors"):  # pydantic: the first problem, without its URL noise
        first = exc.errors()[0]  # type: ignore[attr-defined]
        msg = str(first.get("msg", exc)).removeprefix("Value error, ")
        loc = ".".join(str(p) for p in first.get("loc", ()))
        return f"{loc}: {msg}" if loc else msg
    return str(exc)


def _stable_id(prefix: str, text: str) -> str:
    return f"{prefix}:{hashlib.sha1(text.encode('utf-8')).hexdigest()[:12]}"


class _Collector:
    """Items and issues of one file; duplicate ids are issues too (resuming keys on ids)."""

    def __init__(self, path: Path) -> None:
        self.file = str(path)
        self.items: list[Item] = []
        self.issues: list[Issue] = []
        self._ids: set[str] = set()

    def issue(self, where: str, reason: str, skipped: bool = True) -> None:
        self.issues.append(Issue(file=self.file, where=where, reason=reason, skipped=skipped))

    def add(self, where: str, build: Callable[[_Collector, str], Item]) -> None:
        try:
            item = build(self, where)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self.issue(where, _err(exc))
            return
        if item.id in self._ids:
            self.issue(where, f"duplicate id {item.id!r}")
            return
        self._ids.add(item.id)
        self.items.append(item)

    def result(self) -> LoadResult:
        return LoadResult(items=self.items, issues=self.issues)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read it: {exc}") from None


# ---- MedQA / MedMCQA / MMLU JSONL ----------------------------------------------------------------
def _mcq_answer(record: dict[str, Any], options: dict[str, str]) -> str:
    idx = record.get("answer_idx")
    if isinstance(idx, str) and idx.strip():
        return idx.strip()
    answer = record.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise ValueError("no 'answer_idx' (nor an 'answer' naming an option)")
    answer = answer.strip()
    if answer in options:
        return answer
    matches = [k for k, t in options.items() if t.strip().casefold() == answer.casefold()]
    if len(matches) != 1:
        raise ValueError(f"'answer' {answer[:60]!r} is neither an option key nor one option's text")
    return matches[0]


def _mcq_item(record: Any, dataset: str, fallback_id: str) -> Item:
    if not isinstance(record, dict):
        raise ValueError(f"a JSON object is expected, not {type(record).__name__}")
    options = record.get("options")
    if isinstance(options, list):  # ["text", ...] -> A, B, ...
        if len(options) > len(LETTERS):  # a bad record, reported and skipped (not an IndexError)
            raise ValueError(f"{len(options)} options: at most {len(LETTERS)}")
        options = {LETTERS[i]: t for i, t in enumerate(options)}
    if not isinstance(options, dict):
        raise ValueError("'options' must be an object of letter -> text")
    options = {str(k).strip(): str(v).strip() if v is not None else "" for k, v in options.items()}
    rid = record.get("realidx", record.get("id", fallback_id))
    subject = record.get("subject") or record.get("meta_info")
    question = record.get("question")
    if not isinstance(question, str):
        raise ValueError("no 'question' text")
    return Item(
        id=str(rid),
        dataset=dataset,
        kind="mcq",
        question=question.strip(),
        options=options,
        answer=_mcq_answer(record, options),
        subject=str(subject) if subject else None,
    )


def load_jsonl_mcq(path: Path, dataset: str) -> LoadResult:
    """MedQA / MedMCQA / MMLU-Med JSONL (medagents-benchmark layout, one question a line): ``question``,
    ``options``, ``answer_idx`` (else ``answer``: the key or the option's text), an id in ``realidx`` (or
    ``id``), and ``subject`` or ``meta_info`` for the per-subject breakdown."""
    out = _Collector(path)
    for n, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            out.issue(f"line {n}", f"not JSON ({exc.msg} at column {exc.colno})")
            continue
        out.add(f"line {n}", lambda _c, _w, r=record, n=n: _mcq_item(r, dataset, f"line{n}"))
    return out.result()


# ---- PubMedQA ------------------------------------------------------------------------------------
def _pubmedqa_context(entry: dict[str, Any]) -> str | None:
    contexts = entry.get("CONTEXTS")
    if contexts is None:
        return None
    if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise ValueError("'CONTEXTS' must be a list of texts")
    labels = entry.get("LABELS") if isinstance(entry.get("LABELS"), list) else []
    parts = []
    for i, text in enumerate(contexts):
        label = labels[i] if i < len(labels) and isinstance(labels[i], str) and labels[i] else None
        parts.append(f"{label}: {text.strip()}" if label else text.strip())
    return "\n".join(parts) or None


def _pubmedqa_item(pmid: str, entry: Any) -> Item:
    if not isinstance(entry, dict):
        raise ValueError(f"a JSON object is expected, not {type(entry).__name__}")
    question = entry.get("QUESTION")
    if not isinstance(question, str):
        raise ValueError("no 'QUESTION' text")
    decision = entry.get("final_decision")
    if not isinstance(decision, str) or decision.strip().lower() not in YES_NO_MAYBE:
        raise ValueError(f"'final_decision' must be yes, no or maybe, not {decision!r}")
    return Item(
        id=str(pmid),
        dataset="pubmedqa",
        kind="yesno",
        question=question.strip(),
        options=dict(YES_NO_MAYBE),
        answer=decision.strip().lower(),
        context=_pubmedqa_context(entry),
    )


def load_pubmedqa(path: Path, with_context: bool = True) -> LoadResult:
    """PubMedQA PQA-L (``{PMID: {QUESTION, CONTEXTS, LABELS, final_decision}}``): yes / no / maybe, the
    context the abstract without its conclusion (``LONG_ANSWER``, the authors' answer, is never read);
    ``with_context=False`` drops the abstracts (the "reasoning-free" setting: the question alone)."""
    try:
        raw = json.loads(_read_text(path))
    except ValueError as exc:
        raise DatasetError(f"{path}: not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise DatasetError(f"{path}: a JSON object of PMID -> item is expected")
    out = _Collector(path)
    for pmid, entry in raw.items():
        out.add(f"id {pmid}", lambda _c, _w, p=pmid, e=entry: _pubmedqa_item(p, e))
    if not with_context:
        for item in out.items:
            item.context = None
    return out.result()


# ---- KG-RAG CSVs ---------------------------------------------------------------------------------
_GIVEN_LIST = re.compile(r"\s*Given list is\s*:.*$", re.IGNORECASE | re.DOTALL)


def _csv_rows(path: Path) -> Iterable[tuple[int, dict[str, str]]]:
    text = _read_text(path)
    reader = csv.DictReader(text.splitlines(keepends=True))
    if not reader.fieldnames:
        raise DatasetError(f"{path}: empty CSV (no header)")
    for row in reader:
        yield reader.line_num, row


def _kgrag_mcq_item(row: dict[str, str], out: _Collector, where: str) -> Item:
    text = (row.get("text") or "").strip()
    if not text:
        raise ValueError("no 'text'")
    listed = row.get("options_combined")
    if not listed or not listed.strip():
        raise ValueError("no 'options_combined'")
    listed_names = [o.strip() for o in listed.split(",") if o.strip()]
    names = list(dict.fromkeys(listed_names))
    if len(names) != len(listed_names):  # upstream quirk: a negative sample equal to the right gene
        twice = sorted({n for n in listed_names if listed_names.count(n) > 1})
        out.issue(where, f"option(s) {', '.join(twice)} listed twice: kept once", skipped=False)
    if len(names) > len(LETTERS):
        raise ValueError(f"{len(names)} options: at most {len(LETTERS)}")
    options = {LETTERS[i]: name for i, name in enumerate(names)}
    correct = (row.get("correct_node") or "").strip()
    keys = [k for k, name in options.items() if name == correct]
    if len(keys) != 1:
        raise ValueError(f"'correct_node' {correct!r} is not one of the options")
    # The stem without the list: the options are shown (and linked) as options, not as question words.
    stem = _GIVEN_LIST.sub("", text).strip().rstrip(".") + "?"
    return Item(
        id=_stable_id("kgrag_mcq", text),
        dataset="kgrag-mcq",
        kind="mcq",
        question=stem,
        options=options,
        answer=keys[0],
    )


def load_kgrag_mcq(path: Path) -> LoadResult:
    """KG-RAG's ``mcq_questions.csv`` (``text``, ``options_combined``, ``correct_node``); the options get
    the letters A-E in the order listed."""
    out = _Collector(path)
    for line, row in _csv_rows(path):
        out.add(f"line {line}", lambda c, w, r=row: _kgrag_mcq_item(r, c, w))
    return out.result()


def _kgrag_tf_item(row: dict[str, str]) -> Item:
    text = (row.get("text") or "").strip()
    if not text:
        raise ValueError("no 'text'")
    label = (row.get("label") or "").strip().lower()
    if label not in ("true", "false"):
        raise ValueError(f"'label' must be True or False, not {row.get('label')!r}")
    index = (row.get("") or row.get("index") or "").strip()
    return Item(
        id=f"kgrag_tf:{index}" if index else _stable_id("kgrag_tf", text),
        dataset="kgrag-tf",
        kind="truefalse",
        question=text,
        options=dict(TRUE_FALSE),
        answer=label.capitalize(),
    )


def load_kgrag_tf(path: Path) -> LoadResult:
    """KG-RAG's ``true_false_questions.csv`` (``text``, ``label`` True/False)."""
    out = _Collector(path)
    for line, row in _csv_rows(path):
        out.add(f"line {line}", lambda _c, _w, r=row: _kgrag_tf_item(r))
    return out.result()


# ---- MIRAGE benchmark.json -----------------------------------------------------------------------
def _mirage_item(dataset: str, qid: str, entry: Any) -> Item:
    if not isinstance(entry, dict):
        raise ValueError(f"a JSON object is expected, not {type(entry).__name__}")
    options = entry.get("options")
    if not isinstance(options, dict):
        raise ValueError("'options' must be an object of letter -> text")
    options = {str(k).strip(): str(v).strip() for k, v in options.items()}
    answer = str(entry.get("answer", "")).strip()
    if answer not in options:
        raise ValueError(f"the answer {answer!r} is not one of the options {sorted(options)}")
    question = entry.get("question")
    if not isinstance(question, str):
        raise ValueError("no 'question' text")
    words = {t.lower() for t in options.values()}
    if words and words <= set(YES_NO_MAYBE):  # PubMedQA*, BioASQ: yes/no(/maybe) as letters
        present = {t.lower(): t.lower() for t in options.values()}
        return Item(
            id=str(qid),
            dataset=dataset,
            kind="yesno",
            question=question.strip(),
            options=present,
            answer=options[answer].lower(),
        )
    return Item(id=str(qid), dataset=dataset, kind="mcq", question=question.strip(), options=options, answer=answer)


def load_mirage(path: Path, datasets: Iterable[str] | None = None) -> LoadResult:
    """MIRAGE's ``benchmark.json`` (``{dataset: {id: {question, options, answer}}}``; yes/no/maybe option
    sets, as in PubMedQA* and BioASQ, become yes/no/maybe items); ``datasets``: only these (e.g. ``["medqa"]``)."""
    try:
        raw = json.loads(_read_text(path))
    except ValueError as exc:
        raise DatasetError(f"{path}: not JSON: {exc}") from None
    if not _is_mirage(raw):
        raise DatasetError(f"{path}: not MIRAGE's layout {{dataset: {{id: {{question, options, answer}}}}}}")
    wanted = set(datasets) if datasets is not None else None
    if wanted is not None and not wanted & raw.keys():
        raise DatasetError(f"{path}: no dataset {sorted(wanted)} in it (it holds {sorted(raw)})")
    out = _Collector(path)
    for name, entries in raw.items():
        if wanted is not None and name not in wanted:
            continue
        if not isinstance(entries, dict):
            out.issue(f"dataset {name}", "not an object of id -> question")
            continue
        for qid, entry in entries.items():
            out.add(f"{name} id {qid}", lambda _c, _w, n=name, q=qid, e=entry: _mirage_item(n, q, e))
    return out.result()


def _is_mirage(raw: Any) -> bool:
    if not isinstance(raw, dict) or not raw:
        return False
    for entries in raw.values():
        if isinstance(entries, dict) and entries:
            first = next(iter(entries.values()))
            return isinstance(first, dict) and "options" in first and "question" in first and "answer" in first
    return False


# ---- by benchmark name ---------------------------------------------------------------------------
# benchmark -> (the MIRAGE dataset name, the description); the loader is chosen by the file's layout.
BENCHMARKS: dict[str, tuple[str | None, str]] = {
    "medqa": ("medqa", "MedQA-USMLE (4 options)"),
    "medmcqa": ("medmcqa", "MedMCQA"),
    "mmlu": ("mmlu", "MMLU-Med (6 medical subjects)"),
    "pubmedqa": ("pubmedqa", "PubMedQA (yes/no/maybe)"),
    "kgrag-mcq": (None, "KG-RAG gene multiple choice"),
    "kgrag-tf": (None, "KG-RAG true/false"),
}


def load(benchmark: str, path: Path, with_context: bool = True) -> LoadResult:
    """The items of ``benchmark`` in ``path``: its own layout, or MIRAGE's benchmark.json."""
    if benchmark not in BENCHMARKS:
        raise DatasetError(f"unknown benchmark {benchmark!r}: one of {', '.join(BENCHMARKS)}")
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: no such file")
    mirage_name = BENCHMARKS[benchmark][0]
    if path.suffix == ".json" and mirage_name is not None:
        try:
            raw = json.loads(_read_text(path))
        except ValueError as exc:
            raise DatasetError(f"{path}: not JSON: {exc}") from None
        if _is_mirage(raw):
            return load_mirage(path, [mirage_name])
    if benchmark in ("medqa", "medmcqa", "mmlu"):
        return load_jsonl_mcq(path, benchmark)
    if benchmark == "pubmedqa":
        return load_pubmedqa(path, with_context=with_context)
    if benchmark == "kgrag-mcq":
        return load_kgrag_mcq(path)
    return load_kgrag_tf(path)
