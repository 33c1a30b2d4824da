"""The driver shared by the document loaders (PubMed, radiology reports): records are loaded in
batches, and every ``checkpoint_every`` records the work so far is made durable (graph, then indexes,
then fingerprints: a crash re-does at most the records since the last checkpoint), all inside the
graph store's bulk mode and under a progress bar."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from tqdm import tqdm

from kg.graph.base import BaseGraphStore
from kg.progress import progress_bar

__all__ = ["Batches", "batched_load"]

T = TypeVar("T")


class Batches(Generic[T]):
    """Records waiting to be loaded; see :func:`batched_load`."""

    def __init__(
        self,
        load_batch: Callable[[list[T]], None],
        commit: Callable[[], None],
        batch_size: int,
        checkpoint_every: int,
        bar: tqdm,
    ) -> None:
        self.load_batch = load_batch
        self.commit = commit
        self.batch_size = batch_size
        self.checkpoint_every = checkpoint_every
        self.bar = bar
        self.batch: list[T] = []
        self.since_commit = 0

    def tick(self) -> None:
        """One record read (the progress bar)."""
        self.bar.update(1)

    def add(self, record: T) -> None:
        self.batch.append(record)
        if len(self.batch) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        """Load the records waiting (also before a record that must not overtake them, e.g. a
        deletion), then commit if a checkpoint is due."""
        if self.batch:
            batch, self.batch = self.batch, []
            self.load_batch(batch)
            self.since_commit += len(batch)
        if self.since_commit >= self.checkpoint_every:
            self.commit()
            self.since_commit = 0


@contextmanager
def batched_load(
    store: BaseGraphStore,
    load_batch: Callable[[list[T]], None],
    commit: Callable[[], None],
    *,
    batch_size: int,
    checkpoint_every: int,
    progress: bool,
    desc: str,
    unit: str,
) -> Iterator[Batches[T]]:
    """``with batched_load(store, load_batch, commit, ...) as batches:`` then ``batches.tick()`` for
    every record read and ``batches.add(record)`` for each one to load. ``load_batch(records)`` loads
    a batch, ``commit()`` makes what was loaded durable. On a normal exit the last batch is loaded and
    committed; after an exception nothing more is (what was committed stays)."""
    with store.bulk(), progress_bar(desc=desc, unit=unit, disable=not progress, mininterval=0.5) as bar:
        batches = Batches(load_batch, commit, batch_size, checkpoint_every, bar)
        yield batches
        batches.flush()
        commit()
