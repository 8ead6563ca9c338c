package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"anechat/storage/db"
)

// Info describes a database file without changing it (for `anechat doctor`).
type Info struct {
	Path           string `json:"path"`
	Exists         bool   `json:"exists"`
	SizeBytes      int64  `json:"sizeBytes"`      // the file plus its -wal file
	SchemaVersion  int    `json:"schemaVersion"`  // 0 for a new database
	KnownVersion   int    `json:"knownVersion"`   // the newest schema this binary has
	NeedsMigration bool   `json:"needsMigration"` // Open will migrate it
	// Row counts, filled when the schema is the current one.
	Models        int64 `json:"models"`
	Conversations int64 `json:"conversations"`
	Messages      int64 `json:"messages"`
	Prompts       int64 `json:"prompts"`
	Snapshots     int64 `json:"snapshots"`
	SnapshotBytes int64 `json:"snapshotBytes"`
}

// Inspect reports on the database at path without creating, migrating or
// writing it. A missing file is not an error (Exists is false). Errors are
// Open's typed errors (ErrCorrupt, ErrForeign, ErrSchemaTooNew, ...); Info
// holds what was learnt before the error.
func Inspect(ctx context.Context, path string) (Info, error) {
	fsys, err := migrationsFS()
	if err != nil {
		return Info{}, err
	}
	migs, err := loadMigrations(fsys)
	if err != nil {
		return Info{}, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Info{}, fmt.Errorf("storage: inspect database %s: %w", path, err)
	}
	info := Info{Path: abs, KnownVersion: len(migs)}
	st, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return info, nil
	}
	if err != nil {
		return info, wrapErr("inspect database", abs, err)
	}
	info.Exists = true
	info.SizeBytes = st.Size()
	if wal, err := os.Stat(abs + "-wal"); err == nil {
		info.SizeBytes += wal.Size()
	}
	if err := checkHeader(abs); err != nil {
		return info, err
	}
	if st.Size() == 0 {
		info.NeedsMigration = info.KnownVersion > 0
		return info, nil
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(1)")
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	pool, err := sql.Open("sqlite", u.String())
	if err != nil {
		return info, wrapErr("inspect database", abs, err)
	}
	defer pool.Close()
	info.SchemaVersion, err = schemaVersion(ctx, pool, abs, info.KnownVersion)
	if err != nil {
		return info, err
	}
	info.NeedsMigration = info.SchemaVersion < info.KnownVersion
	if info.NeedsMigration {
		return info, nil
	}
	c, err := db.New(pool).CountRows(ctx)
	if err != nil {
		return info, wrapErr("inspect database", abs, err)
	}
	info.Models, info.Conversations, info.Messages, info.Prompts, info.Snapshots, info.SnapshotBytes =
		c.Models, c.Conversations, c.Messages, c.Prompts, c.Snapshots, c.SnapshotBytes
	return info, nil
}

// Info reports on the open database (as Inspect does for a file).
func (d *DB) Info(ctx context.Context) (Info, error) {
	info := Info{Path: d.path, Exists: true, SchemaVersion: d.version, KnownVersion: d.version}
	if st, err := os.Stat(d.path); err == nil {
		info.SizeBytes = st.Size()
	}
	if wal, err := os.Stat(d.path + "-wal"); err == nil {
		info.SizeBytes += wal.Size()
	}
	c, err := d.q.CountRows(ctx)
	if err != nil {
		return info, d.fail("count rows", err)
	}
	info.Models, info.Conversations, info.Messages, info.Prompts, info.Snapshots, info.SnapshotBytes =
		c.Models, c.Conversations, c.Messages, c.Prompts, c.Snapshots, c.SnapshotBytes
	return info, nil
}

// migrationsFS is the embedded migrations directory.
func migrationsFS() (fs.FS, error) {
	sub, err := fs.Sub(embeddedMigrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("storage: embedded migrations: %w", err)
	}
	return sub, nil
}
