package catalog

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// totalRAM reads MemTotal from /proc/meminfo (0 when unreadable).
func totalRAM() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 2 && fields[1] == "kB" {
			if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil && n > 0 {
				return n << 10
			}
		}
		return 0
	}
	return 0
}
