#!/usr/bin/env bash
# Installs, builds everything (the tests with the program) and runs the test suite. Tests labelled
# "slow" run only with TROUPE_SLOW=1. A failed run ends with what each failed test printed last.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
cmake --build build --parallel "$(nproc)"
label_args=(-LE slow)
[ "${TROUPE_SLOW:-0}" = 1 ] && label_args=()
status=0
ctest --test-dir build --output-on-failure --timeout 1500 "${label_args[@]}" || status=$?
[ "$status" = 0 ] || bash scripts/print-failed-tests.sh build
exit "$status"
