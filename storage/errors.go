package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"modernc.org/sqlite"
)

// Sentinel kinds of storage failure. Every failure that a user can act on is
// returned as an *Error (or *SchemaError) that matches one of these with
// errors.Is, names the file or directory concerned and says what to do.
var (
	// ErrCorrupt: the database file is not a SQLite database or is damaged.
	ErrCorrupt = errors.New("database file is corrupt")
	// ErrForeign: the file is a SQLite database, but not one of anechat's.
	ErrForeign = errors.New("not an anechat database")
	// ErrSchemaTooNew: the database was written by a newer anechat.
	ErrSchemaTooNew = errors.New("database schema is newer than this anechat")
	// ErrNotWritable: a file or directory cannot be created or written.
	ErrNotWritable = errors.New("not writable")
	// ErrDiskFull: the volume has no space left.
	ErrDiskFull = errors.New("disk is full")
	// ErrLocked: another process holds the database.
	ErrLocked = errors.New("database is locked")
	// ErrIO: the operating system reported an I/O error.
	ErrIO = errors.New("I/O error")
	// ErrNotFound: the requested row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the caller passed a value storage cannot store.
	ErrInvalid = errors.New("invalid argument")
)

// Error is a storage failure: what storage was doing (Op), on which file or
// directory (Path), its kind (one of the Err* sentinels), a hint for the user
// and the underlying cause.
type Error struct {
	Op   string // e.g. "open database", "create data directory", "append message"
	Path string // the file or directory concerned
	Kind error  // ErrCorrupt, ErrDiskFull, ...
	Hint string // what the user can do about it
	Err  error  // the cause, may be nil
}

// Error formats the failure as one line: op, path, kind, cause and hint.
func (e *Error) Error() string {
	msg := "storage: " + e.Op
	if e.Path != "" {
		msg += ": " + e.Path
	}
	msg += ": " + e.Kind.Error()
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Unwrap exposes both the kind and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// SchemaError reports a database whose schema version is newer than the
// migrations this binary carries; the database is left untouched.
type SchemaError struct {
	Path    string
	Version int // the database's schema version (PRAGMA user_version)
	Known   int // the newest version this binary knows
}

// Error names the file, both versions and what to do.
func (e *SchemaError) Error() string {
	return fmt.Sprintf("storage: open database: %s: schema version %d is newer than this anechat knows (%d): "+
		"it was written by a newer anechat; upgrade anechat, or use another data directory with --data-dir or ANECHAT_HOME",
		e.Path, e.Version, e.Known)
}

// Is makes errors.Is(err, ErrSchemaTooNew) true.
func (e *SchemaError) Is(target error) bool { return target == ErrSchemaTooNew }

// SQLite primary result codes (sqlite3.h) that map to a kind.
const (
	sqliteBusy       = 5
	sqliteLocked     = 6
	sqliteReadOnly   = 8
	sqliteIOErr      = 10
	sqliteCorrupt    = 11
	sqliteFull       = 13
	sqliteCantOpen   = 14
	sqliteConstraint = 19
	sqliteNotADB     = 26
)

// classify returns the kind of err, or nil if it is none of the kinds users
// can act on (a constraint violation, a bug).
func classify(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteCorrupt, sqliteNotADB:
			return ErrCorrupt
		case sqliteFull:
			return ErrDiskFull
		case sqliteReadOnly, sqliteCantOpen:
			return ErrNotWritable
		case sqliteBusy, sqliteLocked:
			return ErrLocked
		case sqliteIOErr:
			return ErrIO
		case sqliteConstraint:
			return ErrInvalid // a duplicate, a dangling reference: the caller's values
		}
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return ErrDiskFull
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENOTDIR):
		return ErrNotWritable
	case errors.Is(err, syscall.EIO):
		return ErrIO
	}
	return nil
}

// hint says what a user can do about a failure of this kind at path.
func hint(kind error, path string) string {
	switch kind {
	case ErrCorrupt:
		return "move " + path + " and its -wal and -shm files aside (or restore a backup) and restart anechat; it creates a new, empty database"
	case ErrForeign:
		return "choose another data directory with --data-dir or ANECHAT_HOME"
	case ErrNotWritable:
		return "check the permissions of " + path + ", or choose another data directory with --data-dir or ANECHAT_HOME"
	case ErrDiskFull:
		return "free some space on the volume holding " + path + " and retry"
	case ErrLocked:
		return "another process is using the database; close other anechat windows and retry"
	case ErrIO:
		return "the disk holding " + path + " reported an error; check it, then retry"
	}
	return ""
}

// wrapErr turns err from operation op on path into an *Error when it is of a
// kind users can act on, and otherwise wraps it with op and path.
func wrapErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	var s *SchemaError
	if errors.As(err, &e) || errors.As(err, &s) {
		return err
	}
	if kind := classify(err); kind != nil {
		return &Error{Op: op, Path: path, Kind: kind, Hint: hint(kind, path), Err: err}
	}
	return fmt.Errorf("storage: %s: %s: %w", op, path, err)
}
