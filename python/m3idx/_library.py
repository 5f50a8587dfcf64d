"""The shared library, its C declarations, and m3idx.Error.

The library is $M3IDX_LIBRARY when set (a build tree's lib/.libs/libm3idx.so,
for tests), else the one installed beside this package, else the system's.
"""

import ctypes
import ctypes.util
import os

__all__ = ["lib", "Error", "check", "STATUS_NAMES", "PAGE_BYTES", "HEAD_DIM",
           "BLOCK_SIZE", "TOPK", "MAX_THREADS", "BACKENDS"]

# Constants of m3idx.h.
BLOCK_SIZE = 128
HEAD_DIM = 128
TOPK = 16
PAGE_BYTES = 8704
MAX_THREADS = 1024
MODE_DECODE, MODE_PREFILL = 1, 2
DTYPE_BF16, DTYPE_E4M3 = 1, 2
FLAG_HOST_POINTERS = 0x1
BACKENDS = {"auto": 0, "cpu": 1, "hip": 2}

STATUS_NAMES = {
    0: "M3IDX_OK", -1: "M3IDX_ERR_NULL_POINTER", -2: "M3IDX_ERR_INVALID_SIZE",
    -3: "M3IDX_ERR_INCONSISTENT", -4: "M3IDX_ERR_PAGE_ID", -5: "M3IDX_ERR_FORCED_BLOCKS",
    -6: "M3IDX_ERR_SCALE", -7: "M3IDX_ERR_UNSUPPORTED", -8: "M3IDX_ERR_BACKEND_UNAVAILABLE",
    -9: "M3IDX_ERR_LIMIT", -10: "M3IDX_ERR_NO_MEMORY", -11: "M3IDX_ERR_WORK_MAP",
    -12: "M3IDX_ERR_OPTIONS", -13: "M3IDX_ERR_DEVICE", -14: "M3IDX_ERR_DEVICE_INPUT",
    -15: "M3IDX_ERR_INVALID_ARGUMENT",
}


class Error(Exception):
    """A call the library refused or could not finish.

    status is the m3idx_status (a negative int), status_name its C name, and
    message the library's own sentence (m3idx_last_error).
    """

    def __init__(self, status, message):
        self.status = status
        self.status_name = STATUS_NAMES.get(status, str(status))
        self.message = message
        super().__init__("%s (%s)" % (message, self.status_name))


def _load():
    path = os.environ.get("M3IDX_LIBRARY")
    if path:
        return ctypes.CDLL(path)
    try:
        from . import _paths
        for name in ("libm3idx.so.0", "libm3idx.so", "libm3idx.dylib"):
            candidate = os.path.join(_paths.LIBDIR, name)
            if os.path.exists(candidate):
                return ctypes.CDLL(candidate)
    except ImportError:
        pass
    found = ctypes.util.find_library("m3idx")
    if found is None:
        raise ImportError("m3idx: libm3idx is not installed where this package expects it; "
                          "set M3IDX_LIBRARY to its path")
    return ctypes.CDLL(found)


class Options(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("backend", ctypes.c_int), ("threads", ctypes.c_int32),
                ("device", ctypes.c_int32), ("stream", ctypes.c_void_p),
                ("max_reqs", ctypes.c_int32), ("max_model_len", ctypes.c_int32),
                ("max_rows", ctypes.c_int32), ("max_heads", ctypes.c_int32),
                ("flags", ctypes.c_uint32)]


class Batch(ctypes.Structure):
    _fields_ = [("mode", ctypes.c_int), ("num_reqs", ctypes.c_int32),
                ("num_heads", ctypes.c_int32), ("num_rows", ctypes.c_int32),
                ("max_seq_len", ctypes.c_int32), ("seq_lens", ctypes.c_void_p),
                ("query_len", ctypes.c_int32), ("cu_seqlens_q", ctypes.c_void_p),
                ("context_lens", ctypes.c_void_p)]


class KCache(ctypes.Structure):
    _fields_ = [("pages", ctypes.c_void_p), ("num_pages", ctypes.c_int32),
                ("block_table", ctypes.c_void_p), ("bt_stride", ctypes.c_int32)]


class Query(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("scale", ctypes.c_float)]


class VerifyOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("order", ctypes.c_int),
                ("query_rounding", ctypes.c_int), ("tolerance_rel", ctypes.c_double),
                ("tolerance_ulps", ctypes.c_double), ("flags", ctypes.c_uint32),
                ("work_map", ctypes.c_void_p), ("work_map_capacity", ctypes.c_int32)]


