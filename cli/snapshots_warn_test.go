package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"anechat/internal/testres"
	"anechat/storage"
)

// TestGenerateSaysWhySnapshotsAreDropped: the CLI shows warnings only, and
// each snapshot it drops (damaged, truncated, not a snapshot) is one warning
// on stderr naming the file and why; the cache stays on, so the run after
// resumes again.
func TestGenerateSaysWhySnapshotsAreDropped(t *testing.T) {
	model := testres.Stories(t)
	home := t.TempDir()
	gen := func() (generateJSON, []string) {
		t.Helper()
		var out, errb bytes.Buffer
		args := []string{"generate", "--model", model, "--prompt-ids", longPromptIDs(), "--max-tokens", "20", "--data-dir", home, "--json"}
		if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var g generateJSON
		if err := json.Unmarshal(out.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
		return g, lines
	}
	if _, warns := gen(); len(warns) != 0 {
		t.Fatalf("first run warned: %q", warns)
	}
	files, _ := os.ReadDir(storage.KVPath(home))
	if len(files) != 1 {
		t.Fatalf("%d files in kv/", len(files))
	}
	snap := filepath.Join(storage.KVPath(home), files[0].Name())
	b, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(storage.KVPath(home), "notes.txt")
	old := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name   string
		damage func()
		warn   []string // what the one warning says
	}{
		{"damaged", func() {
			d := append([]byte(nil), b...)
			d[len(d)-10] ^= 1
			os.WriteFile(snap, d, 0o644)
		}, []string{"level=WARN", "snapshot dropped", snap, "checksum"}},
		{"truncated", func() { os.WriteFile(snap, b[:len(b)/2], 0o644) }, []string{"level=WARN", "dropped from the index", snap, "incomplete"}},
		{"not a snapshot", func() {
			os.WriteFile(notes, []byte("x"), 0o644)
			os.Chtimes(notes, old, old)
		}, []string{"level=WARN", "deleted", notes, "no index row"}},
	} {
		tc.damage()
		g, warns := gen()
		if len(warns) != 1 {
			t.Errorf("%s: warnings %q, want one", tc.name, warns)
			continue
		}
		for _, w := range tc.warn {
			if !strings.Contains(warns[0], w) {
				t.Errorf("%s: warning %q does not say %q", tc.name, warns[0], w)
			}
		}
		if tc.name == "not a snapshot" && g.Stats.ResumedTokens != 149 {
			t.Errorf("%s: resumed %d tokens, want 149: the cache is off", tc.name, g.Stats.ResumedTokens)
		}
		if tc.name != "not a snapshot" && g.Stats.ResumedTokens != 0 {
			t.Errorf("%s: resumed %d tokens from a bad snapshot", tc.name, g.Stats.ResumedTokens)
		}
	}
	if g, warns := gen(); g.Stats.ResumedTokens != 149 || len(warns) != 0 {
		t.Errorf("last run: resumed %d, warnings %q", g.Stats.ResumedTokens, warns)
	}
}
