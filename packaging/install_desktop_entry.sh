#!/usr/bin/env bash
# Add SegLens to the desktop's application menu, for this user only (no admin rights):
#   ./install-desktop-entry.sh            # in the unpacked SegLens folder (the build copies this script there)
#   packaging/install_desktop_entry.sh DIR  # DIR: an unpacked SegLens folder (with SegLens, seglens.png, seglens.desktop)
#   ... --remove                          # take the entry out again
# Writes ~/.local/share/applications/seglens.desktop (or under $XDG_DATA_HOME) with the absolute paths of the
# folder as it is now: run it again after moving the folder.
set -euo pipefail

remove=0
folder=""
for arg in "$@"; do
  case "$arg" in
    --remove) remove=1 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) folder="$arg" ;;
  esac
done
[ -n "$folder" ] || folder="$(dirname -- "$0")"
folder="$(cd -- "$folder" && pwd -P)"
applications="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
entry="$applications/seglens.desktop"

if [ "$remove" = 1 ]; then
  rm -f -- "$entry"
  echo "removed $entry"
else
  for needed in SegLens seglens.png seglens.desktop; do
    [ -e "$folder/$needed" ] || { echo "error: $folder/$needed not found: is $folder a SegLens folder?" >&2; exit 1; }
  done
  # Exec= quoting of the Desktop Entry spec: "…" with \ " ` $ escaped, then the value's own \ escaped again
  exec_arg="$folder/SegLens"
  case "$exec_arg" in
    *[[:space:]\"\'\\\>\<~\|\&\;\$\*\?\#\(\)\`]*)
      q="${exec_arg//\\/\\\\}"; q="${q//\"/\\\"}"; q="${q//\`/\\\`}"; q="${q//\$/\\\$}"
      exec_arg="\"$q\""; exec_arg="${exec_arg//\\/\\\\}" ;;
  esac
  mkdir -p -- "$applications"
  SEGLENS_EXEC="$exec_arg" SEGLENS_DIR="$folder" awk '
    /^Exec=/    { print "Exec=" ENVIRON["SEGLENS_EXEC"] " %F"; next }
    /^TryExec=/ { print "TryExec=" ENVIRON["SEGLENS_DIR"] "/SegLens"; next }
    /^Icon=/    { print "Icon=" ENVIRON["SEGLENS_DIR"] "/seglens.png"; next }
    { print }' "$folder/seglens.desktop" > "$entry.tmp"
  mv -- "$entry.tmp" "$entry"
  echo "installed $entry (SegLens in $folder)"
fi
if command -v update-desktop-database >/dev/null 2>&1; then
  update-desktop-database -q "$applications" || true
fi