class VerifyRow(ctypes.Structure):
    _fields_ = [("verdict", ctypes.c_int32), ("reason", ctypes.c_int32), ("slot", ctypes.c_int32),
                ("block_a", ctypes.c_int32), ("block_b", ctypes.c_int32), ("gap", ctypes.c_float)]


class VerifySummary(ctypes.Structure):
    _fields_ = [("rows", ctypes.c_int64), ("exact", ctypes.c_int64),
                ("equivalent", ctypes.c_int64), ("wrong", ctypes.c_int64),
                ("max_score_deviation", ctypes.c_double)]


lib = _load()

_P = ctypes.c_void_p
_I32 = ctypes.c_int32
_I64 = ctypes.c_int64
_ST = ctypes.c_int
_DECLS = {
    "m3idx_version": (ctypes.c_char_p, []),
    "m3idx_strerror": (ctypes.c_char_p, [_ST]),
    "m3idx_last_error": (ctypes.c_char_p, [_P]),
    "m3idx_options_init": (None, [ctypes.POINTER(Options)]),
    "m3idx_context_create": (_ST, [ctypes.POINTER(Options), ctypes.POINTER(_P)]),
    "m3idx_context_destroy": (None, [_P]),
    "m3idx_context_backend": (ctypes.c_int, [_P]),
    "m3idx_synchronize": (_ST, [_P]),
    "m3idx_backend_unavailable_reason": (ctypes.c_char_p, [ctypes.c_int]),
    "m3idx_config_unsupported_reason": (ctypes.c_char_p, [_I32, _I32, _I32, ctypes.c_char_p]),
    "m3idx_score_decode": (_ST, [_P, _P, _P, _P, _P, _I32, _P, _I64]),
    "m3idx_score_prefill": (_ST, [_P, _P, _P, _P, _P, _I64]),
    "m3idx_pin_forced_blocks": (_ST, [_P, _P, _I32, _I32, _P, _I64]),
    "m3idx_topk_from_scores": (_ST, [_P, _P, _P, _I64, _P]),
    "m3idx_merge_topk": (_ST, [_I64, _I32, _P, _P, _P, _P]),
    "m3idx_index_topk_decode": (_ST, [_P, _P, _P, _P, _I32, _I32, _P, _I32, _P, _P, _I64]),
    "m3idx_index_topk_prefill": (_ST, [_P, _P, _P, _P, _I32, _I32, _P, _P, _I64]),
    "m3idx_work_map_capacity": (_ST, [_I32, _I32, _I32, _I32, ctypes.POINTER(_I32)]),
    "m3idx_work_map_build": (_ST, [_P, _P, _P, _I32]),
    "m3idx_bf16_to_float": (ctypes.c_float, [ctypes.c_uint16]),
    "m3idx_float_to_bf16": (ctypes.c_uint16, [ctypes.c_float]),
    "m3idx_e4m3_to_float": (ctypes.c_float, [ctypes.c_uint8]),
    "m3idx_float_to_e4m3": (ctypes.c_uint8, [ctypes.c_float]),
    "m3idx_e2m1_to_float": (ctypes.c_float, [ctypes.c_uint8]),
    "m3idx_float_to_e2m1": (ctypes.c_uint8, [ctypes.c_float]),
    "m3idx_e8m0_to_float": (ctypes.c_float, [ctypes.c_uint8]),
    "m3idx_e8m0_for_amax": (ctypes.c_uint8, [ctypes.c_float]),
    "m3idx_page_encode_f32": (_ST, [_P, _I32, _P]),
    "m3idx_page_encode_bf16": (_ST, [_P, _I32, _P]),
    "m3idx_page_decode": (_ST, [_P, _I32, _P]),
    "m3idx_page_decode_f64": (_ST, [_P, _I32, _P]),
    "m3idx_encode_keys_f32": (_ST, [_P, _I64, _P, _I64]),
    "m3idx_verify_options_init": (None, [ctypes.POINTER(VerifyOptions)]),
    "m3idx_verify_topk": (_ST, [_P, _P, _P, _P, _I32, _I32, _P, _P, _I64, _P, _P, _P]),
}
for _name, (_res, _args) in _DECLS.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


def check(status, ctx=None):
    """Raise Error for a failed status, with the library's message."""
    if status != 0:
        msg = lib.m3idx_last_error(ctx)
        text = msg.decode() if msg else ""
        if not text:
            text = lib.m3idx_strerror(status).decode()
        raise Error(status, text)
