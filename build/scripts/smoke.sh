#!/usr/bin/env bash
# Smoke test of the built desktop app: open the real window (under Xvfb on
# Linux), wait until the page has loaded, take a screenshot, and let the app
# quit by itself (ANECHAT_QUIT_AFTER). Fails if the app does not start, does not
# show a page, does not exit cleanly, or the screenshot is blank.
#
# usage: build/scripts/smoke.sh APP_BINARY
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:?usage: smoke.sh APP_BINARY}
shot=build/bin/smoke.png
log=build/bin/smoke.log
work=$(mktemp -d)
xpid=""
apid=""
cleanup() {
	[[ -n "$apid" ]] && kill "$apid" 2>/dev/null || true
	[[ -n "$xpid" ]] && kill "$xpid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
rm -f "$shot"

# A build from a git checkout names its commit (the Makefile's LDFLAGS).
if git rev-parse -q --verify HEAD >/dev/null 2>&1; then
	version=$("$bin" version)
	[[ "$version" != *"commit unknown"* ]] || { echo "smoke: $version: the build did not stamp its commit" >&2; exit 1; }
	echo "smoke: $version"
fi

if [[ "$(uname -s)" != Linux ]]; then
	# macOS: no Xvfb; open the window on the real screen and let it quit.
	ANECHAT_HOME="$work/data" ANECHAT_QUIT_AFTER=3s "$bin" >"$log" 2>&1
	grep -q "window ready" "$log" || { echo "smoke: the window never loaded; log:" >&2; cat "$log" >&2; exit 1; }
	echo "smoke: window opened and quit (no screenshot off Linux)"
	exit 0
fi

# Our own Xvfb (not xvfb-run) so that the screenshot can use the same display.
disp=""
for n in $(seq 90 120); do
	if [[ ! -e /tmp/.X11-unix/X$n && ! -e /tmp/.X$n-lock ]]; then disp=":$n"; break; fi
done
[[ -n "$disp" ]] || { echo "smoke: no free X display number" >&2; exit 1; }
Xvfb "$disp" -screen 0 1280x800x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xpid=$!
for _ in $(seq 1 50); do [[ -e /tmp/.X11-unix/X${disp#:} ]] && break; sleep 0.1; done
[[ -e /tmp/.X11-unix/X${disp#:} ]] || { echo "smoke: Xvfb did not start:" >&2; cat "$work/xvfb.log" >&2; exit 1; }

DISPLAY=$disp ANECHAT_HOME="$work/data" ANECHAT_QUIT_AFTER=6s "$bin" >"$log" 2>&1 &
apid=$!
for _ in $(seq 1 120); do
	grep -q "window ready" "$log" && break
	kill -0 "$apid" 2>/dev/null || { echo "smoke: the app exited before its window loaded; log:" >&2; cat "$log" >&2; exit 1; }
	sleep 0.25
done
grep -q "window ready" "$log" || { echo "smoke: no 'window ready' after 30s; log:" >&2; cat "$log" >&2; exit 1; }
sleep 2 # let the page render its first data
DISPLAY=$disp import -window root "$shot"

status=0
for _ in $(seq 1 80); do kill -0 "$apid" 2>/dev/null || break; sleep 0.25; done
if kill -0 "$apid" 2>/dev/null; then
	echo "smoke: the app did not quit by itself after ANECHAT_QUIT_AFTER; log:" >&2; cat "$log" >&2; exit 1
fi
wait "$apid" || status=$?
apid=""
[[ $status -eq 0 ]] || { echo "smoke: the app exited with $status; log:" >&2; cat "$log" >&2; exit 1; }

# A blank screen (no window, or a window that painted nothing) has one colour.
colours=$(convert "$shot" -format '%k' info:)
if [[ "$colours" -lt 16 ]]; then
	echo "smoke: screenshot $shot has only $colours colours: the window shows nothing" >&2
	exit 1
fi
# The same binary runs the CLI: doctor on the data dir the window just used.
if ! "$bin" doctor --data-dir "$work/data" >"$work/doctor.txt" 2>&1; then
	echo "smoke: \`anechat doctor\` failed on the app's own data dir:" >&2; cat "$work/doctor.txt" >&2; exit 1
fi
grep -q "integrity ok" "$work/doctor.txt" || { echo "smoke: doctor did not find the app's database:" >&2; cat "$work/doctor.txt" >&2; exit 1; }
echo "smoke: window opened, screenshot $shot ($colours colours), quit cleanly; doctor reports its database"
