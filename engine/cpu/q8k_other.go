//go:build !amd64 && !arm64

package cpu

func quantizeQ8KIntoSIMD(q []int8, qstep int, recs []kRec, rstep int, x []float32) bool { return false }
