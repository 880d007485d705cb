"""Child processes that end when the process that started them does, however it ends (SIGKILL included).

A spawned child outlives a parent that is killed: `ringroute serve`'s planning process, its extender and its
workers would run on as orphans, and multiprocessing's resource tracker with them (it ends once no process holds
its pipe). A child started by `tied_process` ends when its parent does:
- it watches the pipe multiprocessing keeps open from the parent to each child it spawned (the child's
  `multiprocessing.parent_process().sentinel`), which the kernel closes when the parent dies: on every platform;
- on Linux the kernel also sends it SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG), which ends it even while
  its interpreter is stuck in C code. The kernel sends that signal when the *thread* that started the child ends,
  so a child started by another thread than the main one (a thread pool's, which may end first) relies on the pipe.

Only the standard library is imported, so a child sets its own limits before anything heavy is loaded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.context import SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any

log = logging.getLogger("ringroute.process")

PARENT_GONE_EXIT = 70
"""Exit status of a child whose parent ended first (EX_SOFTWARE; nobody is left to read it)."""
_PR_SET_PDEATHSIG = 1


def tied_process(
    context: SpawnContext, target: Callable[..., object], args: tuple[Any, ...], *, name: str, daemon: bool = True
) -> BaseProcess:
    """A `context.Process` running `target(*args)` that ends when this process ends (not started yet). `daemon`:
    also stopped when this process exits normally; a daemon may not start processes of its own."""
    by_main_thread = threading.current_thread() is threading.main_thread()
    return context.Process(target=_run_tied, args=(target, args, by_main_thread), name=name, daemon=daemon)


def _run_tied(target: Callable[..., object], args: tuple[Any, ...], by_main_thread: bool) -> None:
    end_with_parent(kernel_signal=by_main_thread and sys.platform.startswith("linux"))
    target(*args)


def end_with_parent(*, kernel_signal: bool) -> None:
    """In a child spawned by multiprocessing: end this process as soon as the parent ends (`kernel_signal`: ask
    Linux to SIGKILL it then, too). Nothing outside such a child."""
    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return
    if kernel_signal:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            log.warning("event=parent_death_signal_unavailable errno=%d", ctypes.get_errno())
    if not parent.is_alive():  # gone before the signal was asked for
        os._exit(PARENT_GONE_EXIT)
    threading.Thread(target=_watch, args=(parent.sentinel, parent.pid), name="parent-watch", daemon=True).start()


def _watch(sentinel: int, parent_pid: int | None) -> None:
    multiprocessing.connection.wait([sentinel])
    log.warning("event=parent_gone parent_pid=%s pid=%d action=exiting", parent_pid, os.getpid())
    os._exit(PARENT_GONE_EXIT)


__all__ = ["PARENT_GONE_EXIT", "end_with_parent", "tied_process"]
