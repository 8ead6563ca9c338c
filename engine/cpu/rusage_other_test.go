//go:build !unix

package cpu

import "time"

// cpuTime is not measured on this OS: benchmarks report 0 CPU time.
func cpuTime() time.Duration { return 0 }
