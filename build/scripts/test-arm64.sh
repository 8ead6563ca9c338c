#!/usr/bin/env bash
# The arm64 step of `make test` (issue 17): every Mac anechat targets is
# arm64, where the CPU backend runs its NEON kernels. On an x86-64 Linux
# host this cross-compiles the engine's test binaries for linux/arm64 and
# runs them under qemu-user (qemu-aarch64-static, which
# build/scripts/sysdeps.sh installs; it emulates a CPU with the dot-product
# extension, so the SDOT kernels run too), from each package's directory as
# `go test` would. Among them: the kernels' bit-for-bit tests against the
# canonical references, the golden outputs checked against the amd64
# records, and the kernel vectors of engine/cpu/testdata/canon.json. On an
# arm64 host the binaries run natively. It also cross-compiles the app for
# darwin/arm64 without cgo (the CLI build; the Wails window needs cgo).
#
# qemu says nothing about speed: benchmarks are not run here (see
# `anechat bench cpu`), and the tests run with -test.short (TestGolden then
# skips the large models, SmolLM2 and the 150M-weight random Gemma 4,
# whose formats and layer plan run in small random models;
# the real Gemma 3 file's Q4_K, Q5_0, Q6_K and Q8_0 matrices still run, in
# TestGemma3MatMul; engine/spec's sampling identity and refrun's
# speculation identity run fewer prompts and widths). The binaries run two
# at a time, the longest first: the step takes about 4 minutes on 2 cores. The engine package itself (Session, the verify loop:
# whole generations, several minutes under qemu) is left to the native
# go test; its arithmetic is engine/cpu's, engine/sample's and
# engine/spec's, which run here. Tests skipped under qemu, and why:
#   TestPoolCarriesWorkerFaults, Test*TruncatedUnderForward,
#   TestGuardTruncated, TestParseTruncatedMapping (gguf, safetensors): a
#     read of a truncated file mapping faults with
#     SIGBUS; qemu-user delivers it without the fault address, so the
#     recovery these tests check cannot work under qemu;
#   TestKilledWriter: it re-executes its own test binary, which the host
#     cannot exec without binfmt_misc;
#   engine/spec's TestGemma4GreedyLossless, TestLookaheadLossless,
#     TestStoriesGreedyLossless, TestGemma4SamplingDistribution,
#     TestConstrainedWidthsEqualPlainLoop (390 constrained generations,
#     about 5 minutes alone under qemu): whole generations at every width (more than 10 minutes under qemu on 2
#     shared cores); what they rest on on arm64, row independence of the
#     kernels and the models' outputs, engine/cpu checks here;
#   engine/cpu's TestGemma3MatchesLlamaCpp, TestSmolLM2MatchesLlamaCpp:
#     whole real models against llama.cpp's figures (Gemma 3 270M alone ran
#     past the 15-minute timeout under qemu); the native run checks them.
set -euo pipefail
cd "$(dirname "$0")/../.."

run=()
case "$(uname -m)" in
aarch64 | arm64) ;;
x86_64)
	command -v qemu-aarch64-static >/dev/null || { echo "test-arm64: qemu-aarch64-static is missing: run build/scripts/sysdeps.sh (Debian: apt-get install qemu-user-static)" >&2; exit 1; }
	run=(qemu-aarch64-static)
	;;
*) echo "test-arm64: no way to run arm64 binaries on $(uname -m); skipped"; exit 0 ;;
esac
if [[ "$(uname -s)" != Linux ]]; then
	echo "test-arm64: on $(uname -s) the native go test covers arm64; skipped"
	exit 0
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== darwin/arm64 build, CGO_ENABLED=0"
GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build -o "$out/anechat-darwin-arm64" .

skip='^(TestPoolCarriesWorkerFaults|TestLlamaTruncatedUnderForward|TestGemma4TruncatedUnderForward|TestGuardTruncated|TestParseTruncatedMapping|TestKilledWriter|TestGemma4GreedyLossless|TestLookaheadLossless|TestStoriesGreedyLossless|TestGemma4SamplingDistribution|TestConstrainedWidthsEqualPlainLoop|TestGemma3MatchesLlamaCpp|TestSmolLM2MatchesLlamaCpp)$'
mapfile -t pkgs < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./engine/... | grep -v '^anechat/engine ')
# The longest first (their share of the CPU time under qemu, measured), so
# that the two at a time finish together; the rest in go list's order.
heavy=(anechat/engine/cpu anechat/engine/coreml/refrun anechat/engine/spec anechat/engine/tokenizer anechat/engine/chat)
ordered=()
for h in "${heavy[@]}"; do
	for line in "${pkgs[@]}"; do [[ ${line% *} == "$h" ]] && ordered+=("$line"); done
done
for line in "${pkgs[@]}"; do
	[[ " ${heavy[*]} " == *" ${line% *} "* ]] || ordered+=("$line")
done

# Build every test binary first (go uses both cores), then run them two at
# a time: one qemu process keeps about 1.3 cores busy.
for i in "${!ordered[@]}"; do
	GOARCH=arm64 go test -c -o "$out/$i.test" "${ordered[$i]% *}"
done
# runpkg runs binary i from its package's directory, as go test would,
# leaving its output in $out/i.log, its exit code in $out/i.rc and its wall
# and CPU seconds in $out/i.time.
runpkg() {
	local i=$1 dir=${ordered[$1]#* }
	local TIMEFORMAT='%R %U %S'
	local rc=0
	# (|| rc=: under set -e a failure would end this before its code is
	# written; the code is written last, once the time report is closed,
	# and renamed into place: the loop below reads i.rc as soon as it
	# exists, and may look while this job writes it, woken by the other
	# job's end; an empty i.rc would read as a failure.)
	# timeout: -test.timeout bounds the Go test, this bounds qemu itself.
	{ time (cd "$dir" && timeout 20m "${run[@]}" "$out/$i.test" -test.short -test.timeout 15m -test.skip "$skip" >"$out/$i.log" 2>&1); } 2>"$out/$i.time" || rc=$?
	echo "$rc" >"$out/$i.rc.tmp"
	mv "$out/$i.rc.tmp" "$out/$i.rc"
}
start=$SECONDS
jobs=2
failed=0
report() {
	local i=$1 pkg=${ordered[$1]% *}
	if [[ "$(cat "$out/$i.rc")" != 0 ]]; then
		cat "$out/$i.log"
		echo "test-arm64: $pkg failed under arm64" >&2
		failed=1
		return
	fi
	local wall=0 user=0 sys=0
	read -r wall user sys <"$out/$i.time" || true
	echo "ok   $pkg (arm64: ${wall%.*} s, $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }') s CPU)"
}
running=()
for i in "${!ordered[@]}"; do
	while ((${#running[@]} >= jobs)); do
		wait -n || true
		still=()
		for r in "${running[@]}"; do
			if [[ -e "$out/$r.rc" ]]; then report "$r"; else still+=("$r"); fi
		done
		running=("${still[@]}")
	done
	((failed == 0)) || break
	runpkg "$i" &
	running+=("$i")
done
wait
for r in "${running[@]}"; do report "$r"; done
if ((failed)); then
	exit 1
fi
echo "test-arm64: all passed in $((SECONDS - start)) s"
