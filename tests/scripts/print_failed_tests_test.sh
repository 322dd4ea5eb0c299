#!/usr/bin/env bash
# scripts/print-failed-tests.sh on a real ctest run of four tests — one passing, one failing, one
# timed out, one skipped: it names the two failures with the last lines each printed, and nothing
# of the others, and ends with a list of both, the failing one with its first failed assertion.
set -u
root="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(failed_output NONE)
enable_testing()
add_test(NAME "passes" COMMAND sh -c "echo passing output")
add_test(NAME "fails" COMMAND sh -c "echo test.cpp:12: FAILED:; echo '  CHECK( a == b )'; echo with expansion:; for i in 1 2 3 4 5; do echo failing line \$i; done; exit 3")
add_test(NAME "times out" COMMAND sh -c "echo waiting line; sleep 10")
set_tests_properties("times out" PROPERTIES TIMEOUT 1)
add_test(NAME "skips" COMMAND sh -c "echo skipping output; exit 77")
set_tests_properties("skips" PROPERTIES SKIP_RETURN_CODE 77)
CMAKE
cmake -S "$work" -B "$work/build" > /dev/null && ctest --test-dir "$work/build" > /dev/null 2>&1
out=$(bash "$root/scripts/print-failed-tests.sh" "$work/build" 3)
failed=0
fail() { echo "FAILED: $*"; failed=1; }
echo "$out" | grep -q "^===== failed: fails (Test Failed.)" || fail "the failing test is not named"
echo "$out" | grep -q "^===== failed: times out (Test Failed.)" || fail "the timed-out test is not named"
[ "$(echo "$out" | grep '^failing line')" = "failing line 3
failing line 4
failing line 5" ] || fail "not the failing test's last 3 lines"
echo "$out" | grep -q "^waiting line$" || fail "not the timed-out test's output"
echo "$out" | grep -qE "passing output|skipping output|failed: (passes|skips)" && fail "printed a test that did not fail"
echo "$out" | grep -q "^===== 2 failed test(s) above =====$" || fail "no count of the failures"
# The end names every failure, a Catch-style test with its first failed assertion.
[ "$(echo "$out" | tail -n 5)" = "  1. fails
    test.cpp:12: FAILED:
      CHECK( a == b )
    with expansion:
  2. times out" ] || fail "the end does not list each failure with its first failed assertion"
bash "$root/scripts/print-failed-tests.sh" "$work/none" > /dev/null 2>&1
[ $? = 2 ] || fail "a folder without a ctest log should exit 2"
[ "$failed" = 0 ] && echo "print-failed-tests names each failed test with its last lines and in a list at the end, and nothing else"
exit "$failed"
