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

// Commit is the git commit the binary was built from, set by the Makefile
// with -ldflags "-X anechat/cli.Commit=...". Go's own VCS stamp is not
// enough: GOFLAGS=-buildvcs=false (common on build machines) and builds
// outside the checkout leave it out.
var Commit = ""

// buildCommit is Commit, else Go's VCS stamp (with "-dirty" for a modified
// tree), else "unknown".
func buildCommit() string {
	if Commit != "" {
		return Commit
	}
	rev, dirty := "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	switch {
	case rev == "":
		return "unknown: built without make (make build stamps it)"
	case dirty:
		return rev + "-dirty"
	}
	return rev
}

func runVersion(_ context.Context, env *Env, args []string) error {
	fs := newFlags(env, "version", "")
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "anechat %s (commit %s, %s, %s/%s)\n", Version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
