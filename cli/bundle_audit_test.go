package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/coreml"
	"anechat/internal/testres"
)

// coremlTestData returns build/testdeps/coreml/NAME (gen.py's packages),
// failing under CI when it is missing.
func coremlTestData(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(testres.RepoRoot(tb), "build", "testdeps", "coreml", name)
	return testres.Require(tb, p, "Core ML test bundles ("+name+")", "run build/scripts/deps-coreml.sh, then build/scripts/deps-coremlhost.sh (make test runs both)")
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, nil, &out, &errb)
	return code, out.String(), errb.String()
}

// TestBundleAudit: a converter bundle passes with its op counts and weight
// sizes printed; the violating package exits 1 naming each op with its
// rule and source, in text and JSON, with the flags before or after DIR;
// --max-ops moves the op limit.
func TestBundleAudit(t *testing.T) {
	stories := coremlTestData(t, "stories.bundle")
	code, out, errs := runCLI("bundle", "audit", stories)
	if code != 0 || errs != "" {
		t.Fatalf("stories: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"anechat converter bundle, 1 package(s)", "chunk_0.mlpackage", "generate_8", " 248 ", "prefill_16", " 249 ", "sample_8", " 246 ", "509.9 KiB", "no violations"} {
		if !strings.Contains(out, want) {
			t.Errorf("stories output lacks %q:\n%s", want, out)
		}
	}

	bad := coremlTestData(t, "audit-violations.mlpackage")
	code, out, errs = runCLI("bundle", "audit", bad)
	if code != 1 || !strings.Contains(errs, "5 violation(s)") {
		t.Fatalf("violations: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{`tanh "tanh_20000" [last-axis]`, `reduce_argmax "argmax_20000" [reduction]`, `add "int_add" [integer]`,
		"flexible [dynamic-shape]", "many_ops [op-count] 1801 ops", "in: x=fp16[1,20000]  out: tanh_20000: fp16[1,20000]",
		`"ANE tensors dimension size is limited to 16384"`, "thread/724930", "ANE_PROFILER.md", "THREE_CHUNK_MAC_BENCH.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("violations output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "head_20000") {
		t.Errorf("the 20000-wide linear is flagged:\n%s", out)
	}

	for _, args := range [][]string{{"bundle", "audit", "--json", bad}, {"bundle", "audit", bad, "--json", "--max-ops", "2000"}} {
		code, out, _ = runCLI(args...)
		var r coreml.AuditReport
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 {
			t.Fatalf("%v: exit %d, %v: %s", args, code, err, out)
		}
		want := 5
		if len(args) > 4 {
			want = 4 // the op limit moved past many_ops' 1801
		}
		if r.Violations != want || r.Layout != coreml.LayoutPackage || len(r.Packages[0].Functions) != 4 || len(r.Rules) != 6 {
			t.Errorf("%v: %d violations (want %d), layout %s, %d functions", args, r.Violations, want, r.Layout, len(r.Packages[0].Functions))
		}
	}
}

// TestBundleAuditErrors: a missing or unreadable bundle is an error (exit
// 1), never "no violations"; a missing or second DIR and bad limits are
// usage errors (exit 2).
func TestBundleAuditErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.bundle")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bundle", "audit", missing}, 1, "nope.bundle"},
		{[]string{"bundle", "audit", t.TempDir()}, 1, "is not a bundle"},
		{[]string{"bundle", "audit"}, 2, "missing DIR"},
		{[]string{"bundle", "audit", "a", "b"}, 2, `unexpected argument "b" (it takes one DIR)`},
		{[]string{"bundle", "audit", "a", "--max-ops", "0"}, 2, "--max-ops 0"},
		{[]string{"bundle", "nope"}, 2, `unknown command "nope"`},
		{[]string{"bundle"}, 2, "usage: anechat bundle WHAT"},
	} {
		code, out, errs := runCLI(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) || strings.Contains(out, "no violations") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d mentioning %q", c.args, code, out, errs, c.code, c.want)
		}
	}
}
