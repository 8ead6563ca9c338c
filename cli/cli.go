// Package cli is anechat's command-line interface: one file per subcommand, all
// running on the same engine and storage code as the desktop app.
package cli

import (
	"bytes"
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
		{"bundle", "inspect a Core ML bundle (anechat bundle WHAT; audit)", runBundle},
		{"search", "search the model catalog and the Hugging Face Hub (GGUF and Core ML)", runSearch},
		{"pull", "download a catalog model or a Hugging Face repository, check and register it", runPull},
	}
}

// errUsage marks an error that is the user's invocation, not a failure; the
// message has already been printed with the usage.
var errUsage = errors.New("usage")

// Run runs the subcommand named by args[0] and returns the process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if len(args) > 1 && args[0] == "help" {
		// `anechat help chat` is `anechat chat --help`; `help bench spec`
		// is `bench spec --help`.
		args = append(append([]string{}, args[1:]...), "--help")
	}
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
	fmt.Fprintln(w, "\nRun `anechat help COMMAND` (or `anechat COMMAND --help`) for a command's flags.")
}

// newFlags returns a flag set that returns errors instead of exiting. Its
// usage goes to env.Stderr, except for --help, which asked for it: then it
// goes to env.Stdout (see parse).
func newFlags(env *Env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(&usageOut{env: env})
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: anechat %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// usageOut is a flag set's output: env.Stderr, or a buffer while parse runs,
// so that a --help can be sent to stdout instead.
type usageOut struct {
	env *Env
	buf *bytes.Buffer // non-nil while parsing
}

func (u *usageOut) Write(p []byte) (int, error) {
	if u.buf != nil {
		return u.buf.Write(p)
	}
	return u.env.Stderr.Write(p)
}

// parse parses args into fs. -h and --help print the usage to stdout and
// return flag.ErrHelp (exit 0); a bad flag or a stray positional argument
// prints what is wrong and the usage to stderr and returns errUsage (exit 2).
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return noArgs(fs, "every input is a flag")
}

// parseOperand parses args into fs for a command that takes one operand
// (what, e.g. "DIR"), before or after its flags, and returns it. A missing
// operand or a second one is a usage error (exit 2), like a bad flag.
func parseOperand(fs *flag.FlagSet, args []string, what string) (string, error) {
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(fs.Output(), "anechat %s: missing %s\n", fs.Name(), what)
		fs.Usage()
		return "", errUsage
	}
	operand := fs.Arg(0)
	if err := parseFlags(fs, fs.Args()[1:]); err != nil {
		return "", err
	}
	return operand, noArgs(fs, "it takes one "+what)
}

// parseFlags parses args into fs, sending a --help to stdout and anything
// else fs prints to stderr.
func parseFlags(fs *flag.FlagSet, args []string) error {
	u, _ := fs.Output().(*usageOut)
	if u != nil {
		u.buf = &bytes.Buffer{}
	}
	err := fs.Parse(args)
	if u != nil {
		out := u.env.Stderr
		if errors.Is(err, flag.ErrHelp) {
			out = u.env.Stdout
		}
		buf := u.buf
		u.buf = nil
		out.Write(buf.Bytes())
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return err
	case err != nil:
		return errUsage
	}
	return nil
}

// noArgs refuses positional arguments left after the flags, saying why.
func noArgs(fs *flag.FlagSet, why string) error {
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "anechat %s: unexpected argument %q (%s)\n", fs.Name(), fs.Arg(0), why)
		fs.Usage()
		return errUsage
	}
	return nil
}
