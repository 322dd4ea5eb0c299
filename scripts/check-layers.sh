#!/usr/bin/env bash
# Includes point downward only: apps → actors → {comm, checkpoint, monitor, schedules} → compute.
# Prints one line per include of a folder a source file's top-level folder may not include, and
# exits 1 when there is one; a folder with sources that the table below does not place fails too,
# so a new folder gets its layer when it is added. A subfolder counts as its top-level folder
# (apps/commands/ is apps). tests/ may include anything.
#
#   scripts/check-layers.sh [ROOT]    # ROOT: the source tree to check; default: this repository
#
# Exit codes: 0 every include points downward; 1 a violation (listed on stdout); 2 ROOT is no folder.
set -euo pipefail
shopt -s nullglob

# folder: the folders of ours its sources may include besides its own ("-": none). apps faces the
# user and may call into any folder below it; actors is the runtime gluing the libraries; the four
# libraries use only compute's types (monitor only the header-only compute/expected.hpp) and none
# another; compute stands alone.
layer_table='
apps        actors comm checkpoint monitor schedules compute
actors      comm checkpoint monitor schedules compute
comm        compute
checkpoint  compute
monitor     compute
schedules   compute
compute     -
'
exempt=" tests "

root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
[ -d "$root" ] || { echo "check-layers: $root is not a folder" >&2; exit 2; }
root="$(cd "$root" && pwd -P)"

declare -A allowed
while read -r folder uses; do
  [ -n "$folder" ] || continue
  allowed[$folder]=" ${uses/#-/} "
done <<<"$layer_table"

# Sources as the repository has them (what git ignores, such as build trees, left out); in a tree
# that is no git checkout, every file outside hidden folders and CMake build trees.
list_files() {
  if [ "$(git -C "$root" rev-parse --show-toplevel 2>/dev/null)" = "$root" ]; then
    git -C "$root" ls-files --cached --others --exclude-standard
  else
    local folder
    for folder in "$root"/*/; do
      folder="$(basename "$folder")"
      [ -e "$root/$folder/CMakeCache.txt" ] && continue
      (cd "$root" && find "$folder" -path '*/.*' -prune -o -type f -print)
    done
  fi
}

# A relative path joined to a folder, "." and ".." taken out; empty when it leaves the root.
normalize() {
  local -a parts=() out=()
  IFS=/ read -ra parts <<<"$1"
  local part
  for part in "${parts[@]}"; do
    case "$part" in
      "" | .) ;;
      ..) [ "${#out[@]}" -gt 0 ] || return 0; unset 'out[${#out[@]}-1]' ;;
      *) out+=("$part") ;;
    esac
  done
  (IFS=/; echo "${out[*]}")
}

include_pattern='include[[:space:]]*("([^"]+)"|<([^>]+)>)'
violations=0
declare -A unplaced
while IFS= read -r file; do
  case "$file" in
    */*) ;;
    *) continue ;;
  esac
  case "$file" in
    *.cpp | *.hpp | *.cc | *.cxx | *.hh | *.h | *.c | *.cu | *.cuh | *.inl | *.ipp | *.tpp) ;;
    *) continue ;;
  esac
  [ -f "$root/$file" ] || continue  # listed by git but deleted in the working tree
  top="${file%%/*}"
  [[ "$exempt" == *" $top "* ]] && continue
  if [ -z "${allowed[$top]+set}" ]; then
    unplaced[$top]="$file"
    continue
  fi
  while IFS= read -r hit; do
    line="${hit%%:*}"
    [[ "${hit#*:}" =~ $include_pattern ]] || continue
    written="${BASH_REMATCH[1]}"
    path="${BASH_REMATCH[2]:-${BASH_REMATCH[3]}}"
    beside=""
    if [ -n "${BASH_REMATCH[2]}" ]; then
      case "$path" in
        ./* | ../*) path="$(normalize "${file%/*}/$path")" ;;
        # A quoted include is looked up beside its file first: a subfolder of that name is no reach.
        *) [ -e "$root/${file%/*}/$path" ] && beside=yes ;;
      esac
    fi
    target="${path%%/*}"
    [ "$target" != "$path" ] || continue  # no folder: a header beside the file or a system one
    [ "$target" != "$top" ] && [ -z "$beside" ] || continue
    [ -n "${allowed[$target]+set}" ] || [[ "$exempt" == *" $target "* ]] || continue  # not ours
    [[ "${allowed[$top]}" == *" $target "* ]] && continue
    uses="$(echo ${allowed[$top]})"
    echo "$file:$line: #include $written: $top may not include $target (it may include: ${uses:-none of ours})"
    violations=$((violations + 1))
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]' "$root/$file" || true)
done < <(list_files | sort)

for top in $(printf '%s\n' "${!unplaced[@]}" | sort); do
  echo "$top/: holds sources (${unplaced[$top]}) but has no line in the layer table of scripts/check-layers.sh"
  violations=$((violations + 1))
done

if [ "$violations" -gt 0 ]; then
  echo "check-layers: $violations violation(s) of apps → actors → {comm, checkpoint, monitor, schedules} → compute" >&2
  exit 1
fi
