//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package mmap

import "os"

// Map reads the file at path into memory, where mmap is not available; its
// release does nothing (the garbage collector frees the bytes).
func Map(path string) (data []byte, release func() error, err error) {
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
