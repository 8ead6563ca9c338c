//go:build linux || darwin || freebsd || netbsd || openbsd

package mmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Map maps the file at path read-only and returns its bytes and the function
// that unmaps them. An empty file maps to an empty slice. The bytes must not
// be written to, nor used after release.
func Map(path string) (data []byte, release func() error, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("not a regular file")
	}
	size := st.Size()
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	if size != int64(int(size)) {
		return nil, nil, fmt.Errorf("file of %d bytes is too large to map", size)
	}
	data, err = unix.Mmap(int(fh.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
