"""Where a batch of independent tasks runs: this process, a local process pool, or a Ray cluster.

Every executor has the same contract, so results never depend on which one ran them:

- ``map_unordered(fn, items)`` calls ``fn(item)`` once per item and yields
  ``(index, result)`` pairs as tasks finish, in any order;
- ``fn`` must be a module-level function and items and results picklable plain data;
- ``fn`` must be pure (its result depends on its item only: seeds travel in the item);
- an exception raised by ``fn`` propagates to the caller, and the remaining tasks are cancelled;
- ``close()`` releases the workers (a local Ray started here is shut down; a Ray cluster
  given by address is only disconnected from).

Local pools use the ``spawn`` start method (no inherited threads or locks), and their
workers exit when the parent process dies, so killing a sweep leaves no orphans. Every
worker starts with the pool and imports the simulator then, beside the others.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")
ExecutorKind = Literal["local", "ray"]
EXECUTOR_KINDS: tuple[str, ...] = ("local", "ray")

# Environment a local Ray started by servesim runs with: no token authentication (a
# private single-machine cluster) and no usage statistics sent anywhere.
LOCAL_RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
PARENT_POLL_S = 0.5
# Tasks exchange a config and a row of numbers; a small object store keeps a local Ray
# light on laptops and CI machines (Ray's default reserves 30% of memory).
LOCAL_RAY_OBJECT_STORE_BYTES = 256 * 2**20


class Executor(Protocol):
    """Runs independent tasks; see the module docstring for the contract."""

    kind: str
    workers: int

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]: ...

    def close(self) -> None: ...


class InProcessExecutor:
    """Runs tasks one after another in this process (``--workers 1``): no start-up cost, easy to debug."""

    kind = "local"
    workers = 1

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]:
        for i, item in enumerate(items):
            yield i, fn(item)

    def close(self) -> None:
        pass


def _exit_with_parent(parent_pid: int) -> None:
    """Pool-worker initializer: a daemon thread ends this worker once its parent is gone."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="servesim-parent-watch", daemon=True).start()


def _start_worker(parent_pid: int) -> None:
    """Pool-worker initializer: ``_exit_with_parent``, then the simulator imported (about 1.3 s, which every
    task's first run would spend), while the parent and the other workers go on."""
    _exit_with_parent(parent_pid)
    # the worker's exit skips the interpreter's teardown of its heap (cost models, tables, memos: about 0.2 s of
    # the pool's shutdown, in the plan's wall time): exit handlers run once the pool has shut the worker down
    # (its results went back with each task) and ``Process._bootstrap`` has run multiprocessing's finalizers and
    # flushed the standard streams
    atexit.register(os._exit, 0)
    import simulator.build  # noqa: F401


def _started() -> None:
    """A pool's first task in each worker: nothing (submitting one per worker starts them all at once)."""


class LocalPoolExecutor:
    """A pool of ``workers`` local processes (spawned, not forked)."""

    kind = "local"

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"--workers must be at least 1 (got {workers})")
        self.workers = workers
        self._pool = cf.ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(os.getpid(),),
        )
        # the pool starts a worker only when no idle one takes a task: a first stage of fewer tasks than workers
        # (a lone search) would leave the rest to start, and import the simulator, in a later stage
        for _ in range(workers):
            self._pool.submit(_started)

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]:
        futures = {self._pool.submit(fn, item): i for i, item in enumerate(items)}
        try:
            for future in cf.as_completed(futures):
                yield futures[future], future.result()
        finally:
            for future in futures:
                future.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValueError("--executor ray needs Ray: pip install 'servesim[ray]'") from None
    return ray


class RayExecutor:
    """Ray tasks, one CPU each, on the cluster at ``address`` or on a local Ray started on demand.

    ``workers`` caps the tasks in flight (default: the cluster's CPUs). Remote clusters need
    the same servesim version installed on every node.
    """

    kind = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"--workers must be at least 1 (got {workers})")
        ray = self._ray = _import_ray()
        self._started_here = False
        if not ray.is_initialized():
            if address is None:
                for name, value in LOCAL_RAY_ENV.items():
                    os.environ.setdefault(name, value)
                ray.init(
                    num_cpus=workers,
                    object_store_memory=LOCAL_RAY_OBJECT_STORE_BYTES,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                    configure_logging=False,
                )
            else:
                try:
                    ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
                except (ConnectionError, RuntimeError) as exc:
                    raise ValueError(f"--address {address}: cannot connect to Ray ({exc})") from None
            self._started_here = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = workers or max(cpus, 1)

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]:
        ray = self._ray
        remote = ray.remote(num_cpus=1, max_retries=0)(fn)
        pending: dict[Any, int] = {}
        next_item = 0
        try:
            while next_item < len(items) or pending:
                while next_item < len(items) and len(pending) < self.workers:
                    pending[remote.remote(items[next_item])] = next_item
                    next_item += 1
                done, _ = ray.wait(list(pending), num_returns=1)
                ref = done[0]
                yield pending.pop(ref), ray.get(ref)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        if self._started_here:
            self._ray.shutdown()
            self._started_here = False


def check_executor_options(kind: str = "local", workers: int | None = None, address: str | None = None) -> None:
    """ValueError for what ``make_executor`` would refuse, without starting anything (no pool, no Ray)."""
    if kind not in EXECUTOR_KINDS:
        raise ValueError(f"unknown executor {kind!r}; known: {', '.join(EXECUTOR_KINDS)}")
    if kind == "local" and address is not None:
        raise ValueError("--address applies to --executor ray only")
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be at least 1 (got {workers})")


def make_executor(kind: str = "local", workers: int | None = None, address: str | None = None) -> Executor:
    """The executor named ``kind``; ValueError for an unknown kind or inconsistent options."""
    check_executor_options(kind, workers, address)
    if kind == "local":
        if address is not None:
            raise ValueError("--address applies to --executor ray only")
        n = workers if workers is not None else (os.cpu_count() or 1)
        if n < 1:
            raise ValueError(f"--workers must be at least 1 (got {n})")
        return InProcessExecutor() if n == 1 else LocalPoolExecutor(n)
    if kind == "ray":
        return RayExecutor(workers, address)
    raise ValueError(f"unknown executor {kind!r}; known: {', '.join(EXECUTOR_KINDS)}")
