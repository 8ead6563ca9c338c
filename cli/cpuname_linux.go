package cli

import (
	"bufio"
	"os"
	"strings"
)

// cpuModelName reads the CPU's name from /proc/cpuinfo ("model name" on
// x86; arm64 kernels give only the implementer and part numbers).
func cpuModelName() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	var impl, part string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch k, v = strings.TrimSpace(k), strings.TrimSpace(v); k {
		case "model name":
			return v
		case "CPU implementer":
			impl = v
		case "CPU part":
			part = v
		}
	}
	if impl != "" {
		return "CPU implementer " + impl + " part " + part
	}
	return ""
}
