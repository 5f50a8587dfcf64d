"""The format helpers against values computed here and against `m3idx
encode'."""

import math
import subprocess

import numpy as np
import pytest

import m3idx
import oracle
from conftest import bf16_bits


def test_bf16_round_trip():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5, 3.4028235e38, 1e-40], np.float32)
    bits = m3idx.float_to_bf16(x)
    assert bits.tobytes() == bf16_bits(x).tobytes()
    back = m3idx.bf16_to_float(bits)
    assert back.view(np.uint32).tobytes() == (bits.astype(np.uint32) << 16).tobytes()


def test_e4m3_all_codes():
    codes = np.arange(256, dtype=np.uint8)
    values = m3idx.e4m3_to_float(codes)
    for c in range(256):
        if c & 0x7f == 0x7f:
            assert np.isnan(values[c])
            continue
        m, e = oracle.e4m3_parts(c)
        assert values[c] == m * 2.0 ** e
    finite = values[~np.isnan(values)]
    assert (m3idx.e4m3_to_float(m3idx.float_to_e4m3(finite)) == finite).all()
    assert m3idx.float_to_e4m3(np.array([1000.0, -np.inf], np.float32)).tolist() == [0x7e, 0xfe]


def test_e2m1_and_e8m0():
    codes = np.arange(16, dtype=np.uint8)
    want = [v / 2 * (-1 if c & 8 else 1) for c, v in zip(range(16), oracle.E2M1 * 2)]
    assert m3idx.e2m1_to_float(codes).tolist() == want
    assert m3idx.float_to_e2m1(np.array([0.25, 0.75, 2.5, 5.0, 7.0], np.float32)).tolist() == \
        [0, 2, 4, 6, 7]
    assert m3idx.e8m0_to_float(np.array([127, 0, 254], np.uint8)).tolist() == \
        [1.0, 2.0 ** -127, 2.0 ** 127]
    assert m3idx.e8m0_for_amax(np.array([6.0, 6.5, 0.0], np.float32)).tolist() == [127, 128, 0]


def test_encode_matches_the_command(cli, tmp_path):
    rng = np.random.default_rng(21)
    keys = (rng.standard_normal((300, 128)) * 3).astype(np.float32)
    np.save(tmp_path / "keys.npy", keys)
    subprocess.run([cli, "encode", "--keys", str(tmp_path / "keys.npy"), "--out",
                    str(tmp_path / "pages.npy")], check=True, capture_output=True)
    want = np.load(tmp_path / "pages.npy")
    pages = m3idx.encode_keys(keys)
    assert pages.tobytes() == want.tobytes()
    # bf16 keys: the same pages as their fp32 values.
    kb = bf16_bits(keys)
    assert m3idx.encode_keys(kb).tobytes() == \
        m3idx.encode_keys((kb.astype(np.uint32) << 16).view(np.float32)).tobytes()
    # decode: e2m1 * e8m0 of every element, by hand.
    dec = m3idx.decode_pages(pages)
    page, slot = pages[1], 5
    for d in (0, 1, 33, 127):
        b = page[64 * slot + d // 2]
        code = (b >> 4) if d & 1 else (b & 15)
        v = oracle.E2M1[code & 7] / 2 * (-1 if code & 8 else 1)
        assert dec[128 + slot, d] == v * 2.0 ** (int(page[8192 + 4 * slot + d // 32]) - 127)


def test_device_arrays_are_refused_by_the_format_helpers():
    class Device:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (1, False),
                                    "version": 3}
    with pytest.raises(ValueError, match="host arrays"):
        m3idx.float_to_bf16(Device())


def test_decode_pages_float64_is_exact():
    """Scale byte 254 with e2m1 >= 2 is past fp32 (inf there); float64 holds
    every value: 2^(e-127) * e2m1, written out here."""
    e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    pages = np.zeros((1, m3idx.PAGE_BYTES), np.uint8)
    codes = np.arange(128) % 16
    for slot, byte in enumerate([0, 1, 127, 200, 253, 254, 255]):
        pages[0, 64 * slot:64 * slot + 64] = (codes[0::2] | codes[1::2] << 4).astype(np.uint8)
        pages[0, 8192 + 4 * slot:8192 + 4 * slot + 4] = byte
    exact = m3idx.decode_pages(pages, dtype=np.float64)
    rounded = m3idx.decode_pages(pages)
    assert exact.dtype == np.float64 and rounded.dtype == np.float32
    for slot, byte in enumerate([0, 1, 127, 200, 253, 254, 255]):
        for d in range(128):
            want = math.nan if byte == 255 else math.ldexp(e2m1[d % 16], byte - 127)
            got = exact[slot, d]
            if byte == 255:
                assert math.isnan(got)
                continue
            assert got == want and math.copysign(1, got) == math.copysign(1, want)
            if abs(want) >= 2.0 ** 128:
                assert math.isinf(rounded[slot, d])
            else:
                assert float(rounded[slot, d]) == want
    assert math.isinf(rounded[5, 4]) and exact[5, 4] == 2.0 ** 128
    with pytest.raises(ValueError, match="dtype"):
        m3idx.decode_pages(pages, dtype=np.int32)
