"""README's Python example runs and prints what README says it prints."""

import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README"


def test_readme_example():
    text = README.read_text()
    code = re.search(r"^<<<python\n(.*?)^python>>>$", text, re.S | re.M).group(1)
    promised = re.search(r"print\(.*\)  # (\[.*?\])", code).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README", "exec"), {})
    assert out.getvalue().strip() == promised
