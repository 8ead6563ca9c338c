//go:build linux || darwin

package download

import (
	"fmt"
	"syscall"
)

// DiskSpace reports the bytes free for this user (what a write may use,
// not counting the blocks kept for root) and the size of the volume
// holding dir.
func DiskSpace(dir string) (free, size int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("download: free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil
}
