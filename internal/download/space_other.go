//go:build !linux && !darwin

package download

import (
	"errors"
	"fmt"
)

// DiskSpace is not implemented on this system: downloads are bounded by
// Options.MaxSize only.
func DiskSpace(dir string) (free, size int64, err error) {
	return 0, 0, fmt.Errorf("download: free space of %s: %w", dir, errors.ErrUnsupported)
}
