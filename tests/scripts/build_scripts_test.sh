#!/usr/bin/env bash
# What the README's two commands ask to build. A copy of the scripts runs with cmake and ctest
# replaced by recorders of their arguments and the package installer by `true`: the real build and
# test run are what CI itself runs, and this checks only the order of what each command asks for.
# setup.sh (the first command) builds the troupe program alone; test.sh builds everything before
# ctest. And in the build given, each test suite is discovered once, its [slow]
# cases labelled: no discovery that finds nothing (the "contains no tests" warning of a suite
# without slow cases).
set -u
root="$1" build="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo/scripts" "$work/bin"
cp "$root/scripts/setup.sh" "$root/scripts/test.sh" "$work/repo/scripts/"
echo 'true' > "$work/repo/scripts/install-deps.sh"
for tool in cmake ctest; do
  printf '#!/bin/sh\necho "%s $*" >> "%s/calls"\n' "$tool" "$work" > "$work/bin/$tool"
  chmod +x "$work/bin/$tool"
done
failed=0
fail() { echo "FAILED: $*"; failed=1; }

PATH="$work/bin:$PATH" bash "$work/repo/scripts/setup.sh" > /dev/null || fail "setup.sh exited $?"
builds=$(grep '^cmake --build' "$work/calls")
[ "$(echo "$builds" | wc -l)" = 1 ] && echo "$builds" | grep -q -- '--target troupe$' ||
  fail "setup.sh should build the troupe target alone; it ran: $builds"

: > "$work/calls"
PATH="$work/bin:$PATH" bash "$work/repo/scripts/test.sh" > /dev/null || fail "test.sh exited $?"
order=$(grep -E '^(cmake --build|ctest)' "$work/calls" | sed -E 's/^(cmake --build build --parallel [0-9]+).*--target troupe$/\1 troupe/; s/^(cmake --build build --parallel [0-9]+)$/\1 all/; s/^ctest.*/ctest/; s/--parallel [0-9]+ //')
[ "$(echo $order)" = "cmake --build build troupe cmake --build build all ctest" ] ||
  fail "test.sh should build troupe (setup.sh), then everything, then run ctest; it ran: $(echo $order)"

# One discovery per suite: a second one with a spec its suite does not match warns at every build.
for suite in "$build"/tests/test_*_slow_label.cmake; do
  name=$(basename "$suite" _slow_label.cmake)
  count=$(grep -c "/${name}_include-" "$build/tests/CTestTestfile.cmake")
  [ "$count" = 1 ] || fail "$name is discovered $count times"
done
slow_cases=$(for exe in "$build"/tests/test_*; do
  [ -f "${exe}_slow_label.cmake" ] || continue
  "$exe" "[slow]" --list-test-names-only 2>/dev/null | sed "s/^/$(basename "$exe" | sed 's/^test_//'):/"
done | sort)
# Listed from a copy of the build's test files: ctest rewrites Testing/Temporary/LastTest.log even
# with -N, and this runs inside test.sh's own ctest, whose log print-failed-tests.sh reads after it.
listing="$work/listing"
(cd "$build" && find . -name CTestTestfile.cmake | while read -r file; do
  mkdir -p "$listing/$(dirname "$file")" && cp "$file" "$listing/$file"
done)
labelled=$(ctest --test-dir "$listing" -N -L '^slow$' | sed -nE 's/^ *Test +#[0-9]+: //p' | sort)
[ "$slow_cases" = "$labelled" ] || fail "the [slow] cases and the tests labelled slow differ:
$(diff <(echo "$slow_cases") <(echo "$labelled"))"

[ "$failed" = 0 ] && echo "setup.sh builds troupe, test.sh everything; every suite discovered once, [slow] labelled"
exit "$failed"
