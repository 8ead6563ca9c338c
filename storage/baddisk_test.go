package storage

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"anechat/internal/fsfault"
)

func TestResolveDataDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	home := func() (string, error) { return "/home/u", nil }
	noHome := func() (string, error) { return "", errors.New("no $HOME") }
	cases := []struct {
		name, flag string
		env        map[string]string
		goos       string
		home       func() (string, error)
		want       string
	}{
		{"flag wins", "/f", map[string]string{"ANECHAT_HOME": "/a", "XDG_DATA_HOME": "/x"}, "linux", home, "/f"},
		{"ANECHAT_HOME", "", map[string]string{"ANECHAT_HOME": "/a", "XDG_DATA_HOME": "/x"}, "darwin", home, "/a"},
		{"XDG on linux", "", map[string]string{"XDG_DATA_HOME": "/x"}, "linux", home, "/x/anechat"},
		{"relative XDG ignored", "", map[string]string{"XDG_DATA_HOME": "rel"}, "linux", home, "/home/u/.local/share/anechat"},
		{"linux default", "", nil, "linux", home, "/home/u/.local/share/anechat"},
		{"macOS ignores XDG", "", map[string]string{"XDG_DATA_HOME": "/x"}, "darwin", home, "/home/u/Library/Application Support/anechat"},
		{"flag needs no home", "/f", nil, "linux", noHome, "/f"},
	}
	for _, tc := range cases {
		got, err := resolveDataDir(tc.flag, env(tc.env), tc.goos, tc.home)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := resolveDataDir("", env(nil), "linux", noHome); err == nil || !strings.Contains(err.Error(), "--data-dir") {
		t.Errorf("no home: %v, want an error pointing at --data-dir", err)
	}
	wd, _ := os.Getwd()
	if got, _ := resolveDataDir("rel/dir", env(nil), "linux", home); got != filepath.Join(wd, "rel/dir") {
		t.Errorf("relative flag: %q, want it made absolute", got)
	}
}

func TestDataDirCreatesLayout(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "b")
	t.Setenv("ANECHAT_HOME", "/should/not/be/used")
	dir, err := DataDir(root, nil)
	if err != nil || dir != root {
		t.Fatalf("DataDir: %q, %v", dir, err)
	}
	for _, sub := range []string{KVPath(dir), ModelsPath(dir)} {
		if st, err := os.Stat(sub); err != nil || !st.IsDir() {
			t.Errorf("%s not created: %v", sub, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("data dir holds %d entries (probe file left behind?)", len(entries))
	}
	t.Setenv("ANECHAT_HOME", filepath.Join(t.TempDir(), "envhome"))
	if dir, err := DataDir("", nil); err != nil || dir != os.Getenv("ANECHAT_HOME") {
		t.Errorf("ANECHAT_HOME: %q, %v", dir, err)
	}
	d, err := Open(context.Background(), DBPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
}

func TestUnwritableDataDir(t *testing.T) {
	// A path under a regular file cannot be created, even by root.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)
	bad := filepath.Join(file, "anechat")
	_, err := DataDir(bad, nil)
	if !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "--data-dir") {
		t.Errorf("data dir under a file: %v, want ErrNotWritable naming %s and --data-dir", err, bad)
	}
	if _, err := Open(context.Background(), filepath.Join(bad, DBFile)); !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), bad) {
		t.Errorf("database under a file: %v, want ErrNotWritable", err)
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(t.TempDir(), "ro")
		os.Mkdir(ro, 0o500)
		defer os.Chmod(ro, 0o700)
		if _, err := DataDir(ro, nil); !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), ro) {
			t.Errorf("read-only dir: %v, want ErrNotWritable", err)
		}
		if _, err := Open(context.Background(), filepath.Join(ro, DBFile)); !errors.Is(err, ErrNotWritable) {
			t.Errorf("database in a read-only dir: %v, want ErrNotWritable", err)
		}
	}
}

