#!/usr/bin/env bash
# Build the C kernels with AddressSanitizer and UndefinedBehaviorSanitizer and run the kernel
# tests (and any other test paths given) against that build.
#   usage: tools/sanitize.sh [pytest args...]     (default: tests/foundation)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r src/bloomskip "$work/"
include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
gcc -shared -fPIC -g -O1 -fno-omit-frame-pointer -std=c11 -Wall -Wextra -Wno-unused-parameter \
    -fsanitize=address,undefined -fno-sanitize-recover=undefined \
    -I"$include" -Isrc/bloomskip/_native_src src/bloomskip/_native_src/*.c \
    -o "$work/bloomskip/_native$suffix"
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
# Reports go to files (pytest would swallow them with the test's stderr) and are shown below.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=$work/asan
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$work/ubsan
# A sitecustomize that puts the sanitized copy first, ahead of any installed bloomskip.
cat > "$work/sitecustomize.py" <<PY
import sys
sys.path.insert(0, "$work")
for name in [m for m in sys.modules if m == "bloomskip" or m.startswith("bloomskip.")]:
    del sys.modules[name]
PY
PYTHONPATH="$work" "$python" - <<PY
import bloomskip._native as n
assert n.__file__.startswith("$work"), n.__file__
print("sanitized kernels:", n.__file__)
PY
status=0
PYTHONPATH="$work" "$python" -m pytest -q -p no:cacheprovider "${@:-tests/foundation}" || status=$?
for report in "$work"/asan.* "$work"/ubsan.*; do
    [ -e "$report" ] && { echo "== sanitizer report $report"; cat "$report"; status=1; }
done
exit $status
