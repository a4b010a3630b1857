"""Whether the Hugging Face Hub can be reached: one short probe, then the local cache only when it cannot."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from urllib.parse import urlsplit

__all__ = ["PROBE_SECONDS", "offline_if_unreachable"]

PROBE_SECONDS = 3
"""How long the probe waits for the Hub's host to accept a connection."""


def offline_if_unreachable(needs_hub: bool, *, say: Callable[[str], None] | None = None) -> bool:
    """Without a network, turn offline mode on (process, children, huggingface-hub) rather than retry for minutes.

    Only when ``HF_HUB_OFFLINE`` is unset and ``needs_hub``; ``say`` gets the one line. Returns whether it did.
    """
    if os.environ.get("HF_HUB_OFFLINE") or not needs_hub:
        return False
    import socket

    host = urlsplit(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=PROBE_SECONDS).close()
    except OSError:
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
        constants = sys.modules.get("huggingface_hub.constants")
        if constants is not None:  # imported already (sentence-transformers, datasets): its flag is read at import
            constants.HF_HUB_OFFLINE = True
        line = (f"disastir-mteb: {host} cannot be reached; using the local Hugging Face cache only "
                "(HF_HUB_OFFLINE=1).")
        if say is None:
            print(line, file=sys.stderr)
        else:
            say(line)
        return True
    return False
