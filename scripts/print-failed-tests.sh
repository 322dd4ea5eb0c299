#!/usr/bin/env bash
# Prints, after a test run, the last lines each failed test printed (from ctest's log of the run),
# then one short entry a failed test — its name and its first failed assertion (a Catch test's
# "FAILED:" line and the two after it) — so that the end of the output, all a CI service may keep,
# names every failure even where the lines of the first ones were cut.
# Usage: bash scripts/print-failed-tests.sh BUILD_DIR [LINES]
set -euo pipefail
build="${1:?usage: print-failed-tests.sh BUILD_DIR [LINES]}"
lines="${2:-60}"
log="$build/Testing/Temporary/LastTest.log"
[ -f "$log" ] || { echo "print-failed-tests: $log: no ctest log there" >&2; exit 2; }
awk -v keep="$lines" '
  BEGIN { failed = 0 }
  / Testing: / && !in_output { name = $0; sub(/^[0-9]+\/[0-9]+ Testing: /, "", name); n = 0; first = -1; next }
  /^Output:$/ { in_output = 1; getline; next }
  /^<end of output>$/ { in_output = 0; next }
  in_output { if (first < 0 && $0 ~ /: FAILED:$/) first = n; out[n++] = $0; next }
  /^Test Failed\.$/ {
    printf "\n===== failed: %s (%s) — its last %d lines =====\n", name, $0, (n < keep ? n : keep)
    for (i = (n > keep ? n - keep : 0); i < n; ++i) print out[i]
    summary[failed] = name
    if (first >= 0)
      for (i = first; i < n && i < first + 3; ++i) summary[failed] = summary[failed] "\n    " out[i]
    failed++
  }
  END {
    if (!failed) exit
    printf "===== %d failed test(s) above =====\n", failed
    for (i = 0; i < failed; ++i) printf "  %d. %s\n", i + 1, summary[i]
  }
' "$log"
