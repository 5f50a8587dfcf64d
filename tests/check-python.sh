#!/bin/sh
# check-python.sh - the Python package's pytest suite (tests/python) against
# the build tree's library (M3IDX_LIBRARY) and command (M3IDX).  It skips
# only where configure left the package out (and says why); a package that
# was configured but whose suite cannot run is a failure, not a skip.
set -u
: "${srcdir:=.}"
: "${top_srcdir:=$srcdir/..}"
if [ -z "${PYTHON:-}" ] || [ "${HAVE_PYTHON:-no}" != yes ]; then
  echo "SKIP: configured without the Python package (--without-python, or no python3 that imports numpy)"
  exit 77
fi
case "${CFLAGS:-}" in
*-fsanitize=*)
  echo "SKIP: the library is built with sanitizers, which $PYTHON cannot load"
  exit 77 ;;
esac
err="${TMPDIR:-/tmp}/m3idx-py-import.$$"
if ! "$PYTHON" -c "import numpy, pytest" 2>"$err"; then
  echo "FAIL: the Python package was configured for $PYTHON, but its suite cannot run there"
  echo "      (Debian: python3-numpy python3-pytest; or configure --without-python):"
  cat "$err"
  rm -f "$err"
  exit 1
fi
rm -f "$err"
PYTHONPATH="$top_srcdir/python:$srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE
# The source tree may be read-only (distcheck): no cache, no bytecode there.
exec "$PYTHON" -m pytest -q -rs -p no:cacheprovider "$srcdir/python"
