package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"anechat/storage"
)

func TestPatterns(t *testing.T) {
	got := patterns(5)
	want := [][][2]int{nil, {{0, 1}, {2, 3}, {4, 5}}, {{1, 2}, {3, 4}}, {{0, 5}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("patterns(5) = %v, want %v", got, want)
	}
}

func TestSeedStoresEachDocumentWithEachPattern(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.json")
	// "😀" is two UTF-16 units: the spans count units, as the window does.
	if err := os.WriteFile(corpus, []byte(`{"docs": ["[x]: javascript:a\n[x]", "😀 <b>"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"-corpus", corpus, "-data-dir", dir}, &stderr); err != nil {
		t.Fatalf("run: %v (stderr %q)", err, stderr.String())
	}
	db, err := storage.Open(context.Background(), storage.DBPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cs, err := db.ListConversations(context.Background(), 0, 0)
	if err != nil || len(cs) != 1 || cs[0].Title != Title {
		t.Fatalf("conversations %v, %v: want one titled %q", cs, err, Title)
	}
	branch, err := db.ActiveBranch(context.Background(), cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(branch) != 2*2*4 {
		t.Fatalf("%d messages on the active branch, want 16", len(branch))
	}
	for i, m := range branch {
		if i%2 == 0 {
			if m.Role != storage.RoleUser {
				t.Fatalf("message %d is %s, want user", i, m.Role)
			}
			continue
		}
		doc, pat := i/8, (i/2)%4
		want := []string{"[x]: javascript:a\n[x]", "😀 <b>"}[doc]
		if m.Role != storage.RoleAssistant || m.Content != want {
			t.Fatalf("message %d: %s %q, want the assistant's %q", i, m.Role, m.Content, want)
		}
		var st struct {
			DraftedSpans [][2]int `json:"draftedSpans"`
		}
		if err := json.Unmarshal(m.Stats, &st); err != nil {
			t.Fatalf("message %d stats %s: %v", i, m.Stats, err)
		}
		units := []int{len("[x]: javascript:a\n[x]"), 2 + len(" <b>")}[doc]
		if wantSpans := patterns(units)[pat]; !reflect.DeepEqual(st.DraftedSpans, wantSpans) {
			t.Fatalf("message %d spans %v, want %v", i, st.DraftedSpans, wantSpans)
		}
	}
}

func TestBadCorpusSaysWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ body, want string }{
		{`{"docs": []}`, "no documents"},
		{`[1]`, "want {\"docs\""},
	} {
		p := filepath.Join(dir, "c.json")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		err := run(context.Background(), []string{"-corpus", p, "-data-dir", dir}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("corpus %s: error %v, want one naming the file and %q", c.body, err, c.want)
		}
	}
	if err := run(context.Background(), nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-corpus") {
		t.Errorf("no -corpus: error %v", err)
	}
}
