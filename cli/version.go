package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version; builds may override it with
// -ldflags "-X anechat/cli.Version=...".
var Version = "0.1.0-dev"

func runVersion(_ context.Context, env *Env, args []string) error {
	fs := newFlags(env, "version", "")
	if err := parse(fs, args); err != nil {
		return err
	}
	rev := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	fmt.Fprintf(env.Stdout, "anechat %s (commit %s, %s, %s/%s)\n", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
