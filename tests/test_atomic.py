"""The package's one way to write atomically (``disastir_mteb.util.atomic``): files, files a library writes to a
path itself, whole folders, and the leftovers of writers that were killed."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from disastir_mteb.util.atomic import (
    remove_orphans,
    staged_folder,
    temporary_beside,
    write_bytes_atomic,
    write_path_atomic,
)


def _gone_pid() -> int:
    """The process id of a process that has exited (and been reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    return int(child.stdout)


def _names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_a_library_writing_to_a_path_gets_a_hidden_temporary_and_the_file_appears_whole(tmp_path: Path) -> None:
    target = tmp_path / "vectors.npy"
    seen: list[Path] = []

    def write(temporary: Path) -> None:
        seen.append(temporary)
        assert temporary.parent == tmp_path and temporary.name.startswith(".vectors.npy.")
        assert temporary.is_file() and temporary.stat().st_size == 0  # there, empty, for the library to open
        assert not target.exists()  # nothing at the final name while it is written
        out = np.lib.format.open_memmap(temporary, mode="w+", dtype=np.float32, shape=(3, 2))
        out[:] = 1.5
        out.flush()
        del out

    write_path_atomic(target, write)
    assert np.load(target).tolist() == [[1.5, 1.5]] * 3 and _names(tmp_path) == ["vectors.npy"]
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # not the temporary file's private mode


def test_a_failed_write_leaves_the_old_file_and_no_temporary_and_names_the_file(tmp_path: Path) -> None:
    target = write_bytes_atomic(tmp_path / "result.json", b"old")

    def full_disk(temporary: Path) -> None:
        temporary.write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left on device") as raised:
        write_path_atomic(target, full_disk)
    assert raised.value.filename == str(target)  # the file it was for, not the hidden temporary
    assert target.read_bytes() == b"old" and _names(tmp_path) == ["result.json"]

    def library_error(temporary: Path) -> None:  # usearch reports an unwritable file as RuntimeError
        raise RuntimeError("cannot write")

    with pytest.raises(RuntimeError, match="cannot write"):
        write_path_atomic(target, library_error)
    assert target.read_bytes() == b"old" and _names(tmp_path) == ["result.json"]


def test_leftovers_of_killed_writers_go_and_a_running_writers_stay(tmp_path: Path) -> None:
    dead = _gone_pid()
    leftovers = [tmp_path / f".result.json.{dead}.k3j4h5.tmp", tmp_path / f".embeddings.npy.{dead}.tmp"]
    running = tmp_path / f".result.json.{os.getppid()}.a1b2c3.tmp"  # the parent process (pytest's shell): alive
    folder = tmp_path / f".sample.{dead}.x9y8z7.tmp"
    for path in [*leftovers, running]:
        path.write_bytes(b"partial")
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("{}")
    remove_orphans(tmp_path)
    assert _names(tmp_path) == [running.name]


def test_a_file_named_like_another_files_prefix_is_never_taken_for_its_temporary(tmp_path: Path) -> None:
    # "data" and "data.2024": the number in data.2024's name is not a writer's process id
    other = tmp_path / f".data.{_gone_pid()}"
    other.write_text("a user's hidden file")
    living = temporary_beside(tmp_path / "data.2024")  # this process is writing it
    remove_orphans(tmp_path, ".data.")
    assert other.exists() and living.exists()


def test_a_staged_folder_replaces_an_earlier_one_only_when_the_block_succeeds(tmp_path: Path) -> None:
    out = tmp_path / "sample"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(ValueError, match="generator failed"), staged_folder(out) as staging:
        (staging / "new.txt").write_text("new")
        raise ValueError("generator failed")
    assert _names(out) == ["old.txt"] and _names(tmp_path) == ["sample"]  # the earlier folder, no staging left
    with staged_folder(out) as staging:
        assert staging.name.startswith(".sample.") and staging.is_dir() and not any(staging.iterdir())
        (staging / "new.txt").write_text("new")
    assert _names(out) == ["new.txt"] and _names(tmp_path) == ["sample"]


def test_a_staged_folder_replaces_a_link_never_what_it_points_to(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("the user's")
    out = tmp_path / "export"
    out.symlink_to(target, target_is_directory=True)
    with staged_folder(out) as staging:
        (staging / "README.md").write_text("export")
    assert not out.is_symlink() and _names(out) == ["README.md"] and _names(target) == ["keep.txt"]


def test_the_last_check_before_the_swap_can_refuse_and_keeps_the_earlier_folder(tmp_path: Path) -> None:
    out = tmp_path / "export"

    def refuse(folder: Path) -> None:
        if folder.exists():
            raise FileExistsError(f"Refusing to replace {folder}: another process created it meanwhile.")

    with pytest.raises(FileExistsError, match="another process created it meanwhile"), \
            staged_folder(out, refuse) as staging:
        (staging / "mine.txt").write_text("mine")
        out.mkdir()  # another process, meanwhile
        (out / "theirs.txt").write_text("theirs")
    assert _names(out) == ["theirs.txt"] and _names(tmp_path) == ["export"]


def test_without_a_check_a_folder_that_appeared_meanwhile_is_replaced_whole(tmp_path: Path) -> None:
    out = tmp_path / "sample"

    def theirs_lands_now(folder: Path) -> None:  # after every check, just before the rename
        folder.mkdir()
        (folder / "theirs.txt").write_text("theirs")

    # the check itself found nothing, so the swap meets a folder that appeared between the check and the rename:
    # staged_folder renames it aside and puts its own in place, the earlier one is never left half-replaced
    with staged_folder(out, theirs_lands_now) as staging:
        (staging / "mine.txt").write_text("mine")
    assert _names(out) == ["mine.txt"] and _names(tmp_path) == ["sample"]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="zombies are read from /proc (Linux)")
def test_a_writer_that_is_a_zombie_is_gone(tmp_path: Path) -> None:
    """A killed run's worker stays a zombie until its new parent reaps it; its leftovers go at once all the same."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(500):  # exited, not yet reaped: Popen reaps only in wait() or poll()
            if Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
                break
            time.sleep(0.01)
        leftover = tmp_path / f".DisastIR-QA-Bio.json.{child.pid}.q1w2e3.tmp"
        leftover.write_text("{")
        remove_orphans(tmp_path)
        assert not leftover.exists()
    finally:
        child.wait()


def test_a_written_file_has_the_permissions_the_umask_gives_and_the_umask_is_left_as_it_was(tmp_path: Path) -> None:
    """Temporary files are private (0600); the result gets 0666 less the umask, which is read, never set, here."""
    before = os.umask(0o027)
    try:
        target = write_bytes_atomic(tmp_path / "result.json", b"{}")
        assert target.stat().st_mode & 0o777 == 0o640
        assert os.umask(0o027) == 0o027  # still the test's: reading it did not change it
    finally:
        os.umask(before)


def _modes_while(read_or_write: Callable[[], object], folder: Path, seconds: float) -> list[int]:
    """The modes of the files two threads create (umask 077, so 0600 each) while ``read_or_write`` runs in a loop.

    The interpreter switches threads every microsecond, so a umask changed for a moment in the loop (the portable way
    of reading it: set, then restore) is the umask some of the threads' files are created under. The loop stops
    early once a file came out with another mode.
    """
    before, interval = os.umask(0o077), sys.getswitchinterval()
    stop, modes = threading.Event(), []

    def create() -> None:
        number = 0
        while not stop.is_set():
            path = folder / f"other-{threading.get_ident()}-{number}"
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o666))
            modes.append(path.stat().st_mode & 0o777)
            path.unlink()
            number += 1

    threads = [threading.Thread(target=create) for _ in range(2)]
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and all(mode == 0o600 for mode in modes[-64:]):
            read_or_write()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(interval)
        os.umask(before)
    return modes


def test_a_write_never_changes_the_mode_of_files_other_threads_create(tmp_path: Path) -> None:
    """The umask is read, never set: a file another thread creates meanwhile keeps the process's umask.

    The control shows the check can fail: the set-and-restore way of reading the umask loses this race within
    seconds (within 0.25 s in six tries of six on the project's machine).
    """
    def set_and_restore() -> int:
        mask = os.umask(0o022)
        os.umask(mask)
        return mask

    racy = _modes_while(set_and_restore, tmp_path, seconds=10)
    assert any(mode != 0o600 for mode in racy), "the control did not provoke the race: the check proves nothing"
    ours = _modes_while(lambda: write_bytes_atomic(tmp_path / "result.json", b"{}"), tmp_path, seconds=1)
    assert len(ours) > 100 and {mode for mode in ours} == {0o600}
