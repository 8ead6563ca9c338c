package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunVersionAndUnknown(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"version"}, nil, &out, &errb); code != 0 {
		t.Fatalf("version exit %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "anechat ") {
		t.Fatalf("version printed %q", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := Run(context.Background(), []string{"nope"}, nil, &out, &errb); code != 2 {
		t.Fatalf("unknown command exit %d, want 2", code)
	}
	if !strings.Contains(errb.String(), `unknown command "nope"`) {
		t.Fatalf("unknown command message %q", errb.String())
	}
}

// TestEveryCommandHasHelp: --help (and -h) prints the usage to stdout,
// nothing to stderr, and exits 0; so does `anechat help`.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range commands() {
		for _, flag := range []string{"--help", "-h"} {
			var out, errb bytes.Buffer
			if code := Run(context.Background(), []string{c.name, flag}, nil, &out, &errb); code != 0 {
				t.Errorf("%s %s exit %d: %s", c.name, flag, code, errb.String())
			}
			if !strings.Contains(out.String(), "usage: anechat "+c.name) || errb.Len() != 0 {
				t.Errorf("%s %s printed %q to stdout and %q to stderr; want the usage on stdout only", c.name, flag, out.String(), errb.String())
			}
		}
	}
	for _, args := range [][]string{{"bench", "spec", "--help"}, {"bench", "resume", "--help"}, {"bundle", "audit", "--help"}, {"help"}, {"--help"}} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, nil, &out, &errb); code != 0 || out.Len() == 0 || errb.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
}

// TestStrayArgumentIsAnError: a positional argument no command takes is
// an error naming it, with the usage, exit 2, for every command.
func TestStrayArgumentIsAnError(t *testing.T) {
	cases := [][]string{{"bench", "spec", "stray"}, {"bench", "resume", "stray"}, {"bundle", "audit", "DIR", "stray"}}
	for _, c := range commands() {
		switch c.name {
		case "bench", "bundle": // command groups: their first argument names the command
		case "search": // one operand, TEXT
			cases = append(cases, []string{c.name, "TEXT", "stray"})
		case "pull": // ENTRY|OWNER/REPO then any number of FILE names: no argument is stray
		default:
			cases = append(cases, []string{c.name, "stray"})
		}
	}
	cases = append(cases, []string{"generate", "--prompt", "x", "stray"}, []string{"doctor", "--data-dir", t.TempDir(), "stray"})
	for _, args := range cases {
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), `unexpected argument "stray"`) || !strings.Contains(errb.String(), "usage: anechat ") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and the argument named with the usage", args, code, errb.String())
		}
	}
}
