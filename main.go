// Command anechat is the desktop chat app. With no arguments it opens the
// window; with a subcommand (generate, chat, bench, doctor, version, ...) it runs
// the command-line interface on the same engine and storage code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"anechat/cli"
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(runDesktop())
	}
	// Ctrl-C cancels the running command through its context.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
