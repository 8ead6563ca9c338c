package catalog

import "golang.org/x/sys/unix"

// totalRAM is sysctl hw.memsize (0 when unreadable).
func totalRAM() int64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil || n > 1<<62 {
		return 0
	}
	return int64(n)
}
