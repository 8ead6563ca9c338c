// Package atomicfile writes files and directories so that a crash leaves,
// under the destination's name, either what was there before or the whole
// new content, never a part of it (DESIGN.md invariant 6). The content is
// written under a temporary name in the destination's directory, synced,
// renamed into place, and the directory is synced so that the rename
// survives a power loss.
//
// Temporary names are TempPrefix + "<pid>-<hint>-<random>": pid is the
// writer's process id, hint the destination's name (cut short). The
// start-up cleaning of the KV folder (storage.Reconcile) reads the pid with
// TempWriter to leave alone the files of writers that are still running;
// the Core ML cache removes abandoned temporary directories by TempPrefix.
//
// The package imports nothing of the project, so that the engine, storage
// and the app can all use it.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// TempPrefix starts the name of every temporary file or directory this
// package makes.
const TempPrefix = ".tmp-"

// maxHint bounds the destination's name inside a temporary name, so that a
// destination name near the file system's limit (255 bytes) still gets a
// temporary name that fits.
const maxHint = 64

// TempWriter returns the process id in a temporary name this package made
// (TempPrefix + "<pid>-..."); ok is false for any other name, including
// the temporary files of older versions, which carry no pid.
func TempWriter(name string) (pid int, ok bool) {
	rest, found := strings.CutPrefix(name, TempPrefix)
	if !found {
		return 0, false
	}
	digits, _, found := strings.Cut(rest, "-")
	if !found {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != digits {
		return 0, false
	}
	return pid, true
}

// tempPattern returns the directory and the os.CreateTemp pattern of a
// temporary name for path. The hint is cut at a character boundary: some
// file systems (APFS) refuse names that are not UTF-8.
func tempPattern(path string) (dir, pattern string) {
	hint := filepath.Base(path)
	for len(hint) > maxHint {
		_, n := utf8.DecodeLastRuneInString(hint)
		hint = hint[:len(hint)-n]
	}
	return filepath.Dir(path), TempPrefix + strconv.Itoa(os.Getpid()) + "-" + hint + "-*"
}

// SyncDirError is the error of a commit or Rename that put its content in
// place but could not sync the directory: the new content is there and
// readable, but a power loss could still undo the rename. A caller that
// must not keep a file it cannot vouch for removes Path.
type SyncDirError struct {
	Path string // the destination, in place
	Err  error
}

// Error says the file is in place and what the sync failed with.
func (e *SyncDirError) Error() string {
	return fmt.Sprintf("%s is in place, but syncing its directory failed (a power loss could undo the write): %v", e.Path, e.Err)
}

// Unwrap returns the sync's error.
func (e *SyncDirError) Unwrap() error { return e.Err }

// SyncDir fsyncs the directory dir, which makes the renames and creations
// in it durable.
func SyncDir(dir string) error {
	if err := syncFile(dir); err != nil {
		return fmt.Errorf("atomicfile: sync directory: %w", err)
	}
	return nil
}

// Rename moves from, whose content the caller has synced, to to (replacing
// a file there) and syncs to's directory. When only that sync fails the
// error is a *SyncDirError.
func Rename(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	return syncParent(to)
}

// syncParent syncs the directory of path, which was just put in place.
func syncParent(path string) error {
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return &SyncDirError{Path: path, Err: err}
	}
	return nil
}

// File is a file being written under a temporary name, to be put in place
// whole by Commit. Abort (deferred) removes it if it was not committed.
type File struct {
	f    *os.File
	path string
	done bool // committed or aborted
}

// Create starts a file that Commit puts at path, with permissions perm,
// as a temporary file in path's directory.
func Create(path string, perm fs.FileMode) (*File, error) {
	dir, pattern := tempPattern(path)
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, fmt.Errorf("atomicfile: write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("atomicfile: write %s: %w", path, err)
	}
	return &File{f: f, path: path}, nil
}

// Write writes p to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// Name returns the temporary file's path, for messages.
func (f *File) Name() string { return f.f.Name() }

