"""Writing the command line's outputs so that no reader ever sees half of one.

Every file and directory is made under a temporary name next to its place and renamed into it, so a failure
(a full disk, a killed process, an unwritable place) leaves the previous output as it was and nothing half-written
beside it. Failures are CommandErrors naming the flag.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path

from webhook.cli.errors import CommandError

log = logging.getLogger("ringroute.outputs")

_LISTED = 3
"""Foreign names quoted when a directory is refused; the rest are counted."""


def _default_mode(directory: bool) -> int:
    """What `mkdir`/`open` would give under the current umask (tempfile's names are private: 0700/0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def _fsync(path: Path) -> None:
    """Flush a file's or directory's data to disk, so a rename never publishes an empty file after a crash."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _failure(flag: str, target: Path, action: str, exc: OSError) -> CommandError:
    return CommandError(f"{flag} {target}: cannot {action}: {exc.strerror or exc}")


def replace_directory(
    target: Path, files: Mapping[str, str | Iterable[str]], *, flag: str, replaceable: Collection[str]
) -> None:
    """Make `target` a directory holding exactly `files` (name -> text, or pieces of text written one by one so a
    large file is never held whole), replacing an existing one as a whole.

    The files go into a new directory beside `target`, which then takes its place by rename: the old directory is
    renamed aside, the new one into place, the old one removed. A reader that opens `target` once sees one
    complete set of files, never a mix of two; between the two renames `target` is briefly absent. If the second
    rename fails the old directory is put back. An existing directory holding anything but regular files named in
    `replaceable` is refused untouched, so a mistaken `--out-dir .` cannot swap away other files.
    """
    place = target.resolve()  # `.` and `..` have no name to rename; a symlink keeps pointing at the new directory
    if place.parent == place:
        raise CommandError(f"{flag} {target}: the root directory cannot be replaced; give a directory of its own")
    existed = place.exists()
    if existed and not place.is_dir():
        raise CommandError(f"{flag} {target}: is a file; give a directory")
    mode = _default_mode(directory=True)
    if existed:
        _check_replaceable(target, place, flag, replaceable)
        mode = stat.S_IMODE(place.stat().st_mode)
    parent = place.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{place.name}.new-", dir=parent))
    except OSError as exc:
        raise _failure(flag, target, "create it", exc) from None
    try:
        file_mode = _default_mode(directory=False)
        for name, text in files.items():
            path = staging / name
            if isinstance(text, str):
                path.write_text(text, encoding="utf-8")
            else:
                with path.open("w", encoding="utf-8") as out:
                    out.writelines(text)
            path.chmod(file_mode)
            _fsync(path)
        staging.chmod(mode)
        _fsync(staging)
        if existed:
            _swap(staging, place, target, flag)
        else:
            os.rename(staging, place)
        _fsync(parent)
    except OSError as exc:
        raise _failure(flag, target, "write", exc) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already unless something failed


def _check_replaceable(target: Path, place: Path, flag: str, replaceable: Collection[str]) -> None:
    try:
        entries = list(place.iterdir())
    except OSError as exc:
        raise _failure(flag, target, "list it", exc) from None
    foreign = sorted(e.name for e in entries if e.name not in replaceable or e.is_symlink() or not e.is_file())
    if foreign:
        shown = ", ".join(foreign[:_LISTED]) + (f" and {len(foreign) - _LISTED} more" if len(foreign) > _LISTED else "")
        raise CommandError(
            f"{flag} {target}: holds {shown}, which this command does not write; it replaces the directory as a "
            "whole, so give a new directory or one it wrote before"
        )


def _swap(staging: Path, place: Path, target: Path, flag: str) -> None:
    """Rename `place` aside and `staging` into its place, restoring `place` if the second rename fails."""
    # rename(2) replaces an empty directory, so mkdtemp reserves a unique name for the old directory.
    aside = Path(tempfile.mkdtemp(prefix=f".{place.name}.old-", dir=place.parent))
    try:
        os.rename(place, aside)
    except OSError:
        aside.rmdir()
        raise
    try:
        os.rename(staging, place)
    except OSError as exc:
        try:
            os.rename(aside, place)
        except OSError as restore:
            raise CommandError(
                f"{flag} {target}: cannot write: {exc.strerror or exc}; the previous files are in {aside} "
                f"(putting them back failed: {restore.strerror or restore})"
            ) from None
        raise
    try:
        shutil.rmtree(aside)
    except OSError as exc:  # the new directory is in place; a leftover copy of the old one is only clutter
        log.warning("event=old_output_not_removed path=%s error=%s", aside, exc.strerror or exc)


@contextlib.contextmanager
def staged_file(target: Path, *, flag: str) -> Iterator[Path]:
    """A temporary path beside `target` (same suffix) to write; renamed to `target` when the block ends without
    an exception, removed when it raises. Makes `target`'s directory if needed."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=target.suffix, dir=target.parent)
        os.close(handle)
    except OSError as exc:
        raise _failure(flag, target, "write", exc) from None
    temporary = Path(name)
    try:
        yield temporary
        mode = stat.S_IMODE(target.stat().st_mode) if target.is_file() else _default_mode(directory=False)
        temporary.chmod(mode)
        _fsync(temporary)
        os.replace(temporary, target)
    except OSError as exc:
        raise _failure(flag, target, "write", exc) from None
    finally:
        temporary.unlink(missing_ok=True)


def replace_file(target: Path, text: str, *, flag: str) -> None:
    """Write `text` to `target` by rename: readers see the old file or the new one, never a part."""
    with staged_file(target, flag=flag) as temporary:
        temporary.write_text(text, encoding="utf-8")


__all__ = ["replace_directory", "replace_file", "staged_file"]
