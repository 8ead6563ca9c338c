package mlcore

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"anechat/engine/model/mmap"
	"anechat/internal/atomicfile"
	"anechat/internal/testres"
)

// writeTree writes files (slash paths relative to root) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	if err := writeFiles(root, files); err != nil {
		t.Fatal(err)
	}
}

func writeFiles(root string, files map[string]string) error {
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func testPackage(t *testing.T) string {
	pkg := filepath.Join(t.TempDir(), "m.mlpackage")
	writeTree(t, pkg, map[string]string{
		"Manifest.json":                                 `{"fileFormatVersion":"1.0.0"}`,
		"Data/com.apple.CoreML/model.mlmodel":           "program",
		"Data/com.apple.CoreML/weights/weight.bin":      strings.Repeat("w", 5000),
		"Data/com.apple.CoreML/weights/more/extra.bin":  "x",
		"Data/com.apple.CoreML/weights/more/extra2.bin": "",
	})
	return pkg
}

// fakeCompiler stands in for +[MLModel compileModelAtURL:error:]: it
// writes a "compiled" directory somewhere else (as Core ML does, in a
// temporary folder) whose content is derived from the package.
type fakeCompiler struct {
	mu    sync.Mutex
	calls int
	tmp   string
	fail  error
	hook  func() // run before returning, if set
}

func (f *fakeCompiler) compile(ctx context.Context, pkg string) (string, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if f.fail != nil {
		return "", f.fail
	}
	key, err := PackageKey(ctx, pkg)
	if err != nil {
		return "", err
	}
	out, err := os.MkdirTemp(f.tmp, "compiled-*.mlmodelc")
	if err != nil {
		return "", err
	}
	err = writeFiles(out, map[string]string{
		"model.mil":            "compiled from " + key,
		"weights/weight.bin":   strings.Repeat("c", 3000),
		"analytics/coremldata": "n=" + string(rune('0'+n)),
		"metadata.json":        "{}",
	})
	if err != nil {
		return "", err
	}
	if f.hook != nil {
		f.hook()
	}
	return out, nil
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newTestCache(t *testing.T) (*Cache, *fakeCompiler, string) {
	dir := filepath.Join(t.TempDir(), "cache", "coreml")
	fc := &fakeCompiler{tmp: t.TempDir()}
	return NewCache(dir, fc.compile, quietLog()), fc, dir
}

func TestPackageKey(t *testing.T) {
	ctx := context.Background()
	pkg := testPackage(t)
	k1, err := PackageKey(ctx, pkg)
	if err != nil {
		t.Fatal(err)
	}
	if !keyPattern.MatchString(k1) {
		t.Fatalf("key %q", k1)
	}
	// The same content elsewhere has the same key.
	copyDir := filepath.Join(t.TempDir(), "other-name.mlpackage")
	if err := copyTree(ctx, pkg, copyDir); err != nil {
		t.Fatal(err)
	}
	if k, _ := PackageKey(ctx, copyDir); k != k1 {
		t.Fatal("a copy of the package has another key")
	}
	// Any change to content, names or the file set changes it.
	changes := map[string]func(root string){
		"content": func(root string) {
			os.WriteFile(filepath.Join(root, "Data/com.apple.CoreML/weights/weight.bin"), []byte(strings.Repeat("w", 4999)+"v"), 0o644)
		},
		"rename": func(root string) {
			os.Rename(filepath.Join(root, "Data/com.apple.CoreML/weights/more/extra.bin"), filepath.Join(root, "Data/com.apple.CoreML/weights/more/extra3.bin"))
		},
		"new empty file": func(root string) { os.WriteFile(filepath.Join(root, "Data/empty"), nil, 0o644) },
		// Moving bytes across the boundary of two files keeps their
		// concatenation but not the sizes.
		"boundary": func(root string) {
			os.WriteFile(filepath.Join(root, "Data/com.apple.CoreML/weights/more/extra.bin"), nil, 0o644)
			os.WriteFile(filepath.Join(root, "Data/com.apple.CoreML/weights/more/extra2.bin"), []byte("x"), 0o644)
		},
	}
	for name, change := range changes {
		dir := filepath.Join(t.TempDir(), "p.mlpackage")
		if err := copyTree(ctx, pkg, dir); err != nil {
			t.Fatal(err)
		}
		change(dir)
		k, err := PackageKey(ctx, dir)
		if err != nil || k == k1 {
			t.Errorf("%s: key %s, %v (unchanged: %v)", name, k, err, k == k1)
		}
	}
	// A single .mlmodel file is a package too.
	file := filepath.Join(t.TempDir(), "m.mlmodel")
	os.WriteFile(file, []byte("spec"), 0o644)
	if k, err := PackageKey(ctx, file); err != nil || !keyPattern.MatchString(k) {
		t.Errorf("file package: %q %v", k, err)
	}
	// Refused: symbolic links, empty packages, missing paths, cancelled contexts.
	link := filepath.Join(t.TempDir(), "l.mlpackage")
	if err := copyTree(ctx, pkg, link); err != nil {
		t.Fatal(err)
	}
	os.Symlink("/etc/hostname", filepath.Join(link, "Data", "link"))
	if _, err := PackageKey(ctx, link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlink: %v", err)
	}
	if _, err := PackageKey(ctx, t.TempDir()); err == nil || !strings.Contains(err.Error(), "has no files") {
		t.Errorf("empty: %v", err)
	}
	if _, err := PackageKey(ctx, filepath.Join(t.TempDir(), "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := PackageKey(cctx, pkg); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestCacheCompilesOnce(t *testing.T) {
	ctx := context.Background()
	c, fc, dir := newTestCache(t)
	pkg := testPackage(t)
	e1, err := c.Compiled(ctx, pkg)
	if err != nil {
		t.Fatal(err)
	}
	if !e1.Fresh || fc.calls != 1 || e1.Path != filepath.Join(dir, e1.Key, "model.mlmodelc") {
		t.Fatalf("first: %+v, %d compiles", e1, fc.calls)
	}
	body, err := os.ReadFile(filepath.Join(e1.Path, "model.mil"))
	if err != nil || string(body) != "compiled from "+e1.Key {
		t.Fatalf("compiled model: %q %v", body, err)
	}
	// The compiler's temporary output was taken over.
	if left, _ := os.ReadDir(fc.tmp); len(left) != 0 {
		t.Errorf("the compiler's output is still in its temporary folder: %v", left)
	}
	var m manifest
	data, _ := os.ReadFile(filepath.Join(dir, e1.Key, "manifest.json"))
	if err := json.Unmarshal(data, &m); err != nil || m.Key != e1.Key || len(m.Files) != 4 || m.Package != pkg {
		t.Fatalf("manifest: %+v %v", m, err)
	}
	e2, err := c.Compiled(ctx, pkg)
	if err != nil || e2.Fresh || e2.Path != e1.Path || fc.calls != 1 {
		t.Fatalf("second: %+v %v, %d compiles", e2, err, fc.calls)
	}
	// Concurrent callers of one Cache compile once between them.
	c2, fc2, _ := newTestCache(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c2.Compiled(ctx, pkg); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if fc2.calls != 1 {
		t.Errorf("%d compiles for 4 concurrent callers", fc2.calls)
	}
	// Nothing temporary is left in the cache directory.
	list, _ := os.ReadDir(dir)
	for _, d := range list {
		if strings.HasPrefix(d.Name(), atomicfile.TempPrefix) {
			t.Errorf("temporary entry left: %s", d.Name())
		}
	}
}

func TestCacheRecompilesDamagedEntries(t *testing.T) {
	ctx := context.Background()
	pkg := testPackage(t)
	damages := map[string]func(entry string){
		"truncated file": func(e string) {
			os.WriteFile(filepath.Join(e, "model.mlmodelc/weights/weight.bin"), []byte("c"), 0o644)
		},
		"missing file":     func(e string) { os.Remove(filepath.Join(e, "model.mlmodelc/model.mil")) },
		"missing manifest": func(e string) { os.Remove(filepath.Join(e, "manifest.json")) },
		"corrupt manifest": func(e string) { os.WriteFile(filepath.Join(e, "manifest.json"), []byte("{"), 0o644) },
		"other key": func(e string) {
			data, _ := os.ReadFile(filepath.Join(e, "manifest.json"))
			var m manifest
			json.Unmarshal(data, &m)
			m.Key = strings.Repeat("0", 64)
			data, _ = json.Marshal(m)
			os.WriteFile(filepath.Join(e, "manifest.json"), data, 0o644)
		},
		"path escape": func(e string) {
			data, _ := os.ReadFile(filepath.Join(e, "manifest.json"))
			var m manifest
			json.Unmarshal(data, &m)
			m.Files[0].Path = "model.mlmodelc/../../x"
			data, _ = json.Marshal(m)
			os.WriteFile(filepath.Join(e, "manifest.json"), data, 0o644)
		},
		"future format": func(e string) {
			data, _ := os.ReadFile(filepath.Join(e, "manifest.json"))
			var m manifest
			json.Unmarshal(data, &m)
			m.Format = 2
			data, _ = json.Marshal(m)
			os.WriteFile(filepath.Join(e, "manifest.json"), data, 0o644)
		},
	}
	for name, damage := range damages {
		c, fc, _ := newTestCache(t)
		e1, err := c.Compiled(ctx, pkg)
		if err != nil {
			t.Fatal(err)
		}
		damage(filepath.Dir(e1.Path))
		e2, err := c.Compiled(ctx, pkg)
		if err != nil || !e2.Fresh || fc.calls != 2 {
			t.Errorf("%s: %+v %v, %d compiles (want a recompile)", name, e2, err, fc.calls)
			continue
		}
		if err := checkEntry(filepath.Dir(e2.Path), e2.Key); err != nil {
			t.Errorf("%s: the new entry is not whole: %v", name, err)
		}
	}
}

func TestCacheCompileFailure(t *testing.T) {
	ctx := context.Background()
	c, fc, dir := newTestCache(t)
	fc.fail = &NSError{Op: "compileModelAtURL:error:", Description: "bad spec"}
	pkg := testPackage(t)
	_, err := c.Compiled(ctx, pkg)
	var ns *NSError
	if err == nil || !errors.As(err, &ns) || !strings.Contains(err.Error(), "compiling "+pkg) {
		t.Fatalf("got %v", err)
	}
	if list, _ := os.ReadDir(dir); len(list) != 0 {
		t.Errorf("a failed compile left %v", list)
	}
	// A compiler that reports a file, not a directory.
	c2 := NewCache(dir, func(context.Context, string) (string, error) {
		f := filepath.Join(t.TempDir(), "f")
		return f, os.WriteFile(f, nil, 0o644)
	}, quietLog())
	if _, err := c2.Compiled(ctx, pkg); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("file output: %v", err)
	}
	// An empty compiled directory is no model.
	c3 := NewCache(dir, func(context.Context, string) (string, error) { return os.MkdirTemp(t.TempDir(), "x") }, quietLog())
	if _, err := c3.Compiled(ctx, pkg); err == nil || !strings.Contains(err.Error(), "produced no files") {
		t.Errorf("empty output: %v", err)
	}
	if list, _ := os.ReadDir(dir); len(list) != 0 {
		t.Errorf("failed installs left %v", list)
	}
}

// TestCacheCopiesAcrossFileSystems takes the path where the compiler's
// output cannot be renamed into the cache (another file system).
func TestCacheCopiesAcrossFileSystems(t *testing.T) {
	ctx := context.Background()
	c, fc, _ := newTestCache(t)
	c.rename = func(from, to string) error {
		if strings.HasPrefix(from, fc.tmp) {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: errors.New("cross-device link")}
		}
		return os.Rename(from, to)
	}
	e, err := c.Compiled(ctx, testPackage(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkEntry(filepath.Dir(e.Path), e.Key); err != nil {
		t.Fatal(err)
	}
	if body, _ := os.ReadFile(filepath.Join(e.Path, "weights/weight.bin")); len(body) != 3000 {
		t.Fatalf("copied weights: %d bytes", len(body))
	}
	if left, _ := os.ReadDir(fc.tmp); len(left) != 0 {
		t.Errorf("the compiler's output was not removed after the copy: %v", left)
	}
}

// TestCacheRace: another process installs the same entry while this one
// compiles; both end with the one whole entry.
func TestCacheRace(t *testing.T) {
	ctx := context.Background()
	pkg := testPackage(t)
	dir := filepath.Join(t.TempDir(), "cache")
	other := NewCache(dir, (&fakeCompiler{tmp: t.TempDir()}).compile, quietLog())
	fc := &fakeCompiler{tmp: t.TempDir()}
	fc.hook = func() {
		if _, err := other.Compiled(ctx, pkg); err != nil {
			t.Error(err)
		}
	}
	c := NewCache(dir, fc.compile, quietLog())
	e, err := c.Compiled(ctx, pkg)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkEntry(filepath.Dir(e.Path), e.Key); err != nil {
		t.Fatal(err)
	}
	list, _ := os.ReadDir(dir)
	if len(list) != 1 || list[0].Name() != e.Key {
		t.Errorf("cache holds %v", list)
	}
}

func TestCacheRemovesAbandonedTemporaries(t *testing.T) {
	ctx := context.Background()
	c, _, dir := newTestCache(t)
	os.MkdirAll(filepath.Join(dir, atomicfile.TempPrefix+"old-1", "model.mlmodelc"), 0o755)
	os.MkdirAll(filepath.Join(dir, atomicfile.TempPrefix+"new-1"), 0o755)
	old := time.Now().Add(-48 * time.Hour)
	os.Chtimes(filepath.Join(dir, atomicfile.TempPrefix+"old-1"), old, old)
	if _, err := c.Compiled(ctx, testPackage(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, atomicfile.TempPrefix+"old-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a two-day-old temporary entry is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, atomicfile.TempPrefix+"new-1")); err != nil {
		t.Errorf("a recent temporary entry (maybe another process's compile) was removed: %v", err)
	}
}

func TestCacheVerify(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newTestCache(t)
	e, err := c.Compiled(ctx, testPackage(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(ctx, e); err != nil {
		t.Fatalf("a fresh entry: %v", err)
	}
	damageWeights(t, e)
	if err := checkEntry(filepath.Dir(e.Path), e.Key); err != nil {
		t.Fatalf("same-size damage should pass the cheap check: %v", err)
	}
	if err := c.Verify(ctx, e); err == nil || !strings.Contains(err.Error(), "model.mlmodelc/weights/weight.bin has changed") {
		t.Fatalf("damaged: %v", err)
	}
	if err := c.Verify(ctx, Entry{Key: "x"}); err == nil {
		t.Fatal("a bad key verified")
	}
	// A named pipe in the entry's place of a file is refused, not read
	// (which would block until a writer comes: forever).
	weights := filepath.Join(e.Path, "weights", "weight.bin")
	os.Remove(weights)
	testres.Mkfifo(t, weights)
	err = testres.Promptly(t, "Verify of an entry holding a named pipe", func() error { return c.Verify(ctx, e) })
	if !errors.Is(err, mmap.ErrNotRegular) || !strings.Contains(err.Error(), weights) {
		t.Fatalf("a named pipe in the entry: %v", err)
	}
	os.Remove(filepath.Join(filepath.Dir(e.Path), manifestName))
	if err := c.Verify(ctx, e); err == nil || !strings.Contains(err.Error(), "manifest is missing") {
		t.Fatalf("no manifest: %v", err)
	}
}

func TestCacheEvict(t *testing.T) {
	ctx := context.Background()
	c, fc, _ := newTestCache(t)
	pkg := testPackage(t)
	e, _ := c.Compiled(ctx, pkg)
	if err := c.Evict("../x"); err == nil {
		t.Fatal("Evict accepted a path")
	}
	if err := c.Evict(e.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(e.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the entry is still there")
	}
	if err := c.Evict(e.Key); err != nil {
		t.Fatalf("evicting a missing entry: %v", err)
	}
	if e2, _ := c.Compiled(ctx, pkg); !e2.Fresh || fc.calls != 2 {
		t.Fatal("no recompile after Evict")
	}
}
