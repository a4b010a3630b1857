"""What the command line needs of a build without importing it: the stages' names, the requests in flight."""

from __future__ import annotations

__all__ = ["CONCURRENCY", "STAGES"]

STAGES = ("ingest", "passages", "categories", "queries", "filters", "pool", "judge", "quality", "write")
#: Requests in flight per server, by default (a build's servers are often one local engine).
CONCURRENCY = 4
