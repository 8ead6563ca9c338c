package download_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"anechat/internal/download"
	"anechat/internal/hub"
	"anechat/internal/hub/hubtest"
)

const bundleRepo = "anechat-test/tiny-coreml"

// bundleSet is the fake Hub's bundle as a set pinned to its commit, every
// file checked by its LFS sha256 or its Git blob id.
func bundleSet(t *testing.T, s *hubtest.Server) download.Set {
	t.Helper()
	c, err := hub.New(s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background(), bundleRepo, "main")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := c.Tree(context.Background(), bundleRepo, info.SHA)
	if err != nil {
		t.Fatal(err)
	}
	set := download.Set{Name: "tiny-coreml", Source: bundleRepo + "@" + info.SHA, StartedAt: time.Now()}
	for _, f := range tree.Files {
		if strings.HasPrefix(f.Path, ".") {
			continue
		}
		sf := download.SetFile{URL: c.ResolveURL(bundleRepo, info.SHA, f.Path), Path: f.Path, Size: f.Size}
		if f.LFS != nil {
			sf.SHA256 = f.LFS.SHA256
		} else {
			sf.GitBlob = f.OID
		}
		set.Files = append(set.Files, sf)
	}
	return set
}

// dirs is a models folder and its work folder for sets.
func dirs(t *testing.T) (models, work string) {
	models = t.TempDir()
	return models, filepath.Join(models, ".bundles")
}

var quick = download.SetOptions{RetryDelay: time.Millisecond, Options: download.Options{Reserve: 1}}

// requested counts the requests for file of the bundle (its resolve and
// CDN URLs) and returns the Range headers they carried.
func requested(s *hubtest.Server, file string, from int) (n int, ranges []string) {
	for _, r := range s.Requests()[from:] {
		// The resolve URL: an LFS file's redirect to the CDN repeats it.
		if strings.Contains(r.Path, "/resolve/") && strings.HasSuffix(r.Path, "/"+file) {
			n++
			if r.Range != "" {
				ranges = append(ranges, r.Range)
			}
		}
	}
	return n, ranges
}

// checkInstalled: the folder holds exactly the set's files with the
// server's bytes, and the work folder is gone.
func checkInstalled(t *testing.T, s *hubtest.Server, set download.Set, models, work string) {
	t.Helper()
	for _, f := range set.Files {
		got, err := os.ReadFile(filepath.Join(models, set.Name, filepath.FromSlash(f.Path)))
		want, _ := s.Content(bundleRepo, f.Path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: installed %d bytes (%v), want the server's %d", f.Path, len(got), err, len(want))
		}
	}
	n := 0
	filepath.WalkDir(filepath.Join(models, set.Name), func(_ string, d fs.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			n++
		}
		return nil
	})
	if n != len(set.Files) {
		t.Errorf("the folder holds %d files, the set %d", n, len(set.Files))
	}
	if _, err := os.Stat(filepath.Join(work, set.Name)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the work folder is still there after the install: %v", err)
	}
}

