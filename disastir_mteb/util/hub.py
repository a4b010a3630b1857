"""Whether the Hugging Face Hub can be reached: one 3-second probe, then the local cache only when it cannot.

Without a network, huggingface-hub retries each download for about a minute before its error (70 s for one
model name, measured offline); a run that needs the Hub probes it once and, when it cannot be reached, turns on
Hugging Face's own offline mode, so a model or dataset in the local cache loads at once and one that is not
fails at once. The command line and :func:`disastir_mteb.evaluate` both call :func:`offline_if_unreachable`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from urllib.parse import urlsplit

__all__ = ["PROBE_SECONDS", "offline_if_unreachable"]

PROBE_SECONDS = 3
"""How long the probe waits for the Hub's host to accept a connection."""


def offline_if_unreachable(needs_hub: bool, *, say: Callable[[str], None] | None = None) -> bool:
    """Without a network, load from the local Hugging Face cache at once instead of retrying for minutes.

    Only when ``HF_HUB_OFFLINE`` is unset and the model or the data would come from the Hub. Offline mode is
    huggingface-hub's and datasets' own switch, read when they are first imported: the variables are set for
    this process (and the processes it starts), and the flag of an already imported huggingface-hub too.

    Args:
        needs_hub: whether the model or the data would come from the Hub (no probe otherwise).
        say: where the one line saying so goes (default: stderr).

    Returns:
        True when the Hub could not be reached and offline mode was turned on.
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
