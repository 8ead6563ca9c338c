// Package cputime reads the process's CPU time for benchmarks: on a shared
// machine the user+system CPU time per operation (GC included) is steadier
// than wall time, which depends on the neighbours.
package cputime
