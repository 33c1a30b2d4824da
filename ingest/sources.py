"""Opening source files: plain or gzip, decoded as UTF-8 (bad bytes replaced, never fatal)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import IO


def open_text(path: str | Path) -> IO[str]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    with path.open("rb") as probe:
        magic = probe.read(2)
    raw = gzip.open(path, "rb") if magic == b"\x1f\x8b" else path.open("rb")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
