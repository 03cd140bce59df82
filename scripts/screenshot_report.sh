#!/usr/bin/env bash
# Screenshot an edgeprof HTML report with headless Chromium.
#
#   scripts/screenshot_report.sh REPORT.html OUT.png [WIDTH,HEIGHT]
#
# The report is self-contained (images are data URIs), so Chromium is started with networking, sync,
# component updates and first-run work all off, in a throwaway profile. Exit codes: 0 ok, 1 the
# screenshot failed, 2 bad usage or Chromium not installed. Override the browser with $CHROMIUM.
set -euo pipefail

usage() {
    echo "usage: $0 REPORT.html OUT.png [WIDTH,HEIGHT]   (default size 1400,2400)" >&2
    exit 2
}

if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
    usage
fi
report=$1
out=$2
size=${3:-1400,2400}

if [ ! -f "$report" ]; then
    echo "$0: no such file: $report" >&2
    exit 2
fi
case "$size" in
    [0-9]*,[0-9]*) ;;
    *) echo "$0: size must be WIDTH,HEIGHT (got $size)" >&2; exit 2 ;;
esac

browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
    for candidate in chromium chromium-browser google-chrome-stable google-chrome; do
        if command -v "$candidate" >/dev/null 2>&1; then
            browser=$(command -v "$candidate")
            break
        fi
    done
fi
if [ -z "$browser" ] || ! command -v "$browser" >/dev/null 2>&1; then
    cat >&2 <<'EOF'
screenshot_report.sh: Chromium is not installed.
  Debian / Raspberry Pi OS:   sudo apt-get install chromium
  Ubuntu / JetPack (L4T):     sudo snap install chromium   (or: sudo apt-get install chromium-browser)
  Or point $CHROMIUM at any Chrome/Chromium binary.
EOF
    exit 2
fi

report_abs=$(cd "$(dirname "$report")" && pwd)/$(basename "$report")
out_dir=$(dirname "$out")
mkdir -p "$out_dir"
out_abs=$(cd "$out_dir" && pwd)/$(basename "$out")

profile=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-chromium.XXXXXX")
cleanup() { rm -rf "$profile"; }
trap cleanup EXIT

rm -f "$out_abs"
# --no-sandbox: needed when running as root (containers, CI); the page is our own local file.
if ! "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --no-default-browser-check \
    --hide-scrollbars --user-data-dir="$profile" \
    --screenshot="$out_abs" --window-size="$size" "file://$report_abs" >"$profile/chromium.log" 2>&1; then
    echo "$0: chromium failed; its log:" >&2
    tail -n 20 "$profile/chromium.log" >&2
    exit 1
fi
if [ ! -s "$out_abs" ]; then
    echo "$0: chromium wrote no screenshot; its log:" >&2
    tail -n 20 "$profile/chromium.log" >&2
    exit 1
fi
echo "$out_abs"