// TestSetDroppedConnectionAndWrongChecksum: a connection dropped in the
// middle of a file is resumed by a Range request; a file whose bytes are
// not the tree's sha256 fails the set, naming the file, with nothing in
// the models folder; after the server is right again, a run from disk (a
// restart) fetches that file and the ones after it only, then installs.
func TestSetDroppedConnectionAndWrongChecksum(t *testing.T) {
	s := hubtest.Start(t)
	set := bundleSet(t, s)
	models, work := dirs(t)
	const weight = "swa/chunk1.mlmodelc/weights/weight.bin"
	const rope = "swa/cos_sliding.npy"
	s.DropAfter(bundleRepo, weight, 100_000)
	s.Corrupt(bundleRepo, rope, true)
	j, err := download.PrepareSet(work, models, set)
	if err != nil {
		t.Fatal(err)
	}
	var last download.SetProgress
	err = j.Run(context.Background(), quick, func(p download.SetProgress) { last = p })
	var fe *download.FileError
	var ce *download.ChecksumError
	if !errors.As(err, &fe) || fe.Path != rope || !errors.As(err, &ce) {
		t.Fatalf("run: %v, want a sha256 mismatch of %s", err, rope)
	}
	if !strings.Contains(err.Error(), rope) || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Errorf("the error %q does not name the file and the check", err)
	}
	if _, err := os.Stat(filepath.Join(models, set.Name)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed set is in the models folder: %v", err)
	}
	if n, ranges := requested(s, weight, 0); n != 2 || len(ranges) != 1 || ranges[0] != "bytes=100000-" {
		t.Errorf("%s: %d requests, ranges %q: want the dropped transfer resumed from byte 100000", weight, n, ranges)
	}
	done := 0
	for _, f := range last.Files {
		switch {
		case f.State == download.FileDone:
			done++
		case f.Path == rope && (f.State != download.FileFailed || f.Received != 0):
			t.Errorf("after the failure: %+v, want failed with its bytes discarded", f)
		}
	}
	if done != len(set.Files)-2 {
		t.Errorf("after the failure: %d files done, want every one before %s", done, rope)
	}

	// A restart: the set is read from disk; the server sends the right bytes.
	s.Corrupt(bundleRepo, rope, false)
	mark := len(s.Requests())
	j, err = download.OpenSet(work, models, set.Name)
	if err != nil {
		t.Fatal(err)
	}
	if p := j.Progress(); p.Received != last.Received || p.Total != set.Size() {
		t.Errorf("progress from disk: %d of %d, want %d of %d", p.Received, p.Total, last.Received, set.Size())
	}
	if err := j.Run(context.Background(), quick, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range set.Files {
		n, _ := requested(s, f.Path, mark)
		again := f.Path == rope || f.Path == "swa/sin_sliding.npy"
		if again && n == 0 || !again && n > 0 {
			t.Errorf("%s asked for %d times after the restart", f.Path, n)
		}
	}
	checkInstalled(t, s, set, models, work)
}

