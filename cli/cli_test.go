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

func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range commands() {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), []string{c.name, "--help"}, nil, &out, &errb); code != 0 {
			t.Errorf("%s --help exit %d: %s", c.name, code, errb.String())
		}
		if !strings.Contains(errb.String(), "usage: anechat "+c.name) {
			t.Errorf("%s --help printed %q", c.name, errb.String())
		}
	}
}
