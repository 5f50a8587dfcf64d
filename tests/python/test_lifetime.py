"""Who frees a context, and when: interpreter exit with daemon threads
inside calls, short-lived threads, fork.  Each runs in a fresh interpreter,
since exit and fork are what is under test."""

import os
import subprocess
import sys
import textwrap

import pytest

# One request of 8192 tokens; WORK(n) runs a decode call n times.
PRELUDE = textwrap.dedent("""
    import os, sys, threading
    import numpy as np
    import m3idx
    rng = np.random.default_rng(0)
    KEYS = rng.standard_normal((8192, 128)).astype(np.float32)
    PAGES = m3idx.encode_keys(KEYS)
    def work(n=None, rows=4, max_seq_len=8192):
        q = m3idx.float_to_bf16(KEYS[:rows]).reshape(rows, 1, 128).copy()
        bt = np.tile(np.arange(64, dtype=np.int32), (rows, 1))
        seq = np.full(rows, 8192, np.int32)
        out = np.empty((1, rows, 16), np.int32)
        i = 0
        while n is None or i < n:
            m3idx.mxfp4_index_topk_decode(q, PAGES, bt, seq, None, out, max_seq_len=max_seq_len,
                                          query_len=1, scale=0.1)
            i += 1
        return out
    def rss_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
""")


def run_python(body, timeout=120):
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
                          capture_output=True, text=True, timeout=timeout)


def test_exit_with_daemon_threads_inside_calls():
    """The exit hook used to destroy contexts other threads were inside: 7
    exits in 12 died with SIGSEGV or SIGABRT.  Each run must exit 0."""
    body = """
        for _ in range(4):
            threading.Thread(target=work, daemon=True).start()
        import time
        time.sleep(0.05)
        sys.exit(0)
    """
    for attempt in range(16):
        r = run_python(body)
        assert r.returncode == 0, "run %d: exit status %d\n%s" % (attempt, r.returncode,
                                                                  r.stderr[-2000:])


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="no /proc/self/statm")
def test_short_lived_threads_free_their_contexts():
    """Each thread's context (about 2 MiB at this max_seq_len) is freed when
    the thread ends: 40 threads used to add over 80 MiB."""
    r = run_python("""
        def one():
            work(1, rows=64, max_seq_len=1 << 20)
        for _ in range(3):
            t = threading.Thread(target=one); t.start(); t.join()
        before = rss_mib()
        for _ in range(40):
            t = threading.Thread(target=one); t.start(); t.join()
        print(before, rss_mib())
    """)
    assert r.returncode == 0, r.stderr
    before, after = map(float, r.stdout.split())
    assert after - before < 24, "40 threads grew the process from %.0f to %.0f MiB" % (
        before, after)


def test_fork_while_another_thread_is_inside_a_call():
    """A child made by fork while another thread is inside a call makes its
    own context (the inherited one is neither used nor freed) and gets the
    parent's answer."""
    r = run_python("""
        want = work(1).copy()
        threading.Thread(target=work, daemon=True).start()
        import time
        time.sleep(0.05)
        pid = os.fork()
        if pid == 0:
            ok = np.array_equal(work(2), want)
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), np.array_equal(work(1), want))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "True"], r.stdout + r.stderr


def test_contexts_are_per_thread_and_reused():
    r = run_python("""
        from m3idx import _contexts
        work(2)
        mine = _contexts.live_contexts()
        seen = []
        def other():
            work(1)
            seen.append(_contexts.live_contexts())
        t = threading.Thread(target=other); t.start(); t.join()
        print(mine, seen[0], _contexts.live_contexts())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "1", "1"]
