package cli

import "golang.org/x/sys/unix"

// cpuModelName is macOS's name for the CPU ("Apple M1", ...).
func cpuModelName() string {
	name, err := unix.Sysctl("machdep.cpu.brand_string")
	if err != nil {
		return ""
	}
	return name
}
