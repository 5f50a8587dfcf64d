"""Arrays and tensors as the C calls see them: a pointer, a shape, an
element type and a device, without copying.

numpy arrays, torch tensors (host or CUDA/HIP), and anything exposing
__cuda_array_interface__, __array_interface__ or __dlpack__ are taken.
torch is imported only when a tensor is passed.
"""

import sys

import numpy as np

# Element types by the names the calls use.
_NUMPY_KINDS = {"|u1": "u8", "<u2": "u16", "<i4": "i32", "<f4": "f32", "|i1": "i8"}
_TORCH_KINDS = {"uint8": "u8", "uint16": "u16", "int32": "i32", "float32": "f32",
                "bfloat16": "bf16", "float8_e4m3fn": "e4m3"}
# The kinds each role accepts: uint16 is bf16's bits, uint8 e4m3's.
QUERY_KINDS = {"bf16": 1, "u16": 1, "e4m3": 2, "u8": 2}


class Arr:
    """One argument: ptr (int), shape (tuple), kind, device (None for host,
    else the GPU ordinal), and the object that keeps the memory alive."""

    __slots__ = ("ptr", "shape", "kind", "device", "owner", "name", "is_torch")

    def __init__(self, ptr, shape, kind, device, owner, name, is_torch=False):
        self.ptr, self.shape, self.kind, self.device = ptr, tuple(shape), kind, device
        self.owner, self.name, self.is_torch = owner, name, is_torch

    def host_numpy(self):
        """The values as a host numpy array (a device array is copied)."""
        o = self.owner
        if self.is_torch:
            t = o.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            if str(t.dtype).split(".")[-1] in ("bfloat16", "float8_e4m3fn"):
                t = t.view(__import__("torch").uint8 if t.element_size() == 1
                           else __import__("torch").int16)
            return t.numpy()
        if self.device is not None:
            raise TypeError("%s: reading a device array back needs torch" % self.name)
        return o


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch" and hasattr(x, "data_ptr")


_kind_of_dtype = {}  # numpy dtype -> kind, filled as dtypes are met


def _numpy_kind(dtype):
    kind = _kind_of_dtype.get(dtype, False)
    if kind is False:
        name = getattr(dtype, "name", "")
        if name == "bfloat16":          # ml_dtypes.bfloat16
            kind = "bf16"
        elif name == "float8_e4m3fn":   # ml_dtypes.float8_e4m3fn
            kind = "e4m3"
        else:
            kind = _NUMPY_KINDS.get(dtype.str)
        _kind_of_dtype[dtype] = kind
    return kind


