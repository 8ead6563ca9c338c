// Package cpu is the pure-Go backend: numeric kernels (kernels.go, matrix.go,
// attention.go) and the architectures built on them (llama.go; gemma4 lives in
// gemma4*.go).
//
// # Row independence
//
// Every kernel computes each output row from its own inputs with a fixed order
// of accumulation that does not depend on how many tokens share the call or on
// how the work is split across goroutines. A Forward of K tokens is therefore
// bit-identical to K Forwards of one token (DESIGN.md invariant 1), which is
// what makes speculative decoding lossless. Anyone adding a kernel must keep
// this: parallelise over output rows (or heads, or tokens), never split one
// dot product across workers, never change the inner loop by batch size.
//
// # Kernels for other architectures
//
// The exported kernels are the building blocks the gemma4 architecture reuses:
//
//	Matrix, NewMatrix, (*Matrix).MatMul   weights in F32/F16/BF16/Q8_0/Q4_0/Q4_1, x·Wᵀ for K tokens
//	(*Matrix).Row                         dequantised row (embedding lookup)
//	RMSNorm, RMSNormInPlace               y = x/rms(x)·(w) (w may be nil: weightless norm)
//	RoPE, RoPENeox                        rotary embedding, adjacent pairs / split halves
//	Softmax, Dot, Axpy, SiLU, GELUTanh    element-wise helpers
//	Attend                                one query head over kv.Cache rows, honouring Visible (windows)
//	Pool                                  the worker pool every parallel kernel runs on
package cpu