// TestDiskFull fills the database to a page limit (SQLite's max_page_count
// returns the same SQLITE_FULL a full disk does): the write fails with
// ErrDiskFull naming the file, nothing panics, and the database stays
// consistent and usable for reads.
func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), DBFile)
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var pages int
	d.SQL().QueryRow("PRAGMA page_count").Scan(&pages)
	d.Close()
	d, err = open(ctx, path, options{migrations: mustSub(t), pragmas: []string{"max_page_count(" + itoa(pages+4) + ")"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c, err := d.CreateConversation(ctx, ConversationInput{Title: "full"})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("lorem ipsum dolor sit amet ", 2000)
	var full error
	for i := 0; i < 100 && full == nil; i++ {
		_, full = d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleUser, Content: big})
	}
	if !errors.Is(full, ErrDiskFull) || !strings.Contains(full.Error(), path) || !strings.Contains(full.Error(), "free some space") {
		t.Fatalf("writing past the limit: %v, want ErrDiskFull naming %s", full, path)
	}
	if err := d.Check(ctx); err != nil {
		t.Errorf("after a full disk: %v", err)
	}
	if _, err := d.Tree(ctx, c.ID); err != nil {
		t.Errorf("reading after a full disk: %v", err)
	}
}

// TestDiskFullTmpfs uses a real full file system (a 512 KiB tmpfs) when the
// test may mount one (root with CAP_SYS_ADMIN).
func TestDiskFullTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("mounting a tmpfs needs root (TestDiskFull covers SQLITE_FULL without it)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); TestDiskFull covers SQLITE_FULL without it", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	ctx := context.Background()
	dir, err := DataDir(filepath.Join(mnt, "anechat"), nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(ctx, DBPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.CreateConversation(ctx, ConversationInput{})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 64<<10)
	var full error
	for i := 0; i < 64 && full == nil; i++ {
		_, full = d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleUser, Content: big})
	}
	if !errors.Is(full, ErrDiskFull) || !strings.Contains(full.Error(), DBPath(dir)) {
		t.Errorf("full tmpfs: %v, want ErrDiskFull naming the database", full)
	}
	d.Close()
	// Fill what is left, then the data dir probe reports a full disk.
	f, _ := os.Create(filepath.Join(mnt, "filler"))
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filler: %v", err)
			}
			break
		}
	}
	f.Close()
	if _, err := DataDir(filepath.Join(mnt, "anechat"), nil); !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), mnt) {
		t.Errorf("DataDir on a full disk: %v, want ErrDiskFull", err)
	}
	// A new database cannot be created, let alone migrated, on the full disk.
	fresh := filepath.Join(mnt, "fresh.db")
	if d, err := Open(ctx, fresh); err == nil {
		d.Close()
		t.Error("creating a database on a full disk succeeded")
	} else if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), fresh) {
		t.Errorf("new database on a full disk: %v, want ErrDiskFull naming %s", err, fresh)
	}
	// Reopening on the full disk either works (nothing to write) or fails typed.
	if d, err := Open(ctx, DBPath(dir)); err == nil {
		d.Close()
	} else if !errors.Is(err, ErrDiskFull) && !errors.Is(err, ErrIO) {
		t.Errorf("reopen on a full disk: %v", err)
	}
	// With space freed, the database is whole and usable again.
	os.Remove(filepath.Join(mnt, "filler"))
	d, err = Open(ctx, DBPath(dir))
	if err != nil {
		t.Fatalf("reopen after freeing space: %v", err)
	}
	defer d.Close()
	if err := d.Check(ctx); err != nil {
		t.Error(err)
	}
	if _, err := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleUser, Content: "after"}); err != nil {
		t.Errorf("write after freeing space: %v", err)
	}
}

