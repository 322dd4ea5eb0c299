#!/usr/bin/env bash
# Includes point downward only: apps → actors → {comm, checkpoint, monitor, schedules} → compute.
# Prints one line per include of a folder a source file's top-level folder may not include, and
# exits 1 when there is one; a folder with sources that the table below does not place fails too,
# so a new folder gets its layer when it is added. A subfolder counts as its top-level folder
# (apps/commands/ is apps). tests/ may include anything.
#
# Inside actors/ and apps/ the rooms (their subfolders) are layered the same way: the room table
# below says which rooms of its folder a room may include; a subfolder of a room counts as the
# room (apps/commands/shell/ is apps/commands). The files directly in actors/ or apps/ (the message
# catalogue, exit codes) are every room's to include and include no room themselves, except the
# entry points listed, which sit above every room of their folder. Two rooms that include each
# other, or a room that includes one above it, fail as a folder does.
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

# room: the rooms of its folder its sources may include besides its own and the folder's own
# files ("-": none). control is the shell's port; supervision decides what the job does (and runs
# the attempts through the control port); a worker runs a rank by the supervision's policies; a
# node process hosts workers. In apps, launch starts processes, config resolves what the
# user asked for, commands turn arguments into one call, bench measures through the commands'
# helpers.
room_table='
actors/control      -
actors/supervision  actors/control
actors/worker       actors/supervision
actors/node         actors/worker actors/supervision
apps/launch         -
apps/config         apps/launch
apps/commands       apps/config apps/launch
apps/bench          apps/commands apps/config apps/launch
'
entry_points=" apps/main.cpp "

root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
[ -d "$root" ] || { echo "check-layers: $root is not a folder" >&2; exit 2; }
root="$(cd "$root" && pwd -P)"

declare -A allowed
while read -r folder uses; do
  [ -n "$folder" ] || continue
  allowed[$folder]=" ${uses/#-/} "
done <<<"$layer_table"
declare -A room_allowed
while read -r room uses; do
  [ -n "$room" ] || continue
  room_allowed[$room]=" ${uses/#-/} "
done <<<"$room_table"

# The room of a path inside a folder with rooms ("actors/node" for actors/node/x.cpp), "" for a
# file directly in such a folder, and nothing for a folder without rooms.
room_of() {
  local path="$1" top="${1%%/*}" rest
  case " actors apps " in *" $top "*) ;; *) return 0 ;; esac
  rest="${path#*/}"
  [ "$rest" != "${rest#*/}" ] || { echo ""; return 0; }
  echo "$top/${rest%%/*}"
}

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
declare -A unplaced unplaced_rooms
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
  room="$(room_of "$file")"
  if [ -n "$room" ] && [ -z "${room_allowed[$room]+set}" ]; then
    unplaced_rooms[$room]="$file"
  fi
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
    [ -z "$beside" ] || continue
    if [ "$target" = "$top" ]; then
      case " actors apps " in *" $top "*) ;; *) continue ;; esac
      from_room="$(room_of "$file")"
      to_room="$(room_of "$path")"
      # Its own room, or the folder's own files: always within reach.
      [ -n "$to_room" ] && [ "$to_room" != "$from_room" ] || continue
      [[ "$entry_points" == *" $file "* ]] && continue
      if [ -z "$from_room" ]; then
        echo "$file:$line: #include $written: $top/ files include none of its rooms ($to_room is one)"
        violations=$((violations + 1))
        continue
      fi
      if [ -z "${room_allowed[$from_room]+set}" ]; then
        unplaced_rooms[$from_room]="$file"
        continue
      fi
      [[ "${room_allowed[$from_room]}" == *" $to_room "* ]] && continue
      uses="$(echo ${room_allowed[$from_room]})"
      echo "$file:$line: #include $written: $from_room may not include $to_room (it may include: ${uses:-no other room})"
      violations=$((violations + 1))
      continue
    fi
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

for room in $(printf '%s\n' "${!unplaced_rooms[@]}" | sort); do
  echo "$room/: holds sources (${unplaced_rooms[$room]}) but has no line in the room table of scripts/check-layers.sh"
  violations=$((violations + 1))
done

if [ "$violations" -gt 0 ]; then
  echo "check-layers: $violations violation(s) of apps → actors → {comm, checkpoint, monitor, schedules} → compute" >&2
  exit 1
fi
