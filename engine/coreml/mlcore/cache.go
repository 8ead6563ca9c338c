package mlcore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"anechat/engine/model/mmap"
	"anechat/internal/atomicfile"
)

// CompileFunc compiles a model package and returns the directory it wrote
// the compiled model to; the cache takes that directory over (moves or
// copies it, then removes it). Runtime.Compile is one.
type CompileFunc func(ctx context.Context, pkg string) (string, error)

// Cache keeps compiled models (.mlmodelc directories) under a directory the
// caller chooses (the data dir's cache folder), one entry per package
// content, so +[MLModel compileModelAtURL:error:] runs once per package.
//
// An entry is <Dir>/<key>/ holding model.mlmodelc/ and manifest.json (the
// entry's format, key and every file with its size). It is written in a
// temporary directory under Dir, synced, and renamed into place, so an
// entry either is complete or does not exist. An entry whose manifest is
// missing or disagrees with its files is removed and recompiled.
type Cache struct {
	dir     string
	compile CompileFunc
	log     *slog.Logger
	now     func() time.Time            // for the age of abandoned temporary entries
	rename  func(from, to string) error // os.Rename; tests make it fail to take the copy path

	mu sync.Mutex // one compile at a time per Cache
}

// NewCache returns a cache in dir (created when needed) that compiles with
// compile. log may be nil (slog.Default()).
func NewCache(dir string, compile CompileFunc, log *slog.Logger) *Cache {
	if log == nil {
		log = slog.Default()
	}
	return &Cache{dir: dir, compile: compile, log: log, now: time.Now, rename: os.Rename}
}

// Entry is a compiled model in the cache.
type Entry struct {
	Key   string // PackageKey of the package it was compiled from
	Path  string // the .mlmodelc directory to load
	Fresh bool   // compiled by this call (not found in the cache)
}

const (
	cacheFormat   = 1
	cacheKeyTag   = "anechat-mlcore-package-v1"
	compiledName  = "model.mlmodelc"
	manifestName  = "manifest.json"
	staleTmpAfter = 24 * time.Hour
)

var keyPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

type manifest struct {
	Format  int            `json:"format"`
	Key     string         `json:"key"`
	Package string         `json:"package"` // for people reading the cache; not checked
	Files   []manifestFile `json:"files"`
}

type manifestFile struct {
	Path   string `json:"path"` // slash-separated, relative to the entry
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // checked by Verify only (Compiled checks sizes)
}

// Compiled returns the compiled model of the package at pkg, compiling it
// (once) when the cache has no sound entry for its content.
func (c *Cache) Compiled(ctx context.Context, pkg string) (Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, err := PackageKey(ctx, pkg)
	if err != nil {
		return Entry{}, err
	}
	entry := filepath.Join(c.dir, key)
	if err := checkEntry(entry, key); err == nil {
		return Entry{Key: key, Path: filepath.Join(entry, compiledName)}, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("coreml: compiled model cache entry is damaged; recompiling", "entry", entry, "package", pkg, "reason", err)
		if err := os.RemoveAll(entry); err != nil {
			return Entry{}, fmt.Errorf("mlcore: removing damaged cache entry %s: %w", entry, err)
		}
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return Entry{}, fmt.Errorf("mlcore: compiled model cache: %w", err)
	}
	c.removeStale()

	out, err := c.compile(ctx, pkg)
	if err != nil {
		return Entry{}, fmt.Errorf("mlcore: compiling %s: %w", pkg, err)
	}
	defer os.RemoveAll(out) // whatever is left of the compiler's output
	if st, err := os.Stat(out); err != nil || !st.IsDir() {
		return Entry{}, fmt.Errorf("mlcore: compiling %s: the compiler's output %s is not a directory", pkg, out)
	}
	if err := c.install(ctx, key, pkg, out, entry); err != nil {
		return Entry{}, err
	}
	c.log.Info("coreml: compiled model cached", "package", pkg, "entry", entry)
	return Entry{Key: key, Path: filepath.Join(entry, compiledName), Fresh: true}, nil
}

