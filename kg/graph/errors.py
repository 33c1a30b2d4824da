"""The graph stores' errors, shared by both adapters and caught by the service (503 for an unavailable
store, 500 for any other failure)."""

from __future__ import annotations

__all__ = ["TRANSACTION_ABORTED", "GraphStoreError", "GraphStoreLocked", "GraphStoreUnavailable"]


class GraphStoreError(RuntimeError):
    """A graph-store operation failed."""


# A statement that fails inside ``batch()`` fails the whole transaction on both backends: the later
# statements of the block and its commit raise this instead of writing anything.
TRANSACTION_ABORTED = "the transaction was rolled back because an earlier statement in it failed"


class GraphStoreUnavailable(GraphStoreError):
    """The store cannot be reached or opened (server down, wrong credentials, locked data dir)."""


class GraphStoreLocked(GraphStoreUnavailable):
    """The embedded store is held by another process (``medkg serve``, an ingest)."""
