//go:build !linux && !darwin

package cli

// cpuModelName: no portable source for the CPU's name here.
func cpuModelName() string { return "" }
