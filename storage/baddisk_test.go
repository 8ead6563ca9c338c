package storage

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
	dir, err := DataDir(root)
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
	if dir, err := DataDir(""); err != nil || dir != os.Getenv("ANECHAT_HOME") {
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
	_, err := DataDir(bad)
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
		if _, err := DataDir(ro); !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), ro) {
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
	dir, err := DataDir(filepath.Join(mnt, "anechat"))
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
	if _, err := DataDir(filepath.Join(mnt, "anechat")); !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), mnt) {
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
