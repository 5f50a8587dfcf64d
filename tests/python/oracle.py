"""An exact oracle of SPEC sections 4-7 in Python integers, independent of
the library: finite queries and scale bytes below 255 only."""

import struct

BLOCK, TOPK = 128, 16
CLAMP = struct.unpack("<f", struct.pack("<I", 0x6fa18f07))[0]
INIT, LOCAL = struct.unpack("<f", struct.pack("<I", 0x7149f2ca))[0], \
    struct.unpack("<f", struct.pack("<I", 0x6fa18f08))[0]
E2M1 = [0, 1, 2, 3, 4, 6, 8, 12]  # twice the magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}
SHIFT = 300                        # every exact term is an integer times 2^-SHIFT


def f32_parts(bits):
    """(m, e) with value m * 2^e for finite fp32 bits."""
    sign = -1 if bits >> 31 else 1
    exp, frac = (bits >> 23) & 0xff, bits & 0x7fffff
    if exp == 0:
        return sign * frac, -149
    return sign * (frac | 0x800000), exp - 150


def e4m3_parts(b):
    sign = -1 if b & 0x80 else 1
    exp, frac = (b >> 3) & 0xf, b & 7
    if exp == 0:
        return sign * frac, -9
    return sign * (frac | 8), exp - 10


def round_f32(num, shift):
    """fp32 bits of RN(num * 2^-shift), num an integer (SPEC section 4.3):
    nearest, ties to even, subnormals kept, +-inf past the range, +0 for 0."""
    if num == 0:
        return 0
    sign = 0x80000000 if num < 0 else 0
    n = abs(num)
    e = n.bit_length() - 1 - shift            # 2^e <= value < 2^(e+1)
    ulp = max(e - 23, -149)                   # the exponent of one unit in the last place
    s = -shift - ulp
    if s >= 0:
        q = n << s
    else:
        q, r = n >> -s, n & ((1 << -s) - 1)
        half = 1 << (-s - 1)
        if r > half or (r == half and q & 1):
            q += 1
    if q == 0:
        return 0
    if q >= 1 << 24:
        q, ulp = q >> 1, ulp + 1
    if q < 1 << 23:                           # subnormal
        return sign | q
    if ulp + 23 > 127:
        return sign | 0x7f800000
    return sign | ((ulp + 23 + 127) << 23) | (q & 0x7fffff)


def logit_bits(q_parts, key, scale_bits):
    """q_parts: 128 (m, e); key: 64 data bytes + 4 scale bytes (< 255)."""
    data, scales = key[:64], key[64:]
    total = 0
    for d in range(128):
        b = data[d // 2]
        code = (b >> 4) if d & 1 else (b & 15)
        mk = E2M1[code & 7] * (-1 if code & 8 else 1)
        if mk == 0:
            continue
        mq, eq = q_parts[d]
        # k = mk/2 * 2^(s-127)
        total += (mq * mk) << (eq + scales[d // 32] - 128 + SHIFT)
    ms, es = f32_parts(scale_bits)
    return round_f32(total * ms, SHIFT - es)


def bits_to_float(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def block_scores(q_parts, page_rows, scale_bits, pos):
    """Block scores of one row at position pos; page_rows(b) gives the 128
    keys of block b as 68-byte strings."""
    n = pos // BLOCK + 1
    out = []
    for b in range(n):
        keys = page_rows(b)
        best = None
        for t in range(min(BLOCK, pos - b * BLOCK + 1)):
            v = bits_to_float(logit_bits(q_parts, keys[t], scale_bits))
            if v == v and (best is None or v > best):
                best = v
        out.append(float("nan") if best is None else best)
    return out


def pin_and_topk(scores, init_blocks, local_blocks):
    n = len(scores)
    s = [x if x != x or x <= CLAMP else CLAMP for x in scores]
    for b in range(min(init_blocks, n)):
        s[b] = INIT
    for b in range(max(0, n - local_blocks), n):
        s[b] = LOCAL
    order = sorted(range(n), key=lambda b: (1, 0, b) if s[b] != s[b] else (0, -s[b], b))
    ids = order[:TOPK] + [-1] * (TOPK - min(TOPK, n))
    return s, ids