// TestSetResumesAfterRestart: a set stopped part-way through a file (the
// app closing) continues after a restart from the bytes on disk.
func TestSetResumesAfterRestart(t *testing.T) {
	s := hubtest.Start(t)
	set := bundleSet(t, s)
	models, work := dirs(t)
	const weight = "swa/chunk1.mlmodelc/weights/weight.bin"
	s.Slow(8<<10, 2*time.Millisecond)
	j, err := download.PrepareSet(work, models, set)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var at int64
	err = j.Run(ctx, quick, func(p download.SetProgress) {
		if p.Current >= 0 && p.Files[p.Current].Path == weight && p.Files[p.Current].Received >= 128<<10 && at == 0 {
			at = p.Files[p.Current].Received
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || at == 0 {
		t.Fatalf("run: %v (stopped at %d)", err, at)
	}
	s.Slow(0, 0)
	mark := len(s.Requests())
	j, err = download.OpenSet(work, models, set.Name)
	if err != nil {
		t.Fatal(err)
	}
	// What is on disk, which the stop may have let grow past where it was asked.
	for _, f := range j.Progress().Files {
		if f.Path == weight {
			at = f.Received
		}
	}
	if at <= 0 || at >= 300_000 {
		t.Fatalf("the stop left %d bytes of %s: not part-way through", at, weight)
	}
	if err := j.Run(context.Background(), quick, nil); err != nil {
		t.Fatal(err)
	}
	if _, ranges := requested(s, weight, mark); len(ranges) != 1 || ranges[0] != "bytes="+strconv.FormatInt(at, 10)+"-" {
		t.Errorf("after the restart %s was asked with ranges %q, want from byte %d", weight, ranges, at)
	}
	if n, _ := requested(s, "embed_tokens_q8.bin", mark); n != 0 {
		t.Errorf("a file checked before the restart was fetched again (%d requests)", n)
	}
	checkInstalled(t, s, set, models, work)
}

// TestSetCancelLeavesNothing: a cancel during the transfer, then RemoveSet,
// leaves no file of the set anywhere under the models folder.
func TestSetCancelLeavesNothing(t *testing.T) {
	s := hubtest.Start(t)
	set := bundleSet(t, s)
	models, work := dirs(t)
	j, err := download.PrepareSet(work, models, set)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = j.Run(ctx, quick, func(p download.SetProgress) {
		if p.Received > 200_000 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	if names, _ := download.ListSets(work); len(names) != 1 || names[0] != set.Name {
		t.Errorf("waiting sets %q", names)
	}
	if err := download.RemoveSet(work, set.Name); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(models, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
	if names, _ := download.ListSets(work); len(names) != 0 {
		t.Errorf("waiting sets after the cancel: %q", names)
	}
}

// TestSetRefusals: a set that could not be installed as described, or
// that the disk cannot hold, is refused before any byte is fetched.
func TestSetRefusals(t *testing.T) {
	s := hubtest.Start(t)
	models, work := dirs(t)
	base := bundleSet(t, s)
	edit := func(f func(*download.Set)) download.Set {
		c := base
		c.Files = append([]download.SetFile(nil), base.Files...)
		f(&c)
		return c
	}
	for name, set := range map[string]download.Set{
		"escaping path":  edit(func(c *download.Set) { c.Files[0].Path = "../x" }),
		"absolute path":  edit(func(c *download.Set) { c.Files[0].Path = "/etc/x" }),
		"hidden path":    edit(func(c *download.Set) { c.Files[0].Path = ".git/config" }),
		"twice":          edit(func(c *download.Set) { c.Files[1].Path = strings.ToUpper(c.Files[0].Path) }),
		"file and dir":   edit(func(c *download.Set) { c.Files[0].Path = "swa" }),
		"no checksum":    edit(func(c *download.Set) { c.Files[0].SHA256, c.Files[0].GitBlob = "", "" }),
		"bad sha256":     edit(func(c *download.Set) { c.Files[0].SHA256 = "abc" }),
		"hidden name":    edit(func(c *download.Set) { c.Name = ".x" }),
		"name with path": edit(func(c *download.Set) { c.Name = "a/b" }),
	} {
		if _, err := download.PrepareSet(work, models, set); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := os.MkdirAll(filepath.Join(models, base.Name), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := download.PrepareSet(work, models, base); err == nil || !strings.Contains(err.Error(), "already there") {
		t.Errorf("over an existing folder: %v", err)
	}
	os.Remove(filepath.Join(models, base.Name))
	j, err := download.PrepareSet(work, models, base)
	if err != nil {
		t.Fatal(err)
	}
	o := quick
	o.Reserve = 1 << 30
	o.Space = func(string) (int64, int64, error) { return 1<<30 + 1000, 100 << 30, nil }
	mark := len(s.Requests())
	var se *download.SpaceError
	if err := j.Run(context.Background(), o, nil); !errors.As(err, &se) || se.Need != base.Size() {
		t.Errorf("no room: %v", err)
	}
	if len(s.Requests()) != mark {
		t.Error("a set the disk cannot hold asked the server for bytes")
	}
}

// TestVerifyInstalled: a folder is the set when every file has its size
// and checksum (sha256 or Git blob id); the first that differs is named.
func TestVerifyInstalled(t *testing.T) {
	s := hubtest.Start(t)
	set := bundleSet(t, s)
	models, work := dirs(t)
	j, err := download.PrepareSet(work, models, set)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background(), quick, nil); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(models, set.Name)
	if err := set.VerifyInstalled(context.Background(), dir); err != nil {
		t.Fatalf("the installed set: %v", err)
	}
	// A file kept in Git (checked by its blob id), same size, one byte off.
	cfg := filepath.Join(dir, "model_config.json")
	b, _ := os.ReadFile(cfg)
	b[0] ^= 1
	os.WriteFile(cfg, b, 0o644)
	var fe *download.FileError
	var ce *download.ChecksumError
	if err := set.VerifyInstalled(context.Background(), dir); !errors.As(err, &fe) || fe.Path != "model_config.json" || !errors.As(err, &ce) || ce.Kind != "git blob id" {
		t.Errorf("a changed Git file: %v", err)
	}
	b[0] ^= 1
	os.WriteFile(cfg, b, 0o644)
	os.Remove(filepath.Join(dir, "swa", "sin_sliding.npy"))
	if err := set.VerifyInstalled(context.Background(), dir); !errors.As(err, &fe) || fe.Path != "swa/sin_sliding.npy" {
		t.Errorf("a missing file: %v", err)
	}
}
