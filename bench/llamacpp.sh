#!/usr/bin/env bash
# Speed of anechat's CPU backend against llama.cpp on the same GGUF files,
# same thread count, alternating in one run (the machine is shared: only
# ratios measured side by side mean anything).
#
# usage: bench/llamacpp.sh LLAMA_BIN_DIR ROUNDS THREADS MODEL.gguf...
#   LLAMA_BIN_DIR  a llama.cpp build's bin directory (llama-bench)
#   LLAMA_REPACK   llama-bench --repack (default 0: a -march=native build
#                  on a CPU that reports AMX faults in its repacked AMX
#                  kernels in a VM without the tile state)
#   LLAMA_ARGS     more llama-bench flags, e.g. "--poll 0" (its workers
#                  sleep instead of spinning between ops: on an
#                  oversubscribed machine spinning costs it most of its speed)
#
# Each round runs, for every model, llama-bench's pp512 and tg128 once
# (-r 1) and then anechat's BenchmarkLlamaCppPair (the same two tests, one
# iteration each), and prints one line per model and round:
#   model round llama_pp512 anechat_pp512 ratio llama_tg128 anechat_tg128 ratio
# (tok/s; ratio = anechat / llama.cpp), then the median ratio per model.
set -euo pipefail
bin=$1 rounds=$2 threads=$3
shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go test -c -o "$tmp/cpu.test" ./engine/cpu)
printf '%-40s %5s %12s %12s %6s %12s %12s %6s\n' model round llama_pp512 anechat_pp512 ratio llama_tg128 anechat_tg128 ratio
for r in $(seq 1 "$rounds"); do
	for m in "$@"; do
		m=$(realpath "$m")
		"$bin/llama-bench" -m "$m" -p 512 -n 128 -t "$threads" -r 1 --repack "${LLAMA_REPACK:-0}" ${LLAMA_ARGS:-} -o csv 2>/dev/null >"$tmp/l.csv"
		# llama-bench's CSV: a header naming the columns, one row per test.
		read -r lpp ltg < <(awk -F, 'NR==1{for(i=1;i<=NF;i++){gsub(/"/,"",$i);c[$i]=i};next}
			{gsub(/"/,"");if($c["n_prompt"]>0)pp=$c["avg_ts"];else tg=$c["avg_ts"]}END{print pp, tg}' "$tmp/l.csv")
		(cd "$root/engine/cpu" && ANECHAT_BENCH_GGUF=$m ANECHAT_BENCH_THREADS=$threads GOMAXPROCS=$threads \
			"$tmp/cpu.test" -test.run '^$' -test.bench 'LlamaCppPair' -test.benchtime 1x) >"$tmp/a.txt" || { cat "$tmp/a.txt"; exit 1; }
		apan=$(awk '/pp512/{for(i=1;i<=NF;i++)if($(i+1)=="tok/s")print $i}' "$tmp/a.txt")
		atg=$(awk '/tg128/{for(i=1;i<=NF;i++)if($(i+1)=="tok/s")print $i}' "$tmp/a.txt")
		printf '%-40s %5d %12.1f %12.1f %6.2f %12.1f %12.1f %6.2f\n' "$(basename "$m")" "$r" "$lpp" "$apan" \
			"$(awk -v a="$apan" -v b="$lpp" 'BEGIN{print a/b}')" "$ltg" "$atg" "$(awk -v a="$atg" -v b="$ltg" 'BEGIN{print a/b}')" | tee -a "$tmp/rows"
	done
done
echo
echo "median ratios (anechat / llama.cpp):"
for m in "$@"; do
	n=$(basename "$m")
	med() { sort -g | awk '{v[NR]=$1}END{print v[int((NR+1)/2)]}'; }
	pp=$(awk -v n="$n" '$1==n{print $5}' "$tmp/rows" | med)
	tg=$(awk -v n="$n" '$1==n{print $8}' "$tmp/rows" | med)
	printf '%-40s pp512 %s  tg128 %s  (%s rounds)\n' "$n" "$pp" "$tg" "$rounds"
done
