"""Opening source files: plain or gzip (by magic bytes), as UTF-8 text (bad bytes replaced, never fatal, a
byte order mark dropped) or bytes."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import IO

GZIP_MAGIC = b"\x1f\x8b"


class _GzipStream(io.RawIOBase):
    """A gzip file whose damaged data raises ``gzip.BadGzipFile`` (an OSError, which readers report)
    rather than ``zlib.error``; a truncated one raises EOFError, as gzip does."""

    def __init__(self, path: Path) -> None:
        self._inner = gzip.open(path, "rb")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        try:
            return self._inner.readinto(buffer)
        except zlib.error as exc:
            raise gzip.BadGzipFile(f"damaged gzip data: {exc}") from exc

    def close(self) -> None:
        self._inner.close()
        super().close()


def open_binary(path: str | Path) -> IO[bytes]:
    """The file's bytes, decompressed if it is gzip (whatever its name); for parsers that decode themselves (XML)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    with path.open("rb") as probe:
        magic = probe.read(2)
    return io.BufferedReader(_GzipStream(path)) if magic == GZIP_MAGIC else path.open("rb")


def open_text(path: str | Path) -> IO[str]:
    """The file's text (decompressed if gzip), a leading UTF-8 byte order mark dropped; line endings kept."""
    return io.TextIOWrapper(open_binary(path), encoding="utf-8-sig", errors="replace", newline="")