// Commit syncs and closes the temporary file, renames it to the
// destination (replacing a file there) and syncs the directory. On an
// error before the rename the temporary file is removed and the
// destination is untouched; when only the directory's sync fails the
// error is a *SyncDirError and the new content is in place.
func (f *File) Commit() error {
	return f.commit(os.Rename)
}

// CommitNew is Commit for a destination that must not exist yet: it fails
// with an error matching fs.ErrExist, leaving the destination as it is,
// when another writer put a file there first. (The file is hard-linked into
// place, which fails rather than replaces.)
func (f *File) CommitNew() error {
	return f.commit(func(tmp, path string) error {
		if err := os.Link(tmp, path); err != nil {
			return err
		}
		os.Remove(tmp) // path keeps the file
		return nil
	})
}

func (f *File) commit(place func(tmp, path string) error) error {
	if f.done {
		return fmt.Errorf("atomicfile: %s was already committed or aborted", f.path)
	}
	f.done = true
	tmp := f.f.Name()
	err := f.f.Sync()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = place(tmp, f.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: write %s: %w", f.path, err)
	}
	return syncParent(f.path)
}

// Abort closes and removes the temporary file; after Commit it does
// nothing, so it can be deferred right after Create.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.f.Close()
	os.Remove(f.f.Name())
}

// WriteFile writes data to path with permissions perm, whole or not at
// all (Create, Write, Commit).
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return writeFile(path, data, perm, (*File).Commit)
}

// WriteNewFile is WriteFile for a path that must not exist yet (CommitNew):
// when another writer put a file there first, it fails with an error
// matching fs.ErrExist and leaves that file.
func WriteNewFile(path string, data []byte, perm fs.FileMode) error {
	return writeFile(path, data, perm, (*File).CommitNew)
}

func writeFile(path string, data []byte, perm fs.FileMode, commit func(*File) error) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("atomicfile: write %s: %w", path, err)
	}
	return commit(f)
}

// Dir is a directory tree being built under a temporary name, to be put in
// place whole by Commit. Abort (deferred) removes it if it was not
// committed.
type Dir struct {
	tmp, path string
	done      bool // committed or aborted
}

// CreateDir starts a directory that Commit puts at path, as a temporary
// directory (mode 0700) in path's parent; the caller fills Name().
func CreateDir(path string) (*Dir, error) {
	dir, pattern := tempPattern(path)
	tmp, err := os.MkdirTemp(dir, pattern)
	if err != nil {
		return nil, fmt.Errorf("atomicfile: create %s: %w", path, err)
	}
	return &Dir{tmp: tmp, path: path}, nil
}

// Name returns the temporary directory's path, to fill.
func (d *Dir) Name() string { return d.tmp }

// Commit syncs every file and directory of the tree, renames it to the
// destination and syncs the parent. The rename fails when a non-empty
// directory is there already (another writer installed it first: the
// caller checks what is there). On an error before the rename is done the
// temporary tree is removed; when only the parent's sync fails the error
// is a *SyncDirError and the tree is in place.
func (d *Dir) Commit() error {
	if d.done {
		return fmt.Errorf("atomicfile: %s was already committed or aborted", d.path)
	}
	d.done = true
	err := syncTree(d.tmp)
	if err == nil {
		err = os.Rename(d.tmp, d.path)
	}
	if err != nil {
		os.RemoveAll(d.tmp)
		return fmt.Errorf("atomicfile: create %s: %w", d.path, err)
	}
	return syncParent(d.path)
}

// Abort removes the temporary tree; after Commit it does nothing, so it
// can be deferred right after CreateDir.
func (d *Dir) Abort() {
	if d.done {
		return
	}
	d.done = true
	os.RemoveAll(d.tmp)
}

// syncTree fsyncs every regular file and directory under root, root last.
// Anything else (a symbolic link, a named pipe) is refused: a tree to
// install holds files and directories, and opening a pipe would block.
func syncTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			dirs = append(dirs, path)
			return nil
		case d.Type().IsRegular():
			return syncFile(path)
		}
		return fmt.Errorf("%s is neither a regular file nor a directory", path)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncFile(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}

// syncFile fsyncs the file or directory at path.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
