//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package safetensors

import "os"

// mapFile reads path into memory where mmap is not available.
func mapFile(path string) ([]byte, func() error, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
