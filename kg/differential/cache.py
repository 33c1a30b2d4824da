"""The phenotype index's cache on disk: the index pickled with a stamp of what it was built from (its
version, the graph's counts, the embedder), and loaded back only as the index's own classes, numpy
arrays and plain containers; a cache that does not load, or is stale, is rebuilt by the caller."""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kg.differential.index import PhenotypeIndex

if TYPE_CHECKING:
    from pathlib import Path

    from kg.model import GraphStats

__all__ = ["PhenotypeCache", "phenotype_stamp"]

logger = logging.getLogger(__name__)

_PACKAGE = "kg.differential"


def phenotype_stamp(stats: GraphStats, embedder: str) -> str:
    """What a phenotype index is built from: its version, the graph's counts and the embedder's
    signature. A load that updates edges in place leaves the counts as they were: it forgets the cache."""
    return (
        f"v{PhenotypeIndex.CACHE_VERSION}:{stats.backend}:{stats.entities}:{stats.relations}:"
        f"{stats.invalidated_relations}:{embedder}"
    )


class _CacheUnpickler(pickle.Unpickler):
    """Unpickles the phenotype cache only: the index's own classes, numpy arrays and plain containers.
    Anything else (a pickle that would call arbitrary code) fails to load, and the cache is rebuilt."""

    _NUMPY = frozenset({"dtype", "ndarray", "_frombuffer", "_reconstruct", "scalar"})
    _BUILTINS = frozenset({"set", "frozenset", "list", "dict", "tuple", "bytes", "bytearray", "complex", "slice"})

    def find_class(self, module: str, name: str) -> Any:
        # kg.differential: a cache pickled before the package was split (the class is re-exported there)
        if module == _PACKAGE or module.startswith(_PACKAGE + "."):
            found = super().find_class(module, name)
            # a class of the package's own, not one a module of it imports
            if isinstance(found, type) and (found.__module__ + ".").startswith(_PACKAGE + "."):
                return found
        elif (module.startswith("numpy") and name in self._NUMPY) or (module == "builtins" and name in self._BUILTINS):
            return super().find_class(module, name)
        elif module == "collections" and name in ("defaultdict", "OrderedDict"):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"the phenotype cache names {module}.{name}, which it never holds")


class PhenotypeCache:
    """The phenotype index pickled at ``path``. ``stamp`` gives the stamp of what the graph and the
    settings hold now (:func:`phenotype_stamp`); it is called only when a cache is read or written."""

    def __init__(self, path: Path, stamp: Callable[[], str]) -> None:
        self.path = path
        self._stamp = stamp

    def load(self) -> PhenotypeIndex | None:
        """The cached index if it was built from what the graph and the settings hold now; else (none,
        stale, damaged, written by another version, naming anything but its own classes) ``None``."""
        if not self.path.exists():
            return None
        try:
            with self.path.open("rb") as f:
                cached = _CacheUnpickler(f).load()
            if isinstance(cached, dict) and cached.get("stamp") == self._stamp():
                index = cached.get("index")
                if isinstance(index, PhenotypeIndex):
                    return index
        except Exception as exc:  # noqa: BLE001 - a cache: what fails to load is rebuilt, never trusted
            logger.warning("the phenotype cache %s cannot be loaded (%s): rebuilding it", self.path, exc)
        return None

    def save(self, index: PhenotypeIndex) -> None:
        """Write ``index`` with the current stamp (whole or not at all: a temporary file replaced)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")  # replicas may write it at once
        with tmp.open("wb") as f:
            pickle.dump({"stamp": self._stamp(), "index": index}, f, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(self.path)

    def forget(self) -> None:
        """Drop the cached index: the next use rebuilds it."""
        self.path.unlink(missing_ok=True)