// Evict removes the entry with this key (no error if there is none), so
// that the next Compiled recompiles: for an entry whose files look whole
// but that Core ML cannot load.
func (c *Cache) Evict(key string) error {
	if !keyPattern.MatchString(key) {
		return fmt.Errorf("mlcore: %q is not a cache key", key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.RemoveAll(filepath.Join(c.dir, key)); err != nil {
		return fmt.Errorf("mlcore: evicting cache entry: %w", err)
	}
	return nil
}

// Verify reads every file of an entry and checks it against the sha256 its
// manifest recorded when it was installed: nil means the entry is exactly
// what the compiler wrote. LoadPackage uses it to tell a damaged entry
// (recompile) from a model Core ML refuses for another reason (report).
func (c *Cache) Verify(ctx context.Context, e Entry) error {
	if !keyPattern.MatchString(e.Key) {
		return fmt.Errorf("mlcore: %q is not a cache key", e.Key)
	}
	dir := filepath.Join(c.dir, e.Key)
	m, err := readManifest(dir, e.Key)
	if err != nil {
		return fmt.Errorf("mlcore: cache entry %s: %w", dir, err)
	}
	for _, f := range m.Files {
		sum, err := mmap.SHA256(ctx, filepath.Join(dir, filepath.FromSlash(f.Path)), nil)
		if err != nil {
			return fmt.Errorf("mlcore: cache entry %s: %w", dir, err)
		}
		if sum != f.SHA256 {
			return fmt.Errorf("mlcore: cache entry %s: %s has changed since it was compiled", dir, f.Path)
		}
	}
	return nil
}

// install moves the compiler's output into a temporary entry, writes its
// manifest and installs the entry whole (atomicfile.Dir: every file and
// directory synced, renamed into place, the cache directory synced).
func (c *Cache) install(ctx context.Context, key, pkg, out, entry string) error {
	d, err := atomicfile.CreateDir(entry)
	if err != nil {
		return fmt.Errorf("mlcore: compiled model cache: %w", err)
	}
	defer d.Abort()
	tmp := d.Name()
	dst := filepath.Join(tmp, compiledName)
	if err := c.rename(out, dst); err != nil {
		// Another file system (the compiler writes to $TMPDIR): copy.
		if err := copyTree(ctx, out, dst); err != nil {
			return fmt.Errorf("mlcore: copying the compiled model into the cache: %w", err)
		}
	}
	m := manifest{Format: cacheFormat, Key: key, Package: pkg}
	err = filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tmp, path)
		sum, err := mmap.SHA256(ctx, path, nil)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, manifestFile{Path: filepath.ToSlash(rel), Size: info.Size(), SHA256: sum})
		return nil
	})
	if err != nil {
		return fmt.Errorf("mlcore: compiled model: %w", err)
	}
	if len(m.Files) == 0 {
		return fmt.Errorf("mlcore: compiling %s produced no files", pkg)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, manifestName), data, 0o644); err != nil {
		return fmt.Errorf("mlcore: writing the cache manifest: %w", err)
	}
	if err := d.Commit(); err != nil {
		var placed *atomicfile.SyncDirError
		switch {
		case errors.As(err, &placed):
			return fmt.Errorf("mlcore: syncing the cache directory: %w", err)
		case checkEntry(entry, key) == nil:
			return nil // another process installed the same entry meanwhile
		}
		return fmt.Errorf("mlcore: installing the cache entry: %w", err)
	}
	return nil
}

// removeStale removes temporary entries left by a crash (older than a day,
// so that another process's compile in progress is left alone).
func (c *Cache) removeStale() {
	list, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	for _, d := range list {
		if !strings.HasPrefix(d.Name(), atomicfile.TempPrefix) {
			continue
		}
		info, err := d.Info()
		if err != nil || c.now().Sub(info.ModTime()) < staleTmpAfter {
			continue
		}
		path := filepath.Join(c.dir, d.Name())
		if err := os.RemoveAll(path); err == nil {
			c.log.Info("coreml: removed an abandoned temporary cache entry", "path", path)
		}
	}
}

