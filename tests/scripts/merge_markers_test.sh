#!/usr/bin/env bash
# A merge whose conflict was committed unresolved leaves its markers in a file, where nothing else
# fails on them in a document. Fails naming every line that starts with one.
set -u
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
found=$(grep -rnE '^(<<<<<<< |>>>>>>> |=======$)' "$root" --exclude-dir=build --exclude-dir=.git \
  --exclude-dir=third_party --include='*.cpp' --include='*.hpp' --include='*.cu' --include='*.md' \
  --include='*.txt' --include='*.cmake' --include='*.sh' --include='*.py' --include='*.toml')
if [ -n "$found" ]; then
  printf '%s\n' "$found" | sed 's/$/  <- a merge conflict marker/'
  exit 1
fi
echo "no merge conflict marker"
