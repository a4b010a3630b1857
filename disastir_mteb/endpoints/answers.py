"""What an OpenAI-compatible server's answer holds: its JSON, or the one chat completion a stream of events spells.

``transformers serve`` answers every chat request as server-sent events, even to ``"stream": false``, so such a
stream is folded into the completion it spells; anything else that is not JSON is said in one sentence.
"""

from __future__ import annotations

import json
import re
from typing import Any

from disastir_mteb.util.errors import InvalidInput

__all__ = ["chat_from_event_stream", "parsed_answer", "stream_error"]


def parsed_answer(raw: bytes, content_type: str) -> Any:
    """The JSON ``raw`` holds, a stream of chat-completion events folded into one completion.

    Raises:
        ValueError: not the protocol's: what it is instead, as the end of a sentence that begins "the server
            answered PATH with", with what to check.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInput(f"bytes that are not UTF-8 text (byte 0x{raw[error.start]:02x} at position "
                           f"{error.start:,} of {len(raw):,}), so not with the OpenAI API's JSON; check that this "
                           "base URL is the server's API (it usually ends in /v1)") from None
    if _is_event_stream(text, content_type):
        try:
            return chat_from_event_stream(text)
        except ValueError as error:
            raise InvalidInput(f"a stream of server-sent events ({content_type or 'no Content-Type'}, {len(raw):,} "
                               f"bytes) that is not a chat-completion stream: {error}; check that this base URL is a "
                               "chat-completions server (it usually ends in /v1)") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        shown = " ".join(text[:80].split())
        raise InvalidInput(f"something that is not JSON ({content_type or 'no Content-Type'}, {len(raw):,} bytes, "
                           f"beginning {shown!r}); check that this base URL is the server's API (it usually ends "
                           "in /v1)") from None


def _is_event_stream(text: str, content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == "text/event-stream" or text.lstrip().startswith("data:")


def stream_error(raw: bytes, content_type: str) -> str | None:
    """What a stream of server-sent events whose event is an error says (the server failed mid-answer), else None."""
    text = raw.decode("utf-8", errors="replace")
    if not _is_event_stream(text, content_type):
        return None
    try:
        chat_from_event_stream(text)
    except _StreamError as error:
        return str(error)
    except ValueError:  # not a chat stream at all: the answer's parse says so
        return None
    return None


class _StreamError(ValueError):
    """A stream of server-sent events whose event is an error (``{"error": ...}``): the server failed mid-answer."""


def chat_from_event_stream(text: str) -> dict[str, Any]:
    """The one chat completion a stream of server-sent ``chat.completion.chunk`` events spells.

    The first choice's ``delta.content`` pieces are joined (None without any), the last ``finish_reason`` and ``usage``
    kept.

    Raises:
        ValueError: not such a stream (an event that is not JSON or has no ``choices`` list, or no chunk at all),
            naming the event (from 1) and what it held, clipped.
    """
    events = []
    for number, block in enumerate(re.split(r"\r?\n\r?\n|\r\r", text.strip()), start=1):
        data = [line[5:].removeprefix(" ") for line in re.split(r"\r?\n|\r", block) if line.startswith("data:")]
        if data:
            events.append((number, "\n".join(data)))
    pieces: list[str] = []
    first: dict[str, Any] | None = None
    role, finish, usage = "assistant", None, None
    for number, data in events:
        if data.strip() == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            raise InvalidInput(f"event {number} is not JSON ({_clip(data)})") from None
        if isinstance(chunk, dict) and "error" in chunk and "choices" not in chunk:
            raise _StreamError(_clip(json.dumps(chunk["error"], ensure_ascii=False)))
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
            raise InvalidInput(f"event {number} is no chat.completion.chunk (no 'choices' list): {_clip(data)}")
        first = first if first is not None else chunk
        choice = chunk["choices"][0] if chunk["choices"] and isinstance(chunk["choices"][0], dict) else {}
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        if isinstance(delta.get("content"), str):
            pieces.append(delta["content"])
        role = delta["role"] if isinstance(delta.get("role"), str) else role
        finish = choice.get("finish_reason") or finish
        usage = chunk["usage"] if isinstance(chunk.get("usage"), dict) else usage
    if first is None:
        raise InvalidInput(f"it holds no chat.completion.chunk event (it begins {_clip(text.strip())})")
    completion: dict[str, Any] = {
        "id": first.get("id"), "object": "chat.completion", "created": first.get("created"),
        "model": first.get("model"),
        "choices": [{"index": 0, "message": {"role": role, "content": "".join(pieces) if pieces else None},
                     "finish_reason": finish}]}
    if usage is not None:
        completion["usage"] = usage
    return completion


def _clip(text: str, width: int = 80) -> str:
    """``text`` as ``repr`` shows it, cut to ``width`` characters: what a sentence quotes of a server's answer."""
    shown = repr(text)
    return shown if len(shown) <= width else shown[: width - 3] + "..."
