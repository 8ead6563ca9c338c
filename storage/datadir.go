package storage

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
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
func DataDir(flagValue string) (string, error) {
	dir, err := resolveDataDir(flagValue, os.Getenv, runtime.GOOS, os.UserHomeDir)
	if err != nil {
		return "", err
	}
	if err := prepareDataDir(dir); err != nil {
		return "", err
	}
	return dir, nil
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

// prepareDataDir creates dir, kv/ and models/ and proves dir writable by
// creating and removing a probe file (MkdirAll succeeds on an existing
// read-only directory).
func prepareDataDir(dir string) error {
	for _, d := range []string{dir, filepath.Join(dir, KVDir), filepath.Join(dir, ModelsDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return dirError("create data directory", d, err)
		}
	}
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
