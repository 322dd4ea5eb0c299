#!/usr/bin/env bash
# Prints, after a test run, the last lines each failed test printed (from ctest's log of the run),
# so that the end of the output — all a CI service may keep — says why each failed.
# Usage: bash scripts/print-failed-tests.sh BUILD_DIR [LINES]
set -euo pipefail
build="${1:?usage: print-failed-tests.sh BUILD_DIR [LINES]}"
lines="${2:-60}"
log="$build/Testing/Temporary/LastTest.log"
[ -f "$log" ] || { echo "print-failed-tests: $log: no ctest log there" >&2; exit 2; }
awk -v keep="$lines" '
  / Testing: / && !in_output { name = $0; sub(/^[0-9]+\/[0-9]+ Testing: /, "", name); n = 0; next }
  /^Output:$/ { in_output = 1; getline; next }
  /^<end of output>$/ { in_output = 0; next }
  in_output { out[n++] = $0; next }
  /^Test Failed\.$/ {
    printf "\n===== failed: %s (%s) — its last %d lines =====\n", name, $0, (n < keep ? n : keep)
    for (i = (n > keep ? n - keep : 0); i < n; ++i) print out[i]
    failed++
  }
  END { if (failed) printf "===== %d failed test(s) above =====\n", failed }
' "$log"
