#!/bin/sh
# check-python.sh - the Python package's pytest suite (tests/python) against
# the build tree's library (M3IDX_LIBRARY) and command (M3IDX).
set -u
: "${srcdir:=.}"
: "${top_srcdir:=$srcdir/..}"
if [ -z "${PYTHON:-}" ] || [ "${HAVE_PYTHON:-no}" != yes ]; then
  echo "SKIP: configured without the Python package (--without-python, or no python3 found)"
  exit 77
fi
case "${CFLAGS:-}" in
*-fsanitize=*)
  echo "SKIP: the library is built with sanitizers, which $PYTHON cannot load"
  exit 77 ;;
esac
if ! "$PYTHON" -c "import numpy, pytest" 2>"${TMPDIR:-/tmp}/m3idx-py-import.$$"; then
  echo "SKIP: $PYTHON lacks numpy or pytest (Debian: python3-numpy python3-pytest):"
  cat "${TMPDIR:-/tmp}/m3idx-py-import.$$"
  rm -f "${TMPDIR:-/tmp}/m3idx-py-import.$$"
  exit 77
fi
rm -f "${TMPDIR:-/tmp}/m3idx-py-import.$$"
PYTHONPATH="$top_srcdir/python:$srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
# The source tree may be read-only (distcheck): no cache, no bytecode there.
exec "$PYTHON" -m pytest -q -rs -p no:cacheprovider "$srcdir/python"
