"""pytest-friendly checks built on m3idx.verify_topk."""

from .verify import verify_topk

__all__ = ["assert_topk_equivalent"]


def assert_topk_equivalent(*args, **kwargs):
    """verify_topk(*args, **kwargs), then AssertionError when a (head, row)
    is wrong: the message gives the counts and, for each of the first 20
    wrong rows, the proof (the blocks that cannot be swapped and by how many
    bounds, or the structural fault).  Returns the report otherwise."""
    report = verify_topk(*args, **kwargs)
    if report.wrong:
        raise AssertionError("the candidate top-k is wrong on %d of %d (head, row) pairs, "
                             "beyond what rounding explains:\n%s"
                             % (report.wrong, report.rows, report))
    return report
