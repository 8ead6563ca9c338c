//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package mmap

import (
	"fmt"
	"io"
	"os"
)

// openNonblock is 0 where open(2) has no such flag (Open still checks the
// file's type before and after opening it).
const openNonblock = 0

// mapFile reads the file into memory, where mmap is not available; the
// release does nothing (the garbage collector frees the bytes). Such bytes
// cannot fault; Mapping.Check still reports a changed file.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	if size != int64(int(size)) {
		return nil, nil, fmt.Errorf("file of %d bytes is too large to read", size)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
