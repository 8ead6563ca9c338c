package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"anechat/storage"
)

// recorder is an Emitter that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []event
	signal chan struct{}
}

type event struct {
	name string
	data any
}

func newRecorder() *recorder { return &recorder{signal: make(chan struct{}, 1)} }

func (r *recorder) Emit(name string, data any) {
	r.mu.Lock()
	r.events = append(r.events, event{name, data})
	r.mu.Unlock()
	select { // wake a waiter; one pending wake-up is enough, it re-reads events
	case r.signal <- struct{}{}:
	default:
	}
}

// waitFor blocks until an event named name has arrived and returns the first.
func (r *recorder) waitFor(t *testing.T, name string) any {
	t.Helper()
	return r.waitCount(t, name, 1)[0]
}

// waitCount blocks until n events named name have arrived and returns them.
func (r *recorder) waitCount(t *testing.T, name string, n int) []any {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if got := r.named(name); len(got) >= n {
			return got
		}
		select {
		case <-r.signal:
		case <-deadline:
			t.Fatalf("fewer than %d %s events within 10s", n, name)
		}
	}
}

func (r *recorder) named(name string) []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []any
	for _, e := range r.events {
		if e.name == name {
			out = append(out, e.data)
		}
	}
	return out
}

// start opens an App on a fresh data directory.
func start(t *testing.T, gen Generator) (*App, *recorder, string) {
	t.Helper()
	return startIn(t, t.TempDir(), gen)
}

// startIn is start on a given data directory.
func startIn(t *testing.T, dir string, gen Generator) (*App, *recorder, string) {
	t.Helper()
	a := New(Options{DataDir: dir, Version: "test", Generator: gen})
	rec := newRecorder()
	a.Startup(context.Background(), rec)
	t.Cleanup(a.Shutdown)
	if info := a.System.Info(); info.StorageError != "" {
		t.Fatalf("storage did not open: %s", info.StorageError)
	}
	return a, rec, dir
}

func TestSystemInfoReportsThisBinaryAndStorage(t *testing.T) {
	a, _, dir := start(t, nil)
	got := a.System.Info()
	want := SystemInfo{Version: "test", OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version(),
		DataDir: dir, Database: filepath.Join(dir, storage.DBFile), SchemaVersion: got.SchemaVersion,
		EngineError: ErrNoEngine.Error()}
	if got != want {
		t.Fatalf("Info() = %+v\nwant %+v", got, want)
	}
	if got.SchemaVersion < 1 {
		t.Fatalf("schema version %d, want >= 1", got.SchemaVersion)
	}
}

func TestServicesBeforeStartupSayNotStarted(t *testing.T) {
	a := New(Options{DataDir: t.TempDir()})
	if _, err := a.Chat.ListConversations(); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("ListConversations before Startup: %v, want ErrNotStarted", err)
	}
}

func TestCorruptDatabaseIsReportedWithItsPath(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, storage.DBFile)
	if err := os.WriteFile(db, []byte("this is not a database, just some text that is long enough"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := New(Options{DataDir: dir})
	a.Startup(context.Background(), newRecorder())
	defer a.Shutdown()
	_, err := a.Chat.ListConversations()
	if !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("ListConversations on a corrupt database: %v, want ErrCorrupt", err)
	}
	info := a.System.Info()
	if !strings.Contains(info.StorageError, db) || !strings.Contains(info.StorageError, "move") {
		t.Fatalf("StorageError %q should name %s and say what to do", info.StorageError, db)
	}
	for _, call := range []func() error{
		func() error { _, err := a.Library.List("", ""); return err },
		func() error { _, err := a.Settings.Get(); return err },
		func() error { _, err := a.Models.List(); return err },
		func() error { _, err := a.Chat.CreateConversation(NewConversation{}); return err },
	} {
		if err := call(); !errors.Is(err, storage.ErrCorrupt) {
			t.Errorf("service call on a corrupt database: %v, want ErrCorrupt", err)
		}
	}
}

func TestUnwritableDataDirIsReportedWithItsPath(t *testing.T) {
	if os.Geteuid() == 0 {
		// root writes anywhere; a regular file in the way fails for everyone.
		t.Log("running as root: using a file where the directory should be")
	}
	parent := t.TempDir()
	blocker := filepath.Join(parent, "file")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(blocker, "anechat") // a directory below a regular file cannot exist
	a := New(Options{DataDir: dir})
	a.Startup(context.Background(), newRecorder())
	defer a.Shutdown()
	_, err := a.Settings.Get()
	if !errors.Is(err, storage.ErrNotWritable) {
		t.Fatalf("Settings.Get with an unusable data dir: %v, want ErrNotWritable", err)
	}
	if info := a.System.Info(); !strings.Contains(info.StorageError, blocker) {
		t.Fatalf("StorageError %q should name the path under %s", info.StorageError, blocker)
	}
}
