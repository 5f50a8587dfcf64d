"""Contexts, created once per (thread, backend, device, stream) and reused;
a call that needs larger limits than its context has grows it (the old
context is destroyed and one with the larger limits made)."""

import atexit
import ctypes
import sys
import threading

from ._library import BACKENDS, FLAG_HOST_POINTERS, Options, check, lib

_local = threading.local()
_all = []          # every live context, destroyed at exit
_all_lock = threading.Lock()


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
    cache = getattr(_local, "contexts", None)
    if cache is None:
        cache = _local.contexts = {}
    entry = cache.get(key)
    if entry is not None:
        ctx, limits = entry
        if reqs <= limits[0] and model_len <= limits[1] and rows <= limits[2] and \
                heads <= limits[3]:
            return ctx
    need = (max(reqs, 1), max(model_len, 1), max(rows, 1), max(heads, 1))
    if entry is not None:
        need = tuple(max(n, l) for n, l in zip(need, limits))
        _destroy(ctx)
        del cache[key]
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
    with _all_lock:
        _all.append(ctx.value)
    cache[key] = (ctx.value, need)
    return ctx.value


def _destroy(ctx):
    with _all_lock:
        if ctx in _all:
            _all.remove(ctx)
    lib.m3idx_context_destroy(ctx)


@atexit.register
def _destroy_all():
    with _all_lock:
        live = list(_all)
        _all.clear()
    for ctx in live:
        lib.m3idx_context_destroy(ctx)
