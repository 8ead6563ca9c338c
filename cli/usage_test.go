package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"anechat/storage"
)

// allCommandLines is every command line that has its own flags: the
// subcommands and each `bench WHAT` and `bundle WHAT`.
func allCommandLines() [][]string {
	var out [][]string
	for _, c := range commands() {
		switch c.name {
		case "bench":
			for n := range benchCases() {
				out = append(out, []string{"bench", n})
			}
		case "bundle":
			for n := range bundleCases() {
				out = append(out, []string{"bundle", n})
			}
		default:
			out = append(out, []string{c.name})
		}
	}
	return out
}

// TestUsageNamesEveryFlag: each command's usage line names every flag its
// --help lists, so the one line a user reads first is not missing any
// (generate's omitted --data-dir and --no-cache, chat's --stats).
func TestUsageNamesEveryFlag(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	for _, cl := range allCommandLines() {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), append(append([]string{}, cl...), "--help"), nil, &out, &errb); code != 0 {
			t.Errorf("%v --help: exit %d: %s", cl, code, errb.String())
			continue
		}
		usage, _, _ := strings.Cut(out.String(), "\n")
		if !strings.HasPrefix(usage, "usage: anechat "+strings.Join(cl, " ")) {
			t.Errorf("%v --help starts %q", cl, usage)
			continue
		}
		for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
			if !regexp.MustCompile(`--` + regexp.QuoteMeta(m[1]) + `\b`).MatchString(usage) {
				t.Errorf("anechat %s: usage line %q omits --%s", strings.Join(cl, " "), usage, m[1])
			}
		}
	}
}

// TestHelpCommand: `anechat help CMD` prints CMD's own help, as
// `anechat CMD --help` does, and an unknown CMD is a usage error.
func TestHelpCommand(t *testing.T) {
	for _, cl := range [][]string{{"chat"}, {"generate"}, {"bench", "spec"}, {"bench"}, {"bundle", "audit"}} {
		var want, got, errb bytes.Buffer
		if code := Run(context.Background(), append(append([]string{}, cl...), "--help"), nil, &want, &errb); code != 0 {
			t.Fatalf("%v --help: exit %d", cl, code)
		}
		if code := Run(context.Background(), append([]string{"help"}, cl...), nil, &got, &errb); code != 0 {
			t.Fatalf("help %v: exit %d: %s", cl, code, errb.String())
		}
		if got.String() != want.String() {
			t.Errorf("help %v printed\n%s\nwant\n%s", cl, got.String(), want.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"help", "nosuch"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), `"nosuch"`) {
		t.Errorf("help nosuch: exit %d, stderr %q", code, errb.String())
	}
}

// TestNoCacheMeansOneThing: --no-cache is described with the same words
// wherever it exists: nothing kept in the data directory between runs (KV
// snapshots and measured call costs) is read or written.
func TestNoCacheMeansOneThing(t *testing.T) {
	var first string
	for _, cl := range allCommandLines() {
		var out, errb bytes.Buffer
		Run(context.Background(), append(append([]string{}, cl...), "--help"), nil, &out, &errb)
		i := strings.Index(out.String(), "\n  -no-cache\n")
		if i < 0 {
			continue
		}
		desc, _, _ := strings.Cut(out.String()[i+len("\n  -no-cache\n"):], "\n  -")
		desc = strings.Join(strings.Fields(desc), " ")
		if first == "" {
			first = desc
			for _, want := range []string{"KV snapshots", "call costs"} {
				if !strings.Contains(desc, want) {
					t.Errorf("--no-cache %q does not name %s", desc, want)
				}
			}
		} else if desc != first {
			t.Errorf("anechat %s --no-cache says %q, elsewhere %q", strings.Join(cl, " "), desc, first)
		}
	}
	if first == "" {
		t.Fatal("no command has --no-cache")
	}
}

// TestBenchCoreMLDataDir: bench coreml takes --data-dir like every command
// that reads one: without --bundle it checks the data directory's default
// model when that is a Core ML bundle, and says what to pass when it is not.
func TestBenchCoreMLDataDir(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), append([]string{"bench", "coreml"}, args...), nil, &out, &errb)
		return code, out.String(), errb.String()
	}
	empty := t.TempDir()
	if code, _, errOut := run("--data-dir", empty); code != 1 || !strings.Contains(errOut, "no --bundle given") || !strings.Contains(errOut, "has no model") {
		t.Errorf("empty data dir: exit %d, stderr %q", code, errOut)
	}
	withGGUF := t.TempDir()
	if err := os.MkdirAll(filepath.Join(withGGUF, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(coremlData(t, "stories-ref.gguf"), filepath.Join(withGGUF, "models", "stories.gguf")); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run("--data-dir", withGGUF); code != 1 || !strings.Contains(errOut, "is not a Core ML bundle: pass --bundle DIR") {
		t.Errorf("gguf default: exit %d, stderr %q", code, errOut)
	}
	if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
		return
	}
	// The app's Models page marks a default: here, a Core ML bundle.
	withBundle := t.TempDir()
	db, err := storage.Open(context.Background(), storage.DBPath(withBundle))
	if err != nil {
		t.Fatal(err)
	}
	m, err := db.RegisterModel(context.Background(), storage.ModelInput{Path: coremlData(t, "gemma4-exact.bundle"), Kind: "coreml", Name: "gemma4-exact"})
	if err == nil {
		err = db.SetSetting(context.Background(), storage.SettingDefaultModelID, m.ID)
	}
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("--data-dir", withBundle); code != 0 || !strings.Contains(out, "the Neural Engine is not available") {
		t.Errorf("bundle default: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestVersionCommit: version prints the commit the Makefile stamps, and says
// how to get one when there is none (a test binary has no VCS stamp).
func TestVersionCommit(t *testing.T) {
	run := func() string {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), []string{"version"}, nil, &out, &errb); code != 0 {
			t.Fatalf("version: exit %d: %s", code, errb.String())
		}
		return out.String()
	}
	if out := run(); !strings.Contains(out, "commit unknown: built without make") {
		t.Errorf("unstamped: %q", out)
	}
	old := Commit
	Commit = "0123456789ab-dirty"
	defer func() { Commit = old }()
	if out := run(); !strings.Contains(out, "(commit 0123456789ab-dirty, ") {
		t.Errorf("stamped: %q", out)
	}
}
