"""What an ingest did: counts written, records read, and the problems it skipped (file and line)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from kg.model import WriteSummary

MAX_PROBLEMS_KEPT = 200


class Problem(BaseModel):
    """A record that could not be loaded; the rest of the file still loads."""

    file: str
    line: int | None = None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.message}"


class IngestSummary(BaseModel):
    source: str
    entities: WriteSummary = Field(default_factory=WriteSummary)
    relations: WriteSummary = Field(default_factory=WriteSummary)
    read: dict[str, int] = Field(default_factory=dict)
    problems: list[Problem] = Field(default_factory=list)
    problem_count: int = 0
    notes: dict[str, int] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)
    seconds: float = 0.0

    def timed(self, stage: str, seconds: float) -> None:
        self.timings[stage] = round(self.timings.get(stage, 0.0) + seconds, 3)

    def count(self, what: str, n: int = 1) -> None:
        self.read[what] = self.read.get(what, 0) + n

    def note(self, what: str, n: int = 1) -> None:
        """Something worth reporting that is not an error (e.g. xrefs to sources not loaded)."""
        self.notes[what] = self.notes.get(what, 0) + n

    def problem(self, problem: Problem) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(problem)
