#!/usr/bin/env bash
# End-to-end test: the real Go backend (the Wails dev build of anechat, which
# serves the built frontend plus the Wails IPC on a local port, exactly what
# `wails dev` runs) under Xvfb, driven by Playwright in Debian's Chromium.
#
# We build and start the dev binary ourselves instead of running `wails dev`:
# `wails dev` also starts file watchers and a Vite dev server and rebuilds on
# change, which is for people; the binary it would start is this one.
#
# frontend/e2e/screens.spec.ts also leaves screenshots of every page, light
# and dark, in build/bin/screens/<page>-<light|dark>.png.
#
# usage: build/scripts/e2e.sh BINARY [SPEC...]   (built with -tags dev[,webkit2_41];
# SPECs, e.g. e2e/catalog.spec.ts, run only those)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:?usage: e2e.sh DEV_BINARY [SPEC...]}
shift
port=${ANECHAT_E2E_PORT:-34115}
url="http://127.0.0.1:$port"

work=$(mktemp -d)
log="build/bin/e2e-backend.log"
pid=""
hubpid=""
cleanup() {
	if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [[ -n "$hubpid" ]] && kill -0 "$hubpid" 2>/dev/null; then
		kill "$hubpid" 2>/dev/null || true
		wait "$hubpid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

if curl -fsS -o /dev/null "$url/" 2>/dev/null; then
	echo "e2e: something already listens on $url; stop it or set ANECHAT_E2E_PORT" >&2
	exit 1
fi

# A fresh data dir: the test sees an empty database.
export ANECHAT_HOME="$work/data"
# The tiny test model the chat tests register and run (never copied into the repo).
model="$(cd .. && pwd)/shared/models/stories260K.gguf"
if [[ ! -f "$model" ]]; then
	echo "e2e: test model $model missing (../shared beside the repo)" >&2
	exit 1
fi
export ANECHAT_E2E_MODEL="$model"
# The stored replies e2e/hostile.spec.ts reads (hostile Markdown with drafted
# spans, which the test model cannot write), put into the fresh data dir
# through the storage package before the backend opens it.
go run ./internal/e2eseed -corpus frontend/testdata/hostile-markdown.json
# A fake Hugging Face Hub on 127.0.0.1 (internal/hub/hubtest's fixtures; the
# catalog's SmolLM2 entry is served as the test model's bytes, the bundle
# repository anechat-test/tiny-coreml trickles): the Models page's catalog,
# search and downloads talk to it through ANECHAT_HUB, never to the network.
go build -o "$work/e2ehub" ./internal/e2ehub
"$work/e2ehub" -url "$work/hub-url" -blob "stories260K.gguf=$model" >"build/bin/e2e-hub.log" 2>&1 &
hubpid=$!
for _ in $(seq 1 40); do
	[[ -s "$work/hub-url" ]] && break
	sleep 0.25
done
[[ -s "$work/hub-url" ]] || { echo "e2e: the fake Hub did not start; its log:" >&2; cat build/bin/e2e-hub.log >&2; exit 1; }
export ANECHAT_HUB="$(cat "$work/hub-url")"
run=("$bin")
if [[ "$(uname -s)" == Linux && -z "${ANECHAT_E2E_DISPLAY:-}" ]]; then
	run=(xvfb-run -a -s "-screen 0 1280x800x24" "$bin")
fi
# On Linux setsid makes the backend a process group leader, so that the
# cleanup ends xvfb-run, Xvfb and the app together (macOS has no setsid).
group=()
command -v setsid >/dev/null && group=(setsid)
devserver="127.0.0.1:$port" assetdir="frontend/dist" loglevel=info \
	${group[@]+"${group[@]}"} "${run[@]}" >"$log" 2>&1 &
pid=$!

for _ in $(seq 1 120); do
	if curl -fsS -o /dev/null "$url/" 2>/dev/null; then break; fi
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "e2e: the backend exited early; its log ($log):" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.5
done
curl -fsS -o /dev/null "$url/" || { echo "e2e: backend not serving on $url after 60s; log:" >&2; cat "$log" >&2; exit 1; }

status=0
(cd frontend && ANECHAT_E2E_URL="$url" npx playwright test "$@") || status=$?
if [[ $status -ne 0 ]]; then
	echo "e2e: failed; backend log ($log):" >&2
	tail -50 "$log" >&2
fi
if [[ ${#group[@]} -gt 0 ]]; then
	kill -- -"$pid" 2>/dev/null || true
fi
exit $status