def adapt(x, name, kinds, ndim=None, writable=False):
    """x as an Arr: its kind must be in kinds, its ndim ndim, C-contiguous.
    Raises TypeError for the type, dtype or layout, naming the argument."""
    if type(x) is np.ndarray:  # the common case first: a plain host array
        kind = _numpy_kind(x.dtype)
        if kind in kinds and (ndim is None or x.ndim == ndim) and x.flags.c_contiguous and \
                (not writable or x.flags.writeable):
            return Arr(x.ctypes.data, x.shape, kind, None, x, name)
    if x is None:
        raise TypeError("%s is None" % name)
    if _is_torch(x):
        kind = _TORCH_KINDS.get(str(x.dtype).split(".")[-1])
        if kind not in kinds:
            raise TypeError("%s has dtype %s, expected %s" % (name, x.dtype, _expect(kinds)))
        if ndim is not None and x.dim() != ndim:
            raise ValueError("%s has %d dimensions, expected %d" % (name, x.dim(), ndim))
        if not x.is_contiguous():
            raise ValueError("%s is not contiguous (call .contiguous())" % name)
        if writable and x.requires_grad and x.is_leaf:
            raise ValueError("%s requires grad; pass a tensor without it" % name)
        dev = x.device
        if dev.type == "cpu":
            device = None
        elif dev.type == "cuda":
            device = dev.index if dev.index is not None else 0
        else:
            raise ValueError("%s is on %s; m3idx takes host or CUDA/HIP memory" % (name, dev))
        return Arr(x.data_ptr(), tuple(x.shape), kind, device, x, name, True)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None and not isinstance(x, np.ndarray):
        typestr = cai["typestr"]
        kind = _NUMPY_KINDS.get(typestr if typestr[0] != "=" else "<" + typestr[1:])
        if kind not in kinds:
            raise TypeError("%s has typestr %s, expected %s" % (name, typestr, _expect(kinds)))
        shape = tuple(cai["shape"])
        if ndim is not None and len(shape) != ndim:
            raise ValueError("%s has %d dimensions, expected %d" % (name, len(shape), ndim))
        strides = cai.get("strides")
        if strides is not None and tuple(strides) != _c_strides(shape, int(typestr[2:])):
            raise ValueError("%s is not C-contiguous" % name)
        ptr, readonly = cai["data"]
        if writable and readonly:
            raise ValueError("%s is read-only" % name)
        dev = getattr(x, "device", None)
        device = getattr(dev, "id", getattr(dev, "index", 0)) or 0
        return Arr(ptr, shape, kind, device, x, name)
    via_dlpack = False
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__array_interface__") or hasattr(x, "__array_struct__"):
            x = np.asarray(x)
        elif hasattr(x, "__dlpack__"):
            try:
                x = np.from_dlpack(x)
                via_dlpack = True  # numpy 1.x marks every DLPack import read-only
            except (RuntimeError, TypeError, BufferError) as e:
                torch = sys.modules.get("torch")
                if torch is None:
                    import torch  # a device DLPack capsule needs torch to be seen
                return adapt(torch.from_dlpack(x), name, kinds, ndim, writable)
        else:
            raise TypeError("%s is a %s, not an array (numpy, torch, or an object with "
                            "__dlpack__ / __array_interface__ / __cuda_array_interface__)"
                            % (name, type(x).__name__))
    kind = _numpy_kind(x.dtype)
    if kind not in kinds:
        raise TypeError("%s has dtype %s, expected %s" % (name, x.dtype, _expect(kinds)))
    if ndim is not None and x.ndim != ndim:
        raise ValueError("%s has %d dimensions, expected %d" % (name, x.ndim, ndim))
    if not x.flags.c_contiguous:
        raise ValueError("%s is not C-contiguous (numpy.ascontiguousarray makes a copy that is)"
                         % name)
    if writable and not x.flags.writeable and not via_dlpack:
        raise ValueError("%s is read-only" % name)
    return Arr(x.ctypes.data, x.shape, kind, None, x, name)


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _expect(kinds):
    names = {"u8": "uint8", "u16": "uint16", "i32": "int32", "f32": "float32",
             "bf16": "bfloat16", "e4m3": "float8_e4m3fn", "i8": "int8"}
    return " or ".join(names[k] for k in kinds)


def same_device(arrs):
    """The one device of arrs (None: host); ValueError if they differ."""
    for a in arrs:
        if a is not None and a.device is not None:
            break
    else:
        return None  # all on the host
    devices = {a.device for a in arrs if a is not None}
    if len(devices) > 1:
        where = ", ".join("%s on %s" % (a.name, "host" if a.device is None else "GPU %d" % a.device)
                          for a in arrs if a is not None)
        raise ValueError("the arrays are on different devices: " + where)
    return devices.pop() if devices else None


_ITEMSIZE = {"u8": 1, "e4m3": 1, "i8": 1, "u16": 2, "bf16": 2, "i32": 4, "f32": 4}


def _extent(a):
    n = _ITEMSIZE[a.kind]
    for d in a.shape:
        n *= d
    return a.ptr, a.ptr + n


def apart(outputs, inputs):
    """ValueError naming both when an output shares memory with an input
    or with another output (the arrays are C-contiguous: their bytes are
    one range each; arrays on different devices never meet)."""
    outputs = [a for a in outputs if a is not None]
    inputs = [a for a in inputs if a is not None]
    for i, o in enumerate(outputs):
        lo, hi = _extent(o)
        if lo == hi:
            continue
        for other, what in [(x, "an input") for x in inputs] + \
                           [(x, "another output") for x in outputs[:i]]:
            olo, ohi = _extent(other)
            if other.device == o.device and olo < ohi and lo < ohi and olo < hi:
                raise ValueError("%s overlaps %s (%s): outputs must not share memory with "
                                 "the call's other arrays" % (o.name, other.name, what))


def expect_shape(a, shape):
    """shape entries None are free; ValueError naming a on a mismatch."""
    got = a.shape
    if len(got) == len(shape):
        for w, g in zip(shape, got):
            if w is not None and w != g:
                break
        else:
            return
    want = "[" + ", ".join("*" if w is None else str(w) for w in shape) + "]"
    raise ValueError("%s has shape %s, expected %s" % (a.name, list(a.shape), want))
