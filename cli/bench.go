package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
)

// benchCase is one `anechat bench WHAT`.
type benchCase struct {
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

// benchCases lists the benchmarks. Each lives in a file cli/bench_WHAT.go;
// add yours as one line here.
func benchCases() map[string]benchCase {
	return map[string]benchCase{
		"api":    {"time to first token of a replayed conversation through the HTTP API: resume, no resume, another server", runBenchAPI},
		"coreml": {"a Core ML bundle: load/compile time, speculation on/off identity, row independence, latency per call kind and width, tok/s", runBenchCoreML},
		"cpu":    {"the CPU backend's decode and verify-width call times, with its kernels and CPU", runBenchCPU},
		"resume": {"time to first token, fresh prefill vs resume from a KV snapshot", runBenchResume},
		"spec":   {"speculative decoding: every prompt of a workload at widths 1..8, checked identical to width 1", runBenchSpec},
	}
}

// runBench is `anechat bench WHAT [flags]`.
func runBench(ctx context.Context, env *Env, args []string) error {
	cases := benchCases()
	if len(args) == 0 {
		printBenchHelp(env.Stderr, cases)
		return errUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		printBenchHelp(env.Stdout, cases) // asked for: not an error
		return nil
	}
	c, ok := cases[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "anechat bench: unknown benchmark %q\n\n", args[0])
		printBenchHelp(env.Stderr, cases)
		return errUsage
	}
	return c.run(ctx, env, args[1:])
}

func printBenchHelp(w io.Writer, cases map[string]benchCase) {
	fmt.Fprintln(w, "usage: anechat bench WHAT [flags]\n\nbenchmarks:")
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cases[n].summary)
	}
	fmt.Fprintln(w, "\nRun `anechat bench WHAT --help` for its flags.")
}
