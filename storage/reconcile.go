package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"anechat/internal/atomicfile"
)

// CleanAge is how long ago a file in kv/ that no row points at must have
// been last modified before Reconcile removes it. Several processes (the
// app, CLI runs) share a data dir: a file younger than this may be a
// snapshot another process is writing, or has renamed into place and is
// about to index. A save takes seconds at most, so a few minutes is ample.
const CleanAge = 5 * time.Minute

// ReconcileEntry is one path Reconcile removed or left alone, and why.
type ReconcileEntry struct {
	Path   string // relative to the kv directory, slash-separated
	Reason string
}

// ReconcileReport says what Reconcile removed and what it could not check.
type ReconcileReport struct {
	// RowsDeleted are rows whose file is missing, not a regular file, a
	// symlink loop or of another size than the row says (incomplete).
	RowsDeleted []ReconcileEntry
	// FilesDeleted are old files no row pointed at (a save interrupted
	// between writing and indexing, a stray file) and temporary files of
	// writes whose process is gone.
	FilesDeleted []ReconcileEntry
	// Skipped are entries that could not be checked or removed (unreadable,
	// on a read-only kv/, a row that could not be deleted on a full disk):
	// they are left as they are, and the rest was reconciled.
	Skipped []ReconcileEntry
}

// Reconcile makes the index and kvDir agree, for use at start:
// ReconcileMinAge with CleanAge, safe while other processes write
// snapshots into kvDir.
func (d *DB) Reconcile(ctx context.Context, kvDir string) (ReconcileReport, error) {
	return d.ReconcileMinAge(ctx, kvDir, CleanAge)
}

// ReconcileMinAge makes the index and kvDir agree. It deletes the rows whose
// file is missing or unusable (not a regular file, a symlink loop, a size
// other than the row's Bytes: incomplete), and deletes the files (at any
// depth) that no row points at and that were last modified at least minAge
// ago, except the temporary files of writers that are still running (named
// by atomicfile.TempWriter, as engine/kv writes through atomicfile) and hidden files that are not temporary files (.DS_Store and
// the like are not ours). A missing kvDir is created; a kvDir that is a
// symlink is followed, never removed.
//
// It fails only when kvDir cannot be created, the rows cannot be listed or
// ctx ends: an entry it cannot check or remove is reported in Skipped and
// the rest is reconciled, so one bad entry does not turn the cache off.
func (d *DB) ReconcileMinAge(ctx context.Context, kvDir string, minAge time.Duration) (ReconcileReport, error) {
	rep := ReconcileReport{RowsDeleted: []ReconcileEntry{}, FilesDeleted: []ReconcileEntry{}, Skipped: []ReconcileEntry{}}
	if err := os.MkdirAll(kvDir, 0o755); err != nil {
		return rep, dirError("create KV directory", kvDir, err)
	}
	rows, err := d.ListSnapshots(ctx)
	if err != nil {
		return rep, err
	}
	keep := make(map[string]bool, len(rows))
	for _, r := range rows {
		rel := filepath.ToSlash(r.FilePath)
		st, err := os.Stat(filepath.Join(kvDir, filepath.FromSlash(r.FilePath)))
		var why string
		switch {
		case err == nil && st.Mode().IsRegular() && st.Size() == r.Bytes:
			keep[rel] = true
			continue
		case err == nil && !st.Mode().IsRegular():
			why = "not a regular file"
		case err == nil:
			why = fmt.Sprintf("file of %d bytes, the index says %d: incomplete or damaged", st.Size(), r.Bytes)
		case errors.Is(err, fs.ErrNotExist):
			why = "file missing"
		case errors.Is(err, syscall.ELOOP):
			why = "the file is a symlink loop"
		default:
			// Unreadable now (permissions, I/O), perhaps not for good:
			// keep the row; a resume that fails to load it drops it.
			keep[rel] = true
			rep.Skipped = append(rep.Skipped, ReconcileEntry{rel, "cannot check the file: " + err.Error()})
			continue
		}
		err = d.DeleteSnapshot(ctx, r.ID)
		if errors.Is(err, ErrNotFound) {
			continue // another process dropped it meanwhile (replaced, evicted): not news
		}
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			keep[rel] = true
			rep.Skipped = append(rep.Skipped, ReconcileEntry{rel, why + "; its row could not be deleted: " + err.Error()})
			continue
		}
		rep.RowsDeleted = append(rep.RowsDeleted, ReconcileEntry{rel, why})
	}
	return rep, cleanFiles(ctx, kvDir, keep, d.now(), minAge, false, &rep)
}