// checkEntry returns nil if the entry at dir is whole: its manifest has
// this format and key, and every file it lists exists with its size. A
// missing entry gives an error matching fs.ErrNotExist.
func checkEntry(dir, key string) error {
	m, err := readManifest(dir, key)
	if err != nil {
		return err
	}
	for _, f := range m.Files {
		st, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return fmt.Errorf("%s: %v", f.Path, err)
		}
		if !st.Mode().IsRegular() || st.Size() != f.Size {
			return fmt.Errorf("%s is %d bytes, the manifest says %d", f.Path, st.Size(), f.Size)
		}
	}
	return nil
}

// readManifest reads and checks an entry's manifest (format, key, file
// paths inside the compiled model).
func readManifest(dir, key string) (manifest, error) {
	var m manifest
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(dir); serr == nil {
				return m, errors.New("the manifest is missing")
			}
		}
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("the manifest is unreadable: %v", err)
	}
	if m.Format != cacheFormat {
		return m, fmt.Errorf("the manifest has format %d, want %d", m.Format, cacheFormat)
	}
	if m.Key != key {
		return m, fmt.Errorf("the manifest is for key %s", m.Key)
	}
	if len(m.Files) == 0 {
		return m, errors.New("the manifest lists no files")
	}
	for _, f := range m.Files {
		if !strings.HasPrefix(f.Path, compiledName+"/") || strings.Contains(f.Path, "..") {
			return m, fmt.Errorf("the manifest lists %q outside %s", f.Path, compiledName)
		}
	}
	return m, nil
}

// PackageKey returns the cache key of a model package: the hex sha256 of a
// version tag and, for every file under pkg in path order, its
// slash-separated path, its size and its bytes. pkg may be a directory
// (.mlpackage) or a single file (.mlmodel). Symbolic links and special
// files are refused.
func PackageKey(ctx context.Context, pkg string) (string, error) {
	root, err := os.Lstat(pkg)
	if err != nil {
		return "", fmt.Errorf("mlcore: model package: %w", err)
	}
	if !root.IsDir() && !root.Mode().IsRegular() {
		return "", fmt.Errorf("mlcore: model package %s is neither a directory nor a file", pkg)
	}
	h := sha256.New()
	io.WriteString(h, cacheKeyTag)
	h.Write([]byte{0})
	files := 0
	err = filepath.WalkDir(pkg, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is a symbolic link or special file; a model package holds only directories and regular files", path)
		}
		rel, err := filepath.Rel(pkg, path)
		if err != nil {
			return err
		}
		files++
		return hashFile(ctx, h, path, filepath.ToSlash(rel))
	})
	if err != nil {
		return "", fmt.Errorf("mlcore: hashing model package %s: %w", pkg, err)
	}
	if files == 0 {
		return "", fmt.Errorf("mlcore: model package %s has no files", pkg)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashFile hashes one file of a model package, opened only if it is a
// regular file (the walk saw one, but another may be put in its place).
func hashFile(ctx context.Context, h io.Writer, path, rel string) error {
	f, err := mmap.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	io.WriteString(h, rel)
	var size [9]byte
	binary.LittleEndian.PutUint64(size[1:], uint64(st.Size()))
	h.Write(size[:])
	n, err := io.Copy(h, ctxReader{ctx, f})
	if err != nil {
		return err
	}
	if n != st.Size() {
		return fmt.Errorf("%s changed while it was read", path)
	}
	return nil
}

// ctxReader stops a long read when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// copyTree copies the directory src to dst (which must not exist); the
// install's commit syncs the copies.
func copyTree(ctx context.Context, src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(ctx, path, target)
		}
		return fmt.Errorf("%s is a symbolic link or special file", path)
	})
}

func copyFile(ctx context.Context, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, ctxReader{ctx, in}); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
