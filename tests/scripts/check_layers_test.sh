#!/usr/bin/env bash
# scripts/check-layers.sh must fail on a tree that breaks the layers, naming each file, line and
# include, and pass a tree that keeps them: a check that never fails protects nothing.
set -euo pipefail
check="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/check-layers.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

# put TREE FILE LINE...: writes the lines as FILE in TREE, creating its folders.
put() {
  local tree="$1" file="$2"
  shift 2
  mkdir -p "$(dirname "$work/$tree/$file")"
  printf '%s\n' "$@" >"$work/$tree/$file"
}

# expect TREE CODE [TEXT...]: the check of TREE exits CODE and prints every TEXT.
expect() {
  local tree="$1" code="$2" got=0
  shift 2
  local out
  out="$(bash "$check" "$work/$tree" 2>&1)" || got=$?
  if [ "$got" != "$code" ]; then
    echo "FAIL $tree: exit $got, expected $code; output:"
    echo "$out"
    failures=$((failures + 1))
  fi
  local text
  for text in "$@"; do
    if ! grep -qF -- "$text" <<<"$out"; then
      echo "FAIL $tree: output lacks: $text; output:"
      echo "$out"
      failures=$((failures + 1))
    fi
  done
}

# Every allowed reach, subfolders counted as their top folder, tests/ free to include anything.
put clean compute/tensor.hpp '#pragma once'
put clean compute/model/gpt.cpp '#include "compute/tensor.hpp"' '#include <vector>'
put clean monitor/log.hpp '#include "compute/expected.hpp"'
put clean comm/engine.cpp '#include "comm/engine.hpp"' '#include "compute/tensor.hpp"'
put clean checkpoint/store.cpp '#include "compute/tensor.hpp"'
put clean schedules/simulator.cpp '#include "compute/expected.hpp"'
put clean actors/worker/rank.cpp '#include "comm/engine.hpp"' '#include "monitor/log.hpp"' '#include "schedules/x.hpp"'
put clean apps/commands/train.cpp '#include "actors/messages.hpp"' '#include "apps/config/keys.hpp"' '#include "compute/tensor.hpp"'
put clean tests/apps/train_test.cpp '#include "apps/commands/train.hpp"'
put clean docs/notes.md '#include "apps/x.hpp"'
expect clean 0

# Upward includes, a sibling, a relative path and an angle-bracket include are each one line.
cp -r "$work/clean" "$work/broken"
put broken compute/x.cpp '#include <vector>' '#include "actors/y.hpp"'
put broken comm/z.cpp '// the transport' '#include "apps/launch/w.hpp"'
put broken monitor/trace.cpp '#include "comm/group.hpp"'
put broken checkpoint/a/b.cpp '#include "../../actors/messages.hpp"'
put broken schedules/plan.cpp '#include <apps/config/keys.hpp>'
put broken actors/supervision/policy.cpp '#include "apps/config/keys.hpp"'
expect broken 1 \
  'compute/x.cpp:2: #include "actors/y.hpp": compute may not include actors' \
  'comm/z.cpp:2: #include "apps/launch/w.hpp": comm may not include apps' \
  'monitor/trace.cpp:1: #include "comm/group.hpp": monitor may not include comm' \
  'checkpoint/a/b.cpp:1: #include "../../actors/messages.hpp": checkpoint may not include actors' \
  'schedules/plan.cpp:1: #include <apps/config/keys.hpp>: schedules may not include apps' \
  'actors/supervision/policy.cpp:1: #include "apps/config/keys.hpp": actors may not include apps' \
  'check-layers: 6 violation(s)'
if [ "$(bash "$check" "$work/broken" 2>/dev/null | wc -l)" != 6 ]; then
  echo "FAIL broken: not one line per violation"
  failures=$((failures + 1))
fi

# Rooms: actors/ and apps/ are layered inside too. A room that includes a room above it, two rooms
# that include each other, and a folder's own file that includes a room each fail; the entry point
# may include every room, and a room its own subfolders.
cp -r "$work/clean" "$work/rooms"
put rooms actors/messages.hpp '#pragma once'
put rooms actors/node/node_process.cpp '#include "actors/worker/rank.hpp"' '#include "actors/messages.hpp"'
put rooms apps/main.cpp '#include "apps/commands/commands.hpp"' '#include "apps/config/keys.hpp"'
put rooms apps/commands/shell/shell.cpp '#include "apps/commands/commands.hpp"' '#include "apps/config/keys.hpp"'
expect rooms 0
cp -r "$work/rooms" "$work/mutual"
put mutual actors/control/monitor.cpp '#include "actors/supervision/job.hpp"'
put mutual actors/supervision/job.cpp '#include "actors/control/monitor.hpp"'
put mutual actors/worker/run.cpp '#include "actors/node/node_process.hpp"'
put mutual actors/failure.hpp '#include "actors/supervision/policy.hpp"'
put mutual apps/launch/hosts.cpp '#include "apps/commands/commands.hpp"'
put mutual actors/dreams/idea.cpp '#include "actors/messages.hpp"'
expect mutual 1 \
  'actors/control/monitor.cpp:1: #include "actors/supervision/job.hpp": actors/control may not include actors/supervision' \
  'actors/worker/run.cpp:1: #include "actors/node/node_process.hpp": actors/worker may not include actors/node' \
  'actors/failure.hpp:1: #include "actors/supervision/policy.hpp": actors/ files include none of its rooms' \
  'apps/launch/hosts.cpp:1: #include "apps/commands/commands.hpp": apps/launch may not include apps/commands' \
  'actors/dreams/: holds sources (actors/dreams/idea.cpp) but has no line in the room table' \
  'check-layers: 5 violation(s)'
if bash "$check" "$work/mutual" 2>/dev/null | grep -qF 'actors/supervision/job.cpp'; then
  echo "FAIL mutual: supervision may include control, yet it was reported"
  failures=$((failures + 1))
fi

# A new folder with sources has to be given its layer.
cp -r "$work/clean" "$work/unplaced"
put unplaced tools/gen.cpp '#include "compute/tensor.hpp"'
expect unplaced 1 'tools/: holds sources (tools/gen.cpp) but has no line in the layer table'

# A CMake build tree is not read (its compiler probes are sources of no layer).
cp -r "$work/clean" "$work/built"
put built build/CMakeCache.txt '# a build tree'
put built build/CMakeFiles/id.cpp '#include "apps/x.hpp"'
expect built 0

# In a git checkout what git ignores (a build tree) is not read; what it does not yet track is.
cp -r "$work/clean" "$work/repo"
put repo .gitignore '/build/'
put repo build/CMakeFiles/id.cpp '#include "apps/x.hpp"'
git init -q "$work/repo"
expect repo 0
put repo compute/new.cpp '#include "apps/x.hpp"'
expect repo 1 'compute/new.cpp:1: #include "apps/x.hpp"'

expect missing 2 'is not a folder'

[ "$failures" = 0 ] && echo "check-layers: every case as expected"
exit "$((failures > 0))"
