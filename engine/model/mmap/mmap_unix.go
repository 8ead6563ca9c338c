//go:build linux || darwin || freebsd || netbsd || openbsd

package mmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openNonblock makes Open's open(2) return at once on a named pipe with no
// writer instead of waiting for one.
const openNonblock = unix.O_NONBLOCK

// mapFile maps size bytes of fh read-only.
//
// MAP_SHARED rather than MAP_PRIVATE: for a read-only mapping the two differ
// in nothing that matters here. Neither takes a snapshot of the file: the
// pages of either are the page cache's pages until written to (never, with
// PROT_READ), so a rewrite of the file shows through both, and a truncation
// makes reading past the new end raise SIGBUS with both. Protection comes
// from Mapping.Check and Guard, not from the mapping flags; MAP_SHARED keeps
// the pages shared with the page cache and every other reader.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	if size != int64(int(size)) {
		return nil, nil, fmt.Errorf("file of %d bytes is too large to map", size)
	}
	data, err := unix.Mmap(int(fh.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
