"""m3idx.merge_topk against a top-16 taken here over the whole row."""

import numpy as np
import pytest

import m3idx


def whole_top(s, ids):
    """The top-16 of blocks ids of scores s by section 7's order, written here."""
    def key(b):
        x = float(s[b])
        return (1, 0.0, b) if np.isnan(x) else (0, -x, b)  # -0.0 == 0.0 as floats
    top = sorted(ids, key=key)[:16]
    out = np.full(16, -1, np.int32)
    vals = np.full(16, -np.inf, np.float32)
    out[:len(top)] = top
    vals[:len(top)] = s[top]
    return out, vals


@pytest.mark.parametrize("parts", [1, 2, 5])
@pytest.mark.parametrize("ties", [False, True])
def test_merge_of_parts_is_the_whole_rows_top(parts, ties):
    rng = np.random.default_rng(7 + parts + 10 * ties)
    pairs, n = 12, 300
    s = (rng.integers(0, 3, (pairs, n)) if ties else rng.standard_normal((pairs, n))).astype(np.float32)
    s[0, :5] = np.nan
    s[1, :7] = -0.0
    owner = rng.integers(0, parts, n)
    ids = [np.empty((3, 4, 16), np.int32) for _ in range(parts)]
    vals = [np.empty((3, 4, 16), np.float32) for _ in range(parts)]
    want_ids = np.empty((3, 4, 16), np.int32)
    want_vals = np.empty((3, 4, 16), np.float32)
    for i in range(pairs):
        h, r = divmod(i, 4)
        want_ids[h, r], want_vals[h, r] = whole_top(s[i], list(range(n)))
        for p in range(parts):
            ids[p][h, r], vals[p][h, r] = whole_top(s[i], [b for b in range(n) if owner[b] == p])
    got_ids, got_vals = m3idx.merge_topk(ids, vals)
    np.testing.assert_array_equal(got_ids, want_ids)
    assert got_vals.tobytes() == want_vals.tobytes()


def test_bad_lists_are_refused_by_name():
    a = np.arange(16, dtype=np.int32)[None]
    v = np.ones((1, 16), np.float32)
    with pytest.raises(m3idx.Error, match="pair 0 lists block 0 twice"):
        m3idx.merge_topk([a, a + 0], [v, v])
    with pytest.raises(TypeError, match=r"ids\[1\] is int64"):
        m3idx.merge_topk([a, a.astype(np.int64) + 100], [v, v])
    with pytest.raises(ValueError, match="one scores array per ids array"):
        m3idx.merge_topk([a], [])
    bad = a.copy()
    bad[0, 2] = -1
    with pytest.raises(m3idx.Error, match=r"ids\[0\] pair 0 slot 3 is 3"):
        m3idx.merge_topk([bad], [v])
