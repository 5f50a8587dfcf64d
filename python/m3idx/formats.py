"""SPEC sections 2 and 3 on host arrays: element conversions, and keys to
MXFP4 pages and back.  Each value goes through the library's own helper,
so these give the C library's bits (slowly: one call per element)."""

import ctypes

import numpy as np

from ._arrays import adapt
from ._library import BLOCK_SIZE, HEAD_DIM, PAGE_BYTES, check, lib

__all__ = ["bf16_to_float", "float_to_bf16", "e4m3_to_float", "float_to_e4m3", "e2m1_to_float",
           "float_to_e2m1", "e8m0_to_float", "e8m0_for_amax", "encode_keys", "decode_pages"]


def _host(x, name, kinds):
    a = adapt(np.asarray(x) if np.isscalar(x) else x, name, kinds)
    if a.device is not None:
        raise ValueError("%s is in device memory; the format helpers take host arrays" % name)
    return np.asarray(a.host_numpy())


def _map(fn, x, name, kinds, in_dtype, out_dtype):
    src = _host(x, name, kinds).view(in_dtype)
    out = np.empty(src.shape, dtype=out_dtype)
    flat_in, flat_out = src.reshape(-1), out.reshape(-1)
    for i in range(flat_in.size):
        flat_out[i] = fn(flat_in[i].item())
    return out


def bf16_to_float(x):
    """bf16 bits (uint16, or bfloat16) to float32, exactly."""
    return _map(lib.m3idx_bf16_to_float, x, "x", ("u16", "bf16"), np.uint16, np.float32)


def float_to_bf16(x):
    """float32 to bf16 bits (uint16), nearest, ties to even."""
    return _map(lib.m3idx_float_to_bf16, x, "x", ("f32",), np.float32, np.uint16)


def e4m3_to_float(x):
    """e4m3 bits (uint8, or float8_e4m3fn) to float32, exactly."""
    return _map(lib.m3idx_e4m3_to_float, x, "x", ("u8", "e4m3"), np.uint8, np.float32)


def float_to_e4m3(x):
    """float32 to e4m3 bits (uint8), nearest-even, saturating at +-448."""
    return _map(lib.m3idx_float_to_e4m3, x, "x", ("f32",), np.float32, np.uint8)


def e2m1_to_float(x):
    """e2m1 codes (the low 4 bits of uint8) to float32."""
    return _map(lib.m3idx_e2m1_to_float, x, "x", ("u8",), np.uint8, np.float32)


def float_to_e2m1(x):
    """float32 to e2m1 codes (uint8), nearest-even, saturating at +-6."""
    return _map(lib.m3idx_float_to_e2m1, x, "x", ("f32",), np.float32, np.uint8)


def e8m0_to_float(x):
    """e8m0 scale bytes to float32 2^(e-127) (255 is NaN)."""
    return _map(lib.m3idx_e8m0_to_float, x, "x", ("u8",), np.uint8, np.float32)


def e8m0_for_amax(x):
    """The e8m0 byte of a group whose largest magnitude is x."""
    return _map(lib.m3idx_e8m0_for_amax, x, "x", ("f32",), np.float32, np.uint8)


def encode_keys(keys, out=None):
    """Keys [tokens, 128] (float32, or bf16 as uint16/bfloat16) to MXFP4
    pages [ceil(tokens / 128), 8704] uint8 in token order, unused slots
    zero; into out when given."""
    k = _host(keys, "keys", ("f32", "u16", "bf16"))
    if k.ndim != 2 or k.shape[1] != HEAD_DIM:
        raise ValueError("keys has shape %s, expected [tokens, %d]" % (list(k.shape), HEAD_DIM))
    tokens = k.shape[0]
    npages = -(-tokens // BLOCK_SIZE)
    if out is None:
        out = np.zeros((npages, PAGE_BYTES), dtype=np.uint8)
    o = adapt(out, "out", ("u8",), 2, writable=True)
    if o.device is not None or o.shape != (npages, PAGE_BYTES):
        raise ValueError("out has shape %s, expected host [%d, %d]"
                         % (list(o.shape), npages, PAGE_BYTES))
    if k.nbytes and npages and k.ctypes.data < o.ptr + npages * PAGE_BYTES and \
            o.ptr < k.ctypes.data + k.nbytes:
        raise ValueError("out overlaps keys (an input): outputs must not share memory with "
                         "the call's other arrays")
    if k.dtype == np.float32:
        check(lib.m3idx_encode_keys_f32(k.ctypes.data, tokens, o.ptr, npages))
        return out
    bits = np.ascontiguousarray(k.view(np.uint16))
    staged = np.zeros((npages, PAGE_BYTES), dtype=np.uint8)
    for t in range(tokens):
        page = staged[t // BLOCK_SIZE]
        check(lib.m3idx_page_encode_bf16(page.ctypes.data, t % BLOCK_SIZE,
                                         bits[t].ctypes.data))
    ctypes.memmove(o.ptr, staged.ctypes.data, staged.nbytes)
    return out


def decode_pages(pages, dtype=np.float32):
    """Pages [n, 8704] uint8 to keys [n * 128, 128]: e2m1 * e8m0.

    dtype float32 (the default) rounds to fp32, where values of magnitude
    2^128 or more (scale byte 254 with |e2m1| >= 2, 253 with >= 4) become
    inf; dtype float64 gives every value exactly."""
    p = _host(pages, "pages", ("u8",))
    if p.ndim != 2 or p.shape[1] != PAGE_BYTES:
        raise ValueError("pages has shape %s, expected [n, %d]" % (list(p.shape), PAGE_BYTES))
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError("dtype is %r, not float32 or float64" % (dtype,))
    fn = lib.m3idx_page_decode if dt == np.float32 else lib.m3idx_page_decode_f64
    out = np.empty((p.shape[0] * BLOCK_SIZE, HEAD_DIM), dtype=dt)
    for i in range(p.shape[0]):
        for t in range(BLOCK_SIZE):
            check(fn(p[i].ctypes.data, t, out[i * BLOCK_SIZE + t].ctypes.data))
    return out
