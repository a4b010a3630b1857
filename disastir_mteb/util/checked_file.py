"""Files read back only whole and intact: named byte sections, a JSON header, and an xxh3-128 checksum of every byte.

For caches that must never serve a damaged byte nor run code (no pickle). Reading copies the file into memory, so
a file cut short meanwhile cannot kill the process, as a memory map would (``SIGBUS``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from disastir_mteb.util.atomic import write_stream_atomic
from disastir_mteb.util.errors import DisastirError, InvalidInput

__all__ = ["MAGIC", "CheckedFile", "DamagedFile", "read_checked", "write_checked"]

#: The last 8 bytes of every checked file (format 1).
MAGIC = b"DSTRCHK1"
_ALIGN = 64
_TAIL = 8 + 16 + len(MAGIC)  # header length, digest, magic
_READ = 1 << 22

#: A section: bytes (anything with the buffer protocol), or a function that writes them to a binary handle.
Section = bytes | bytearray | memoryview | Callable[[BinaryIO], object]


class DamagedFile(DisastirError, ValueError):
    """A checked file that cannot be used as written: cut short, damaged, or no checked file at all."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class CheckedFile:
    """A checked file read back: the caller's ``meta`` and each section's bytes (views of one buffer in memory)."""

    meta: dict[str, Any]
    sections: dict[str, memoryview]


class _Hashing:
    """A binary handle that hashes and counts what goes through it (all that Arrow's writers ask of a file)."""

    closed = False

    def __init__(self, handle: BinaryIO) -> None:
        import xxhash

        self._handle = handle
        self.digest = xxhash.xxh3_128()
        self.position = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.digest.update(view)
        self._handle.write(view)
        self.position += len(view)
        return len(view)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        self._handle.flush()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def close(self) -> None:
        """Nothing: a section's writer may close its sink, and the file goes on with the next section."""


def write_checked(path: str | Path, meta: Mapping[str, Any], sections: Mapping[str, Section]) -> Path:
    """Write ``sections`` (name -> bytes, or a function writing them to a handle) and ``meta`` atomically."""
    def write(handle: BinaryIO) -> None:
        sink = _Hashing(handle)
        placed: dict[str, list[int]] = {}
        for name, section in sections.items():
            sink.write(b"\0" * (-sink.position % _ALIGN))
            start = sink.position
            if callable(section):
                section(sink)  # type: ignore[arg-type]
            else:
                sink.write(section)
            placed[name] = [start, sink.position - start]
        header = json.dumps({"meta": dict(meta), "sections": placed}, ensure_ascii=False).encode("utf-8")
        sink.write(header)
        sink.write(len(header).to_bytes(8, "little"))
        handle.write(sink.digest.digest())
        handle.write(MAGIC)

    return write_stream_atomic(path, write)


def read_checked(path: str | Path) -> CheckedFile:
    """Read a file written by :func:`write_checked`, every byte checked before any is handed out.

    Raises:
        DamagedFile: the file is cut short, lacks :data:`MAGIC`, fails its checksum, or its header does not fit it.
        OSError: the file cannot be opened or read.
    """
    import numpy as np
    import xxhash

    path = Path(path)
    with open(path, "rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < _TAIL:
            raise DamagedFile(path, f"{size} bytes, shorter than a checked file's trailer (cut short)")
        data = np.empty(size, dtype=np.uint8)  # not zero-filled: every byte is read into it
        view = memoryview(data)
        digest = xxhash.xxh3_128()
        done, body = 0, size - 16 - len(MAGIC)
        while done < size:
            count = handle.readinto(view[done:done + _READ])
            if not count:
                raise DamagedFile(path, f"cut short while it was read ({done} of {size} bytes)")
            digest.update(view[done:min(done + count, body)] if done < body else b"")
            done += count
    if bytes(view[size - len(MAGIC):]) != MAGIC:
        raise DamagedFile(path, "does not end in the checked-file mark (cut short, or not a file this cache wrote)")
    if digest.digest() != bytes(view[body:body + 16]):
        raise DamagedFile(path, "its bytes fail their checksum (damaged on disk or changed since it was written)")
    header_length = int.from_bytes(view[body - 8:body], "little")
    try:
        header = json.loads(bytes(view[body - 8 - header_length:body - 8])) if header_length <= body - 8 else None
        sections = {str(name): view[int(start):int(start) + int(length)]
                    for name, (start, length) in header["sections"].items()
                    if 0 <= int(start) <= int(start) + int(length) <= body - 8 - header_length}
        if len(sections) != len(header["sections"]) or not isinstance(header["meta"], dict):
            raise InvalidInput("a section outside the file")
    except (ValueError, TypeError, KeyError) as error:
        raise DamagedFile(path, f"holds a header that does not describe it ({error})") from None
    return CheckedFile(meta=header["meta"], sections=sections)
