"""Contexts, created once per (thread, backend, device, stream) and reused;
a call that needs larger limits than its context has grows it (the old
context is destroyed and one with the larger limits made).

Each thread owns its contexts, and only their owner ever destroys them:
  * when the thread ends, its contexts are destroyed with its thread-local
    state (so short-lived threads do not pile up contexts);
  * at interpreter exit, the exiting thread's contexts are destroyed; those
    of threads still running (daemon threads, which may be inside a call)
    are left to the operating system, never freed under them;
  * in a child made by fork, inherited contexts are neither used nor
    destroyed (another thread of the parent may have been inside one): the
    child makes its own.
"""

import atexit
import ctypes
import os
import sys
import threading

from ._library import BACKENDS, FLAG_HOST_POINTERS, Options, check, lib

_local = threading.local()


class _ThreadContexts:
    """The contexts of one thread of one process, keyed by (backend,
    device, stream, host); destroyed when the thread's local state goes."""

    def __init__(self):
        self.pid = os.getpid()
        self.owner = threading.get_ident()
        self.entries = {}     # key -> (context pointer, limits)

    def destroy(self):
        entries, self.entries = self.entries, {}
        if self.pid != os.getpid():
            return            # inherited through fork: not this process's to free
        for ctx, _ in entries.values():
            lib.m3idx_context_destroy(ctx)

    def __del__(self):
        # The owner's thread-local state goes as the owner ends: free them
        # then.  Interpreter finalization clears the state of threads still
        # running (daemon threads, perhaps inside a call) from another
        # thread: leave those.
        if threading.get_ident() != self.owner:
            return
        try:
            self.destroy()
        except Exception:     # the library may already be unloaded at finalization
            pass


def _mine():
    """This thread's contexts (a fresh set in a forked child)."""
    mine = getattr(_local, "contexts", None)
    if mine is None or mine.pid != os.getpid():
        if mine is not None:
            mine.entries = {}  # the parent's: leave them
        mine = _local.contexts = _ThreadContexts()
    return mine


def backend_for(backend, device, name="backend"):
    """The backend name a call runs on: backend=None or 'auto' follows the
    data (host: 'cpu', device: 'hip')."""
    if backend is None or backend == "auto":
        return "cpu" if device is None else "hip"
    if backend not in ("cpu", "hip"):
        raise ValueError("%s is %r, not 'cpu', 'hip', 'auto' or None" % (name, backend))
    if backend == "cpu" and device is not None:
        raise ValueError("backend='cpu' takes host arrays; these are on GPU %d" % device)
    return backend


def _current_stream(device):
    torch = sys.modules.get("torch")
    if device is None or torch is None:
        return 0
    return torch.cuda.current_stream(device).cuda_stream


def context(backend, device, batch):
    """A context of this thread for the backend and the data's device,
    with at least the limits the batch (a _library.Batch) needs."""
    reqs, model_len, rows, heads = (batch.num_reqs, batch.max_seq_len, batch.num_rows,
                                    batch.num_heads)
    stream = _current_stream(device)
    host = device is None
    key = (backend, device if device is not None else 0, stream, host)
    mine = _mine()
    entry = mine.entries.get(key)
    if rows == 0:  # a call with no rows sizes nothing (m3idx_score_prefill(3))
        model_len = heads = 1
    if entry is not None:
        ctx, limits = entry
        if reqs <= limits[0] and model_len <= limits[1] and rows <= limits[2] and \
                heads <= limits[3]:
            return ctx
    need = (max(reqs, 1), max(model_len, 1), max(rows, 1), max(heads, 1))
    if entry is not None:
        need = tuple(max(n, l) for n, l in zip(need, limits))
        del mine.entries[key]
        lib.m3idx_context_destroy(ctx)
    opts = Options()
    lib.m3idx_options_init(ctypes.byref(opts))
    opts.backend = BACKENDS[backend]
    opts.device = key[1]
    opts.stream = stream or None
    opts.max_reqs, opts.max_model_len, opts.max_rows, opts.max_heads = need
    if host:
        opts.flags = FLAG_HOST_POINTERS
    ctx = ctypes.c_void_p()
    check(lib.m3idx_context_create(ctypes.byref(opts), ctypes.byref(ctx)))
    mine.entries[key] = (ctx.value, need)
    return ctx.value


def live_contexts():
    """How many contexts this thread holds (for tests)."""
    return len(_mine().entries)


@atexit.register
def _destroy_own_at_exit():
    """The exiting thread's contexts only: a daemon thread may still be
    inside a call on its own, which must not be freed under it."""
    mine = getattr(_local, "contexts", None)
    if mine is not None:
        mine.destroy()