// cleanFiles removes the files under kvDir that keep does not hold (paths
// relative to kvDir), last modified at least minAge before now, except the
// temporary files of running writers and hidden files that are not
// temporary files; with tempsOnly it removes only temporary files (when the
// rows are unknown). What it removes or cannot goes into rep.
func cleanFiles(ctx context.Context, kvDir string, keep map[string]bool, now time.Time, minAge time.Duration, tempsOnly bool, rep *ReconcileReport) error {
	// Directories that kept rows point into: one may be a symlink, which
	// the walk sees as an entry of its own.
	parents := map[string]bool{}
	for rel := range keep {
		for dir := path.Dir(rel); dir != "." && !parents[dir]; dir = path.Dir(dir) {
			parents[dir] = true
		}
	}
	// Walk what kvDir resolves to: WalkDir does not follow a root that is a
	// symlink (kv/ moved to another disk) and would report the link itself.
	root, err := filepath.EvalSymlinks(kvDir)
	if err != nil {
		rep.Skipped = append(rep.Skipped, ReconcileEntry{".", "cannot resolve the KV directory: " + err.Error()})
		return nil
	}
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		rel, rerr := filepath.Rel(root, p)
		if rerr != nil {
			return rerr
		}
		rel = filepath.ToSlash(rel)
		if err != nil {
			rep.Skipped = append(rep.Skipped, ReconcileEntry{rel, "cannot read: " + err.Error()})
			return nil // WalkDir goes on with whatever it could read
		}
		if e.IsDir() || keep[rel] || parents[rel] {
			return nil
		}
		name := e.Name()
		pid, isTemp := atomicfile.TempWriter(name)
		legacyTemp := !isTemp && strings.HasPrefix(name, atomicfile.TempPrefix)
		if (tempsOnly || strings.HasPrefix(name, ".")) && !isTemp && !legacyTemp {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile
		}
		if err != nil {
			rep.Skipped = append(rep.Skipped, ReconcileEntry{rel, "cannot check: " + err.Error()})
			return nil
		}
		if young(now, info.ModTime(), minAge) {
			return nil // perhaps another process's snapshot in flight
		}
		why := "no index row points at it (a save interrupted before indexing, or not a snapshot)"
		switch {
		case isTemp && processRunning(pid):
			return nil // its writer is still at it (or stalled): never ours to remove
		case isTemp:
			why = fmt.Sprintf("temporary file of an interrupted snapshot write (process %d is not running)", pid)
		case legacyTemp:
			why = "temporary file of an interrupted snapshot write"
		}
		if err := os.Remove(p); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				rep.Skipped = append(rep.Skipped, ReconcileEntry{rel, why + "; cannot remove it: " + err.Error()})
			}
			return nil
		}
		rep.FilesDeleted = append(rep.FilesDeleted, ReconcileEntry{rel, why})
		return nil
	})
	if err != nil {
		return wrapErr("clean KV directory", kvDir, err)
	}
	return nil
}

// young reports whether a file last modified at mod is under minAge old at
// now. A modification time far in the future (more than a day: a wrong
// clock, or a hostile file) does not keep a file young forever.
func young(now, mod time.Time, minAge time.Duration) bool {
	if minAge <= 0 {
		return false
	}
	age := now.Sub(mod)
	return age < minAge && age > -24*time.Hour
}

// Log writes what a reconcile of kvDir did to log, one Warn line per entry:
// what was dropped and why, what was left alone and why (each is said once:
// a dropped entry is gone by the next start).
func (r ReconcileReport) Log(log *slog.Logger, kvDir string) {
	full := func(rel string) string { return filepath.Join(kvDir, filepath.FromSlash(rel)) }
	for _, e := range r.RowsDeleted {
		log.Warn("kv snapshot dropped from the index", "path", full(e.Path), "reason", e.Reason)
	}
	for _, e := range r.FilesDeleted {
		log.Warn("kv snapshot file deleted", "path", full(e.Path), "reason", e.Reason)
	}
	for _, e := range r.Skipped {
		log.Warn("kv snapshot entry skipped", "path", full(e.Path), "reason", e.Reason)
	}
}
