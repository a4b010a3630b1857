"""A server's base URL: checked before anything is sent, and the other prefix an engine may answer under.

A typo in a URL should cost a second, not a model load; and engines differ in their prefix (Infinity answers without
``/v1``, vLLM, Ollama and llama.cpp under it), so a 404 is described with the prefix the server really answers under.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from disastir_mteb.util.errors import InvalidInput

__all__ = ["check_base_url", "listed_name", "other_bases", "prefix_advice"]


def check_base_url(url: str, option: str = "The base URL") -> str:
    """``url`` as a server's base URL (outer spaces and a trailing slash taken off), or one sentence saying why not.

    No credentials are accepted (a URL is printed in every message: the key belongs in an environment variable), nor a
    query, a fragment or a local file's path. ``option`` is how the sentence names it (``--embeddings-url``).

    Raises:
        ValueError: one sentence naming the option, the value and how to write it.
    """
    text = str(url).strip()
    example = "http://127.0.0.1:8000/v1"
    if not text:
        raise InvalidInput(f"{option} is empty; give the server's base URL, e.g. {example}.")
    if any(character.isspace() for character in text):
        raise InvalidInput(f"{option} {text!r} contains a space; a URL has none: write it as e.g. {example}.")
    if "://" not in text and Path(text).expanduser().is_file():
        raise InvalidInput(f"{option} {text!r} is a file, not a server's URL; give each server's base URL as an "
                           f"option of its own, e.g. {example}.")
    parts = urlsplit(text)
    if "://" not in text:
        head, slashes, tail = text.partition("//")  # http//host, https:/host, host:8000/v1
        scheme = "https" if text.startswith("https") else "http"
        bare = tail if slashes and head.rstrip(":") in ("http", "https") else text.split(f"{scheme}:", 1)[-1]
        try:
            suggestion = f"write it as {check_base_url(f'{scheme}://{bare}', option)}"
        except ValueError:  # no port after its ':', say: name the host and a port
            host = bare.split("/", 1)[0].split(":", 1)[0] or "127.0.0.1"
            suggestion = f"write it as e.g. {scheme}://{host}:8000/v1, with the port the server listens on"
        raise InvalidInput(f"{option} {text!r} has no scheme (http:// or https://); {suggestion}.")
    if parts.scheme not in ("http", "https"):
        raise InvalidInput(f"{option} {text!r} uses {parts.scheme or 'no'}://, not http:// or https://; a server's API "
                           f"is reached over HTTP, e.g. {example}.")
    if parts.username is not None or parts.password is not None:
        shown = urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[1], parts.path, "", ""))
        raise InvalidInput(f"{option} {shown} is given with credentials before its host; put the key in an "
                           "environment variable (OPENAI_API_KEY, or the one --api-key-env names), never in the URL.")
    if not parts.hostname:
        raise InvalidInput(f"{option} {text!r} names no host; write it as e.g. {example}.")
    if parts.netloc.endswith(":"):
        raise InvalidInput(f"{option} {text!r} has a ':' after its host but no port; write the port the server "
                           f"listens on, e.g. {parts.scheme}://{parts.hostname}:8000{parts.path}.")
    try:
        parts.port  # noqa: B018 (reading it checks it)
    except ValueError:
        port = parts.netloc.rsplit(":", 1)[-1]
        raise InvalidInput(f"{option} {text!r} has the port {port!r}, not a number from 1 to 65535; write the port "
                           f"the server listens on, e.g. {parts.scheme}://{parts.hostname}:8000{parts.path}.") from None
    if parts.port == 0:
        raise InvalidInput(f"{option} {text!r} has the port 0, not a number from 1 to 65535; write the port the "
                           "server listens on.")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise InvalidInput(f"{option} {text!r} has a query or fragment; a base URL ends with its path, e.g. "
                           f"{urlunsplit((parts.scheme, parts.netloc, parts.path, '', '')).rstrip('/')}.")
    return text.rstrip("/")


def other_bases(url: str) -> list[str]:
    """The same server under the other prefix: ``/v1`` taken off a base URL ending in it, else added.

    Examples:
        >>> other_bases("http://127.0.0.1:11434/api")
        ['http://127.0.0.1:11434/api/v1', 'http://127.0.0.1:11434/v1']
    """
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    paths = [path[:-len("/v1")]] if path.endswith("/v1") else [path + "/v1"] + (["/v1"] if path else [])
    return [urlunsplit((parts.scheme, parts.netloc, other, "", "")) for other in paths]


def prefix_advice(other: str) -> str:
    """``this server answers without /v1: try http://host:7997``, or ``under /v1`` where ``other`` has it."""
    where = "under /v1" if urlsplit(other).path.rstrip("/").endswith("/v1") else "without /v1"
    return f"this server answers {where}: try {other}"


def listed_name(model: str, listed: Sequence[str]) -> str | None:
    """The name in a server's model list that ``model`` asks for, or None when the server does not serve it.

    Exact, or with Ollama's implicit tag: it lists ``all-minilm:latest`` and serves it to a request for ``all-minilm``.
    """
    if model in listed:
        return model
    if ":" not in model and f"{model}:latest" in listed:
        return f"{model}:latest"
    return None
