package mmap

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"unsafe"
)

// ErrChanged is wrapped by every *ChangedError: errors.Is(err, ErrChanged)
// tells a caller that the model must be reloaded.
var ErrChanged = errors.New("model file changed on disk")

// ChangedError reports that a mapped file is no longer the file that was
// mapped: it was truncated, rewritten, replaced or removed after it was
// loaded. The weights in memory can no longer be trusted (or read at all),
// so the model has to be loaded again.
type ChangedError struct {
	// Path is the file.
	Path string
	// Reason says what changed ("its size changed from 1185376 to 4096
	// bytes", ...).
	Reason string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("model file %s changed on disk after it was loaded (%s): reload the model", e.Path, e.Reason)
}

// Unwrap returns ErrChanged.
func (e *ChangedError) Unwrap() error { return ErrChanged }

// Mapping is a whole file mapped read-only into memory (or read into it,
// where mmap is not available).
type Mapping struct {
	path  string
	data  []byte
	info  os.FileInfo // the file as it was mapped
	unmap func() error
}

// Map maps the regular file at path read-only (opened as Open opens it: a
// named pipe or device gives a *NotRegularError, never a blocked open). An
// empty file maps to an empty slice. Its bytes must not be written to, nor
// used after Close.
func Map(path string) (*Mapping, error) {
	fh, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	data, unmap, err := mapFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return &Mapping{path: path, data: data, info: st, unmap: unmap}, nil
}

// Path is the mapped file's path.
func (m *Mapping) Path() string { return m.path }

// Data returns the file's bytes (nil after Close).
func (m *Mapping) Data() []byte { return m.data }

// Close unmaps the file. It is safe to call more than once.
func (m *Mapping) Close() error {
	if m.unmap == nil {
		return nil
	}
	u := m.unmap
	m.unmap, m.data = nil, nil
	return u()
}

// Check reports, as a *ChangedError, whether the file at the mapping's path
// is no longer the file that was mapped: another file in its place, another
// size or modification time, or no file at all. It costs one stat call, so
// callers run it before each generation. A file that was replaced (renamed
// over) or removed keeps its old mapping valid, but the model on disk is not
// the one loaded any more: reloading is what the user wants then too.
func (m *Mapping) Check() error {
	now, err := os.Stat(m.path)
	switch {
	case err != nil:
		return &ChangedError{Path: m.path, Reason: fmt.Sprintf("it can no longer be read: %v", err)}
	case !os.SameFile(now, m.info):
		return &ChangedError{Path: m.path, Reason: "another file was put in its place"}
	case now.Size() != m.info.Size():
		return &ChangedError{Path: m.path, Reason: fmt.Sprintf("its size changed from %d to %d bytes", m.info.Size(), now.Size())}
	case !now.ModTime().Equal(m.info.ModTime()):
		return &ChangedError{Path: m.path, Reason: fmt.Sprintf("it was modified at %s", now.ModTime().Format("2006-01-02 15:04:05.000"))}
	}
	return nil
}

// contains reports whether addr lies in the mapped bytes.
func (m *Mapping) contains(addr uintptr) bool {
	if len(m.data) == 0 {
		return false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m.data)))
	return addr >= base && addr-base < uintptr(len(m.data))
}

// Guard makes a fault on the memory of maps during the rest of the calling
// function an error instead of a crash. Use it as
//
//	func read(...) (err error) {
//		defer mmap.Guard(&err, maps...)()
//		...
//	}
//
// Guard turns on debug.SetPanicOnFault for the calling goroutine; the
// function it returns, deferred, restores the previous setting and recovers
// a fault panic whose address lies in one of maps into *errp, as a
// *ChangedError naming that file. Any other panic goes on unchanged (it is
// a bug, not a changed file). Faults on other goroutines are not covered:
// each goroutine that reads mapped memory needs its own guard, or must pass
// its panic to a guarded one (engine/cpu's Pool does).
func Guard(errp *error, maps ...*Mapping) func() {
	old := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(old)
		r := recover()
		if r == nil {
			return
		}
		if err := Fault(r, maps...); err != nil {
			*errp = err
			return
		}
		panic(r)
	}
}

// Fault classifies a recovered panic value: when it is a memory fault (a
// runtime.Error with an Addr method, possibly wrapped) at an address in one
// of maps, Fault returns the *ChangedError for that file; otherwise nil.
func Fault(r any, maps ...*Mapping) error {
	err, ok := r.(error)
	if !ok {
		return nil
	}
	var fault interface{ Addr() uintptr }
	if !errors.As(err, &fault) {
		return nil
	}
	addr := fault.Addr()
	for _, m := range maps {
		if m == nil || !m.contains(addr) {
			continue
		}
		if cerr := m.Check(); cerr != nil {
			return cerr
		}
		// Same inode, size and time, yet unreadable: the file was changed
		// and restored within the clock's resolution, or the disk failed.
		return &ChangedError{Path: m.path, Reason: "reading its mapped bytes failed (it was truncated, or the disk returned an error)"}
	}
	return nil
}
