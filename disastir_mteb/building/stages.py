"""A build's stages, in order: the names ``--until`` takes and each stage's counts are printed under."""

from __future__ import annotations

__all__ = ["STAGES"]

STAGES = ("ingest", "passages", "categories", "queries", "filters", "pool", "judge", "quality", "write")
