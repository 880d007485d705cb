"""Planning in a process of its own: a plan that runs away (memory or time) dies alone.

The controller runs in the pod that serves admission with `failurePolicy: Fail`. In a thread of that process, a
plan that grows past the pod's memory limit gets the whole process OOM-killed (every labelled Job in the cluster is
refused until it is back), and a long plan holds the interpreter lock that admission needs. In a worker process
with a data-size limit (`RLIMIT_DATA`), the plan gets a MemoryError instead (and falls back to the next cheaper plan,
`webhook.controller.graded_plan`), a plan past the time limit is killed, and admission keeps its interpreter.

One worker, one plan at a time, started ahead of the first plan (a fresh interpreter: about 2 s to import numpy and
scipy, outside the time limit) and restarted after it was killed or died; it ends when the process that started it
does (`webhook.common.lifeline`). Only the standard library is imported here, so the worker sets its limits before
anything heavy is loaded.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import multiprocessing
import os
import resource
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from webhook.common.lifeline import tied_process

log = logging.getLogger("ringroute.controller")

T = TypeVar("T")

_ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""BLAS thread pools reserve memory per core of the node (not of the pod); planning uses one thread."""


class PlanningProcessError(Exception):
    """The planning process ran out of memory, was stopped at the time limit, or died; the message says which."""


def _serve(conn: Connection, memory_limit_bytes: int, preload: tuple[str, ...]) -> None:
    """The worker: set the limits, import `preload`, say so, then run each `(function, args, kwargs)` received
    and send the outcome back."""
    for name in _ONE_THREAD:
        os.environ[name] = "1"
    if memory_limit_bytes > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_limit_bytes, memory_limit_bytes))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the worker stops
    for module in preload:
        importlib.import_module(module)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            function, args, kwargs = conn.recv()
        except EOFError:
            return
        except MemoryError:
            conn.send(("memory", None))
            continue
        try:
            reply: tuple[str, Any] = ("ok", function(*args, **kwargs))
        except MemoryError:
            reply = ("memory", None)  # the exception object itself may not survive pickling under pressure
        except Exception as exc:  # every failure goes back to the caller
            reply = ("error", exc)
        try:
            conn.send(reply)
        except MemoryError:
            conn.send(("memory", None))
        except Exception as exc:  # an unpicklable result or exception
            conn.send(("error", RuntimeError(f"the plan could not be sent back: {type(exc).__name__}: {exc}")))


class PlanningProcess:
    """A worker process that runs one function call at a time under a memory limit and a time limit."""

    def __init__(
        self,
        *,
        memory_limit_mib: int,
        timeout_s: float | None,
        preload: tuple[str, ...] = (),
        start_timeout_s: float = 120.0,
        memory_setting: str = "controller.planningMemoryLimitMib",
        timeout_setting: str = "controller.planningTimeoutS",
    ) -> None:
        self.memory_limit_mib = memory_limit_mib
        """0: no memory limit."""
        self.timeout_s = timeout_s
        """None: no time limit."""
        self.memory_setting = memory_setting
        self.timeout_setting = timeout_setting
        """The setting (or flag) each limit comes from, for the messages."""
        self.preload = preload
        """Modules the worker imports before its first call, so that the time limit counts planning only."""
        self.start_timeout_s = start_timeout_s
        self.starts = 0
        """Worker processes started so far (a restart follows a kill or a crash)."""
        self._context = multiprocessing.get_context("spawn")  # never fork a process with threads and a loop
        self._lock = threading.Lock()  # one call on the pipe at a time, even when a waiting caller was cancelled
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs."""
        return self._process.pid if self._process is not None and self._process.is_alive() else None

    def start(self) -> None:
        """Start the worker unless it runs (blocks while the interpreter starts: call it in a thread)."""
        with self._lock:
            self._ensure()

    async def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`function(*args, **kwargs)` in the worker; its exception is raised here.

        `function` and its arguments are pickled: a module-level function and plain data. Raises
        PlanningProcessError when the worker runs out of memory, runs past the time limit (it is killed) or dies.
        """
        return await asyncio.to_thread(self._call, function, args, kwargs)

    def close(self) -> None:
        """Stop the worker (a plan it is running is abandoned); later calls fail."""
        self._closed = True
        process = self._process
        if process is not None and process.is_alive():
            process.kill()  # a call waiting on it returns at once
        with self._lock:
            self._stop()

    # -- inside the caller's thread ----------------------------------------------------------------------------

    def _call(self, function: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        with self._lock:
            conn = self._ensure()
            try:
                conn.send((function, args, kwargs))
                ready = conn.poll(self.timeout_s)
            except (OSError, EOFError) as exc:
                raise self._died(f"{type(exc).__name__}: {exc}") from exc
            if not ready:
                self._stop()
                raise PlanningProcessError(
                    f"planning took longer than {self.timeout_s:g} s ({self.timeout_setting}); its process was stopped"
                )
            try:
                outcome, value = conn.recv()
            except (OSError, EOFError) as exc:
                raise self._died(f"{type(exc).__name__}: {exc}") from exc
        if outcome == "memory":
            raise PlanningProcessError(
                f"planning needed more than the {self.memory_limit_mib} MiB of its process ({self.memory_setting})"
            )
        if outcome == "error":
            raise value
        result: T = value
        return result

    def _ensure(self) -> Connection:
        if self._closed:
            raise PlanningProcessError("the planning process is closed")
        if self._process is not None and self._process.is_alive() and self._conn is not None:
            return self._conn
        self._stop()
        parent, child = self._context.Pipe()
        # Ended with this process, however it ends: a plan never runs on for a parent that was killed.
        process = tied_process(
            self._context, _serve, (child, self.memory_limit_mib * 1024 * 1024, self.preload), name="ringroute-planner"
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent
        self.starts += 1
        try:
            if not parent.poll(self.start_timeout_s):
                self._stop()
                raise PlanningProcessError(f"the planning process did not start within {self.start_timeout_s:g} s")
            parent.recv()
        except (OSError, EOFError) as exc:
            raise self._died(f"while starting: {type(exc).__name__}: {exc}") from exc
        log.info("event=planning_process_started pid=%s memory_limit_mib=%d", process.pid, self.memory_limit_mib)
        return parent

    def _died(self, detail: str) -> PlanningProcessError:
        if self._closed:
            self._stop()
            return PlanningProcessError("the planning process was stopped with the controller")
        process = self._process
        code = None
        if process is not None:
            process.join(timeout=1.0)
            code = process.exitcode
        self._stop()
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        if code == -signal.SIGKILL:
            how += ", as the kernel's OOM killer does when the pod's memory limit is reached"
        return PlanningProcessError(f"the planning process died ({how}; {detail})")

    def _stop(self) -> None:
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            conn.close()
        if process is not None and process.is_alive():
            process.kill()
            process.join(timeout=5.0)
            log.info("event=planning_process_stopped pid=%s", process.pid)


__all__ = ["PlanningProcess", "PlanningProcessError"]
