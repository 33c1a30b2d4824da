"""Helpers shared by the tests: local test servers, small stores, paths."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
