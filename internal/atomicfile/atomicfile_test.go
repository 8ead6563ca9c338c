package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"anechat/internal/testres"
)

// names lists dir's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFileReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "chat.md")
	os.WriteFile(path, []byte(strings.Repeat("old ", 1000)), 0o600)
	for _, perm := range []fs.FileMode{0o644, 0o600} {
		if err := WriteFile(path, []byte("new "+perm.String()), perm); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != "new "+perm.String() {
			t.Fatalf("read %q, %v", b, err)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != perm {
			t.Errorf("mode %v, want %v", st.Mode().Perm(), perm)
		}
		if got := names(t, dir); !slices.Equal(got, []string{"chat.md"}) {
			t.Errorf("directory holds %v, want only chat.md", got)
		}
	}
	// A missing folder: an error naming the destination, nothing made.
	missing := filepath.Join(dir, "missing", "x.md")
	if err := WriteFile(missing, nil, 0o644); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("writing into a missing folder: %v, want an error naming %s", err, missing)
	}
}

func TestAbortLeavesTheDestination(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "meta.json")
	os.WriteFile(path, []byte("old"), 0o600)
	f, err := Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if pid, ok := TempWriter(filepath.Base(f.Name())); !ok || pid != os.Getpid() || filepath.Dir(f.Name()) != dir {
		t.Errorf("temporary file %s: not in %s, or not naming this process", f.Name(), dir)
	}
	f.Write([]byte("half of the new"))
	f.Abort()
	f.Abort() // twice is harmless
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("after Abort the destination holds %q", b)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"meta.json"}) {
		t.Errorf("after Abort the directory holds %v", got)
	}
	if err := f.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	// Abort after Commit keeps the committed file.
	f, _ = Create(path, 0o600)
	f.Write([]byte("new"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort()
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("after Commit and Abort the destination holds %q", b)
	}
}

func TestCommitNewKeepsTheFirst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api-token")
	for i, want := range []string{"first", "first"} {
		err := WriteNewFile(path, []byte([]string{"first", "second"}[i]), 0o600)
		if i == 1 && !errors.Is(err, fs.ErrExist) {
			t.Errorf("a second CommitNew: %v, want an error matching fs.ErrExist", err)
		}
		if i == 0 && err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != want {
			t.Errorf("the destination holds %q, want %q", b, want)
		}
		if got := names(t, dir); !slices.Equal(got, []string{"api-token"}) {
			t.Errorf("the directory holds %v", got)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
}

// TestLongNames: a destination name near the 255-byte limit, in
// multi-byte characters, still gets a temporary name that fits and is
// UTF-8.
func TestLongNames(t *testing.T) {
	dir := t.TempDir()
	name := strings.Repeat("é", 120) + ".md" // 243 bytes
	path := filepath.Join(dir, name)
	f, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Base(f.Name())
	if len(tmp) > 255 || !utf8.ValidString(tmp) {
		t.Errorf("temporary name %q: %d bytes, valid UTF-8 %v", tmp, len(tmp), utf8.ValidString(tmp))
	}
	f.Write([]byte("x"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{name}) {
		t.Errorf("the directory holds %v", got)
	}
}

func TestTempWriter(t *testing.T) {
	for name, want := range map[string]int{".tmp-42-123.kv": 42, ".tmp-7-x": 7, ".tmp-123.kv": 0, ".tmp--1-x.kv": 0,
		".tmp-0-x.kv": 0, ".tmp-042-x.kv": 0, ".tmp-99999999999999999999-x": 0, "x.kv": 0, ".tmp-a-b": 0} {
		if pid, ok := TempWriter(name); pid != want || ok != (want != 0) {
			t.Errorf("TempWriter(%q) = %d, %v; want %d", name, pid, ok, want)
		}
	}
}

func TestDirInstallsOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "entry")
	install := func(body string) error {
		d, err := CreateDir(path)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Abort()
		os.MkdirAll(filepath.Join(d.Name(), "model.mlmodelc", "weights"), 0o755)
		os.WriteFile(filepath.Join(d.Name(), "model.mlmodelc", "weights", "w.bin"), []byte(body), 0o644)
		return d.Commit()
	}
	if err := install("first"); err != nil {
		t.Fatal(err)
	}
	// Another writer's tree is there: the rename fails, the tree stays,
	// the temporary one is gone.
	if err := install("second"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second install: %v, want an error matching fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(filepath.Join(path, "model.mlmodelc", "weights", "w.bin")); string(b) != "first" {
		t.Errorf("the installed tree holds %q", b)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"entry"}) {
		t.Errorf("the directory holds %v", got)
	}
	// A named pipe in the tree is refused (opening it to sync would
	// block), and nothing is installed.
	other := filepath.Join(dir, "other")
	d, err := CreateDir(other)
	if err != nil {
		t.Fatal(err)
	}
	testres.Mkfifo(t, filepath.Join(d.Name(), "pipe"))
	err = testres.Promptly(t, "Commit of a tree holding a named pipe", d.Commit)
	if err == nil || !strings.Contains(err.Error(), "pipe") {
		t.Errorf("Commit of a tree holding a named pipe: %v", err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"entry"}) {
		t.Errorf("after a refused install the directory holds %v", got)
	}
}

func TestRename(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "staged"), filepath.Join(dir, "models", "m.gguf")
	os.Mkdir(filepath.Dir(to), 0o755)
	os.WriteFile(from, []byte("model"), 0o644)
	if err := Rename(from, to); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(to); string(b) != "model" {
		t.Errorf("moved file holds %q", b)
	}
	if err := Rename(from, to); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("moving a missing file: %v", err)
	}
	var se *SyncDirError
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("syncing a missing directory: %v", err)
	}
}
