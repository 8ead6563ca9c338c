package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
)

// bundleCase is one `anechat bundle WHAT`.
type bundleCase struct {
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

// bundleCases lists what `anechat bundle` does with a Core ML bundle. Each
// lives in a file cli/bundle_WHAT.go; add yours as one line here.
func bundleCases() map[string]bundleCase {
	return map[string]bundleCase{
		"audit": {"check a bundle's saved packages against the rules known to push work off the Neural Engine (any platform)", runBundleAudit},
	}
}

// runBundle is `anechat bundle WHAT [flags]`.
func runBundle(ctx context.Context, env *Env, args []string) error {
	cases := bundleCases()
	if len(args) == 0 {
		printBundleHelp(env.Stderr, cases)
		return errUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		printBundleHelp(env.Stdout, cases) // asked for: not an error
		return nil
	}
	c, ok := cases[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "anechat bundle: unknown command %q\n\n", args[0])
		printBundleHelp(env.Stderr, cases)
		return errUsage
	}
	return c.run(ctx, env, args[1:])
}

func printBundleHelp(w io.Writer, cases map[string]bundleCase) {
	fmt.Fprintln(w, "usage: anechat bundle WHAT [flags]\n\ncommands:")
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cases[n].summary)
	}
	fmt.Fprintln(w, "\nRun `anechat bundle WHAT --help` for its flags.")
}
