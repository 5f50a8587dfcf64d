"""The Python package's restatement of lib/m3idx.h against the header itself.

The ctypes structs (sizes, field names, offsets and sizes) against the C
compiler's layout, which cli-helper abi prints; the status names, enum
values and constants against the header's text.  A field, status or
constant that drifts fails here, before a call passes a wrong layout.
"""

import ctypes
import os
import re
import subprocess

import pytest

from m3idx import _library as L

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib", "m3idx.h")

STRUCTS = {
    "m3idx_options": L.Options, "m3idx_batch": L.Batch, "m3idx_kcache": L.KCache,
    "m3idx_query": L.Query, "m3idx_verify_options": L.VerifyOptions,
    "m3idx_verify_row": L.VerifyRow, "m3idx_verify_summary": L.VerifySummary,
}


@pytest.fixture(scope="module")
def c_layout():
    helper = os.environ.get("HELPER")
    if not helper:
        pytest.skip("HELPER (tests/cli-helper) is not set: run the suite through make check")
    out = subprocess.run([helper, "abi"], check=True, capture_output=True, text=True).stdout
    sizes, fields = {}, {}
    for line in out.splitlines():
        kind, name, *rest = line.split()
        if kind == "struct":
            sizes[name] = int(rest[0])
        else:
            struct, field = name.split(".")
            fields.setdefault(struct, {})[field] = (int(rest[0]), int(rest[1]))
    return sizes, fields


@pytest.fixture(scope="module")
def header():
    with open(HEADER) as f:
        return f.read()


def enum_of(text, name):
    """{enumerator: value} of typedef enum name in the header."""
    body = re.search(r"typedef enum %s \{(.*?)\}" % name, text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"(M3IDX_\w+)\s*=\s*(-?\d+)", body)}


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_struct_layout_is_the_compilers(c_layout, name):
    sizes, fields = c_layout
    cls = STRUCTS[name]
    assert ctypes.sizeof(cls) == sizes[name], "sizeof(%s)" % name
    py = {f: (getattr(cls, f).offset, getattr(cls, f).size) for f, _ in cls._fields_}
    assert py == fields[name], "%s: Python (offset, size) %r, C %r" % (name, py, fields[name])


def test_the_helper_lists_every_field_of_the_header(c_layout, header):
    _, fields = c_layout
    for name in STRUCTS:
        body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), header, re.S).group(1)
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        declared = set()
        for decl in body.split(";"):
            declared.update(re.findall(r"(\w+)\s*(?:,|$)", decl.strip()))
        declared.discard("")
        assert declared == set(fields[name]), name


def test_status_names_are_the_headers(header):
    status = enum_of(header, "m3idx_status")
    assert len(status) >= 16
    assert L.STATUS_NAMES == {v: k for k, v in status.items()}


def test_enums_and_constants_are_the_headers(header):
    assert enum_of(header, "m3idx_mode") == {"M3IDX_MODE_DECODE": L.MODE_DECODE,
                                            "M3IDX_MODE_PREFILL": L.MODE_PREFILL}
    assert enum_of(header, "m3idx_dtype") == {"M3IDX_DTYPE_BF16": L.DTYPE_BF16,
                                             "M3IDX_DTYPE_E4M3": L.DTYPE_E4M3}
    backends = enum_of(header, "m3idx_backend")
    assert {k.replace("M3IDX_BACKEND_", "").lower(): v for k, v in backends.items()} == L.BACKENDS
    defines = {m.group(1): int(m.group(2), 0)
               for m in re.finditer(r"#define (M3IDX_\w+) (0x[0-9a-f]+|\d+)u?\b", header)}
    for name, value in {"BLOCK_SIZE": L.BLOCK_SIZE, "HEAD_DIM": L.HEAD_DIM, "TOPK": L.TOPK,
                        "PAGE_BYTES": L.PAGE_BYTES, "MAX_THREADS": L.MAX_THREADS,
                        "FLAG_HOST_POINTERS": L.FLAG_HOST_POINTERS}.items():
        assert defines["M3IDX_" + name] == value, name