// leftovers puts in the kv/ of data dir dir what interrupted saves leave,
// an hour old: a complete snapshot file no row points at (the row's write
// failed) and a temporary file of a writer that is gone; and a young file no
// row points at (perhaps another process's save in flight). It returns
// their paths.
func leftovers(t *testing.T, dir string, size int) (unindexed, temp, young string) {
	t.Helper()
	kvDir := KVPath(dir)
	unindexed = filepath.Join(kvDir, "0123456789abcdef0123456789abcdef.kv")
	temp = filepath.Join(kvDir, ".tmp-"+itoa(deadPid(t))+"-77.kv")
	young = filepath.Join(kvDir, "fedcba9876543210fedcba9876543210.kv")
	for _, p := range []string{unindexed, temp, young} {
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(unindexed, old, old)
	os.Chtimes(temp, old, old)
	return unindexed, temp, young
}

// indexedSnapshot writes a snapshot file of size bytes in the kv/ of data
// dir dir and indexes it.
func indexedSnapshot(t *testing.T, dir string, size int) string {
	t.Helper()
	ctx := context.Background()
	d, err := Open(ctx, DBPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p := filepath.Join(KVPath(dir), "indexed.kv")
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.InsertSnapshot(ctx, snap("indexed.kv", seq(64, 1), int64(size))); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkReclaimed checks that what interrupted saves left is gone, with a
// Warn line each, and that the indexed snapshot and the young file stay.
func checkReclaimed(t *testing.T, log string, indexed, unindexed, temp, young string) {
	t.Helper()
	for _, p := range []string{unindexed, temp} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s not reclaimed: %v", p, err)
		}
		if !strings.Contains(log, "level=WARN msg=\"kv snapshot file deleted\" path="+p) {
			t.Errorf("no Warn for %s in %q", p, log)
		}
	}
	for _, p := range []string{indexed, young} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

// TestDiskFullReclaimsLeftovers: on a really full disk (a tmpfs, as root),
// the data dir check reclaims the files interrupted saves left in kv/ and
// then succeeds, though SQLite cannot even open the database there (its
// shared-memory file cannot be created): the rows are read without writing.
// A young file stays (another process may be saving it) and so does the
// indexed snapshot.
func TestDiskFullReclaimsLeftovers(t *testing.T) {
	mnt := fsfault.SmallFS(t, 1<<20)
	dir, err := DataDir(filepath.Join(mnt, "anechat"), nil)
	if err != nil {
		t.Fatal(err)
	}
	indexed := indexedSnapshot(t, dir, 64<<10)
	unindexed, temp, young := leftovers(t, dir, 64<<10)
	filler := fsfault.Fill(t, mnt, "filler")
	var logBuf bytes.Buffer
	if _, err := DataDir(dir, slog.New(slog.NewTextHandler(&logBuf, nil))); err != nil {
		t.Fatalf("a disk full of anechat's own leftovers: %v", err)
	}
	checkReclaimed(t, logBuf.String(), indexed, unindexed, temp, young)
	if _, err := os.Stat(filler); err != nil {
		t.Errorf("a file outside kv/ was removed: %v", err)
	}
	// With nothing of ours left to reclaim, a full disk is reported.
	fsfault.Fill(t, mnt, "filler2")
	if _, err := DataDir(dir, slog.New(slog.NewTextHandler(&logBuf, nil))); !errors.Is(err, ErrDiskFull) {
		t.Errorf("a disk full of other files: %v, want ErrDiskFull", err)
	}
}

// TestDataDirReclaimsBeforeGivingUp runs the data dir check with a probe
// that reports a full disk while the data dir holds more than a capacity
// (without root, no small file system can be mounted): the leftovers of
// interrupted saves are reclaimed through the database and the check passes.
func TestDataDirReclaimsBeforeGivingUp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "anechat")
	if err := prepareDataDir(dir, probeWrite, slog.Default()); err != nil {
		t.Fatal(err)
	}
	indexed := indexedSnapshot(t, dir, 1000)
	unindexed, temp, young := leftovers(t, dir, 1000)
	probes := 0
	full := func(dir string) error {
		probes++
		var used int64
		filepath.WalkDir(KVPath(dir), func(p string, e fs.DirEntry, err error) error {
			if info, ierr := e.Info(); err == nil && ierr == nil && !e.IsDir() {
				used += info.Size()
			}
			return nil
		})
		if used > 2500 {
			return dirError("write to data directory", dir, syscall.ENOSPC)
		}
		return nil
	}
	var logBuf bytes.Buffer
	if err := prepareDataDir(dir, full, slog.New(slog.NewTextHandler(&logBuf, nil))); err != nil || probes != 2 {
		t.Fatalf("%v after %d probes", err, probes)
	}
	checkReclaimed(t, logBuf.String(), indexed, unindexed, temp, young)
}

// TestReclaimWithoutDatabase: when the database cannot be read at all, the
// reclaim removes only temporary files of writers that are gone: which
// snapshot files are indexed is unknown.
func TestReclaimWithoutDatabase(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "anechat")
	if err := prepareDataDir(dir, probeWrite, slog.Default()); err != nil {
		t.Fatal(err)
	}
	unindexed, temp, young := leftovers(t, dir, 10)
	if err := os.WriteFile(DBPath(dir), []byte("not a database, and not empty"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := reclaimKV(context.Background(), dir)
	if !slices.Equal(reconciled(rep.FilesDeleted), []string{filepath.Base(temp)}) {
		t.Errorf("reclaimed %v, want only %s", rep.FilesDeleted, filepath.Base(temp))
	}
	for _, p := range []string{unindexed, young} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}
