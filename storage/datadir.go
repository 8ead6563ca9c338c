package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"anechat/storage/db"
)

// Names inside the data directory.
const (
	DBFile    = "anechat.db" // the SQLite database
	KVDir     = "kv"         // KV snapshot files
	ModelsDir = "models"     // model files the user adds
)

// DataDir resolves, creates and checks the data directory: flagValue (the
// --data-dir flag) if set, else $ANECHAT_HOME, else
// ~/Library/Application Support/anechat on macOS and $XDG_DATA_HOME/anechat
// (default ~/.local/share/anechat) elsewhere. It creates the directory with
// its kv/ and models/ subdirectories and fails with ErrNotWritable (or
// ErrDiskFull) naming the directory if a file cannot be created in it.
//
// When the disk is full it first reclaims what anechat itself left in kv/
// (reclaimKV: files of interrupted saves), logging each file to log (nil:
// slog.Default()), and tries again: such leftovers must not keep the disk
// full, and the start-up cleaning that would remove them comes after this
// check.
func DataDir(flagValue string, log *slog.Logger) (string, error) {
	dir, err := resolveDataDir(flagValue, os.Getenv, runtime.GOOS, os.UserHomeDir)
	if err != nil {
		return "", err
	}
	if log == nil {
		log = slog.Default()
	}
	if err := prepareDataDir(dir, probeWrite, log); err != nil {
		return "", err
	}
	return dir, nil
}

// ResolveDataDir names the data directory DataDir would use (flagValue,
// else $ANECHAT_HOME, else the OS default) without creating or checking
// it: for a command that only reads from it if it is there.
func ResolveDataDir(flagValue string) (string, error) {
	return resolveDataDir(flagValue, os.Getenv, runtime.GOOS, os.UserHomeDir)
}

// resolveDataDir picks the data directory without touching the disk.
func resolveDataDir(flagValue string, getenv func(string) string, goos string, home func() (string, error)) (string, error) {
	pick := func(p string) (string, error) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", &Error{Op: "resolve data directory", Path: p, Kind: ErrInvalid, Err: err,
				Hint: "pass an absolute directory with --data-dir or ANECHAT_HOME"}
		}
		return abs, nil
	}
	if flagValue != "" {
		return pick(flagValue)
	}
	if v := getenv("ANECHAT_HOME"); v != "" {
		return pick(v)
	}
	if goos != "darwin" {
		if v := getenv("XDG_DATA_HOME"); v != "" && filepath.IsAbs(v) {
			return filepath.Join(v, "anechat"), nil
		}
	}
	h, err := home()
	if err != nil || h == "" {
		if err == nil {
			err = errors.New("home directory unknown")
		}
		return "", &Error{Op: "resolve data directory", Kind: ErrInvalid, Err: err,
			Hint: "set --data-dir or ANECHAT_HOME to the directory anechat should keep its data in"}
	}
	if goos == "darwin" {
		return filepath.Join(h, "Library", "Application Support", "anechat"), nil
	}
	return filepath.Join(h, ".local", "share", "anechat"), nil
}

// prepareDataDir creates dir, kv/ and models/ and proves dir writable with
// probe (MkdirAll succeeds on an existing read-only directory). On a full
// disk it reclaims kv/ leftovers and probes again.
func prepareDataDir(dir string, probe func(dir string) error, log *slog.Logger) error {
	for _, d := range []string{dir, filepath.Join(dir, KVDir), filepath.Join(dir, ModelsDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return dirError("create data directory", d, err)
		}
	}
	err := probe(dir)
	if errors.Is(err, ErrDiskFull) {
		rep := reclaimKV(context.Background(), dir)
		rep.Log(log, KVPath(dir))
		if len(rep.FilesDeleted) > 0 {
			err = probe(dir)
		}
	}
	return err
}

// probeWrite creates, writes and removes a probe file in dir.
func probeWrite(dir string) error {
	f, err := os.CreateTemp(dir, ".write-probe-*")
	if err != nil {
		return dirError("write to data directory", dir, err)
	}
	name := f.Name()
	_, werr := f.Write([]byte("anechat"))
	cerr := f.Close()
	os.Remove(name)
	if werr != nil {
		return dirError("write to data directory", dir, werr)
	}
	if cerr != nil {
		return dirError("write to data directory", dir, cerr)
	}
	return nil
}

// reclaimKV frees what anechat left in the kv/ of data dir dir, on a disk
// that may be too full to open the database as usual (SQLite cannot create
// its shared-memory file): it runs Reconcile when the database opens, else
// reads the rows without writing anything (an immutable read of the main
// file, only when no write-ahead log may hold newer rows) and removes the
// old files no row points at, else removes only temporary files of writers
// that are gone. Nothing another process may be writing is touched
// (ReconcileMinAge's rules), so a young leftover stays.
func reclaimKV(ctx context.Context, dir string) ReconcileReport {
	kvDir := KVPath(dir)
	none := ReconcileReport{RowsDeleted: []ReconcileEntry{}, FilesDeleted: []ReconcileEntry{}, Skipped: []ReconcileEntry{}}
	if _, err := os.Stat(DBPath(dir)); err != nil {
		return none // no database: nothing in kv/ is known to be ours
	}
	if d, err := Open(ctx, DBPath(dir)); err == nil {
		defer d.Close()
		rep, _ := d.Reconcile(ctx, kvDir)
		return rep
	}
	rep := none
	keep, err := readSnapshotPaths(ctx, DBPath(dir))
	tempsOnly := err != nil
	if tempsOnly {
		keep = map[string]bool{}
	}
	cleanFiles(ctx, kvDir, keep, time.Now(), CleanAge, tempsOnly, &rep)
	return rep
}

// readSnapshotPaths reads the file paths of the snapshot rows of the
// database at path without writing to the disk. It refuses when a
// non-empty write-ahead log exists: rows there are invisible to an
// immutable read, and their files must not look unindexed.
func readSnapshotPaths(ctx context.Context, path string) (map[string]bool, error) {
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 || err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("a write-ahead log may hold rows an immutable read does not see")
	}
	if err := checkHeader(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("immutable", "1")
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	pool, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	fsys, err := migrationsFS()
	if err != nil {
		return nil, err
	}
	migs, err := loadMigrations(fsys)
	if err != nil {
		return nil, err
	}
	if v, err := schemaVersion(ctx, pool, path, len(migs)); err != nil || v != len(migs) {
		return nil, fmt.Errorf("schema version %d, want %d: %v", v, len(migs), err)
	}
	rows, err := db.New(pool).ListSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	keep := make(map[string]bool, len(rows))
	for _, r := range rows {
		keep[filepath.ToSlash(r.FilePath)] = true
	}
	return keep, nil
}

// dirError types a failure to create or write a directory; anything that is
// not disk full or I/O is reported as not writable.
func dirError(op, dir string, err error) error {
	kind := classify(err)
	if kind == nil {
		kind = ErrNotWritable
	}
	return &Error{Op: op, Path: dir, Kind: kind, Hint: hint(kind, dir), Err: err}
}

// DBPath is the database file inside the data directory dir.
func DBPath(dir string) string { return filepath.Join(dir, DBFile) }

// KVPath is the snapshot directory inside the data directory dir.
func KVPath(dir string) string { return filepath.Join(dir, KVDir) }

// ModelsPath is the models directory inside the data directory dir.
func ModelsPath(dir string) string { return filepath.Join(dir, ModelsDir) }
