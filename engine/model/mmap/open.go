package mmap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped by every *NotRegularError.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError reports a model or bundle file that is not a regular file:
// a named pipe, a device, a socket, a directory where a file was expected.
// Reading a named pipe blocks until another program writes to it (forever,
// when none does) and a device such as /dev/zero never ends, so such a file
// is refused before a byte is read.
type NotRegularError struct {
	// Path is the file.
	Path string
	// Mode is its type as stat reported it.
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file (%s): models must be regular files", e.Path, kindOf(e.Mode))
}

// Unwrap returns ErrNotRegular.
func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

// kindOf names a file type for a message.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "an irregular file"
}

// Open opens the file at path for reading if it is a regular file (a
// symbolic link is followed), else fails with a *NotRegularError naming it.
// It is how every model and bundle file is opened (Map, ReadFile, the
// checksums and fingerprints): the type is checked before opening, the file
// is opened non-blocking where the system has that flag (so a named pipe
// put in its place between the check and the open cannot block the open),
// and the opened file is checked again (what was opened is what is read).
// For a regular file the flag changes nothing: reads of one never block.
func Open(path string) (*os.File, error) {
	if _, err := Stat(path); err != nil {
		return nil, err
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		fh.Close()
		return nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return fh, nil
}

// Stat returns the file information of path (a symbolic link is followed)
// if it is a regular file, else a *NotRegularError naming it: for a check of
// a model file's presence and size that opens nothing.
func Stat(path string) (fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return st, nil
}

// ReadFile reads the regular file at path (opened by Open's rules), refusing
// one of more than limit bytes: a configuration, manifest or tokenizer file
// is read whole into memory, so its size is bounded by what such a file can
// reasonably hold, not by what the disk holds.
func ReadFile(path string, limit int64) ([]byte, error) {
	fh, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d such a file may have (it is damaged, or not the file its name says)", path, st.Size(), limit)
	}
	// The size can change under us: read at most limit+1 bytes to tell.
	data, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s grew past %d bytes while it was read", path, limit)
	}
	return data, nil
}

// sumBlock is how much SHA256 reads at a time: between two blocks it
// checks ctx and reports progress.
const sumBlock = 4 << 20

// SHA256 returns the hex SHA-256 of the regular file at path (opened by
// Open's rules), for checking a model or bundle file against a manifest or
// a published checksum. ctx stops it between blocks of 4 MiB with ctx's
// error; progress, when not nil, is called with the bytes of each block.
func SHA256(ctx context.Context, path string, progress func(n int64)) (string, error) {
	fh, err := Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return "", err
	}
	buf := make([]byte, min(sumBlock, max(st.Size(), 512)))
	h := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := fh.Read(buf)
		h.Write(buf[:n])
		if n > 0 && progress != nil {
			progress(int64(n))
		}
		if errors.Is(err, io.EOF) {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", path, err)
		}
	}
}
