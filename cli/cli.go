// Package cli is anechat's command-line interface: one file per subcommand, all
// running on the same engine and storage code as the desktop app.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
)

// Env is what a subcommand reads and writes.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

// commands lists every subcommand. Each lives in a file named after it.
func commands() []command {
	return []command{
		{"version", "print the version and build information", runVersion},
		{"generate", "generate text from a prompt", runGenerate},
		{"chat", "chat with a model in the terminal", runChat},
		{"serve", "serve the OpenAI-compatible HTTP API on a model", runServe},
		{"bench", "run a benchmark (anechat bench WHAT; resume, ...)", runBench},
		{"doctor", "report platform, backends, data dir, database and models", runDoctor},
	}
}

// errUsage marks an error that is the user's invocation, not a failure; the
// message has already been printed with the usage.
var errUsage = errors.New("usage")

// Run runs the subcommand named by args[0] and returns the process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, env, args[1:])
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		case errors.Is(err, context.Canceled):
			fmt.Fprintln(stderr, "anechat: cancelled")
			return 130
		default:
			fmt.Fprintf(stderr, "anechat %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "anechat: unknown command %q\n\n", args[0])
	printHelp(stderr)
	return 2
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "anechat: on-device chat with lossless speculative decoding.")
	fmt.Fprintln(w, "\nWith no arguments it opens the desktop app. Commands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `anechat COMMAND --help` for a command's flags.")
}

// newFlags returns a flag set that prints its usage to env.Stderr and returns
// errors instead of exiting.
func newFlags(env *Env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: anechat %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args into fs, mapping a bad flag to errUsage (already printed)
// and -h to flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}
