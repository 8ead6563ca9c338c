// Package cpu is the pure-Go backend: numeric kernels (kernels.go, matrix.go,
// attention.go) and the code that executes the architectures described in
// engine/arch (llama.go, gemma4.go): it binds the weights those packages
// name, applies their RoPE tables (engine/arch/rope) and runs each layer's
// blocks, one short method per block.
//
// # Memory and goroutines
//
// A backend owns a Pool of workers started once (NewPool; the backend's
// Close ends the pool it made) and keeps the scratch of each Forward
// (llamaScratch, gemma4Scratch: one buffer per meaning) for the next call,
// one scratch per concurrent call, so a decode step allocates only its
// Result. Forward calls on distinct caches may run concurrently
// (model.Backend).
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
// The exported kernels are the building blocks an executed architecture uses
// (the gated activations and the layer attention run as Tasks kept in a
// Forward's scratch: gateTask, attnTask):
//
//	Matrix, NewMatrix, FromF32            weights in F32/F16/BF16/Q8_0/Q4_0/Q4_1 (Supported), aliasing the mapping
//	(*Matrix).MatMul, MatMulInput, Input  out = x·Wᵀ for K tokens, each weight row read once for all K
//	(*Matrix).Row                         dequantised row (embedding lookup)
//	RMSNorm, RMSNormRows                  y = x/rms(x)·w (w may be nil: weightless norm), per row
//	Dot, Dot3, Axpy, Add, Softmax         vector helpers (Dot3 = three Dots of one row, bit-identical)
//	SiLU, GELUTanh, Argmax                activations, greedy pick (ties to the lowest id)
//	Attend, AttendGroup                   query heads over kv.Cache rows, honouring Visible (sliding windows)
//	AttendBlock                           Attend for a block of tokens and heads, K/V rows walked once per run
//	Result                                flat logits -> model.Result for the Output flags (Logits, Argmax, Last)
//	Pool, Task                            the persistent worker pool every parallel kernel runs on
//	F16, BF16, ToF16, ToBF16, Quantize    conversions; Quantize encodes test weights
//	RandomLlama                           a random-weight llama GGUF of any geometry (tests, benchmarks)
//
// On amd64 with AVX2/FMA/F16C, Dot, Dot3 and the dequantisers (F16, BF16,
// Q8_0, Q4_0, Q4_1) run assembly (simd_amd64.s); F32/F16/BF16 rows of 1, 2
// or 4 tokens are multiplied by fused kernels that widen the weights as they
// stream them (dot4_amd64.s; the 4-token one needs AVX-512 registers), each
// token's result Dot's bit for bit. Q4_0/Q4_1/Q8_0 weights multiply
// activations quantised to 8 bits (quantizeQ8) with integer dot products,
// 8 rows at a time with the rows in the vector lanes and one canonical
// per-token sum (dotQ8Ref in the tests), with AVX-512 VNNI
// (q8rows_amd64.s) or AVX2 (q8rowsavx2_amd64.s); q8_amd64.s holds the AVX2
// quantiser. With AVX2 the attention walks K and V rows run by run
// (dotRowsAVX2, wsumAVX2) and the exponentials of SiLU, GELU-tanh and
// Softmax are computed four at a time in packed doubles.
//
// On arm64 every one of these has a NEON twin computing the same bits
// (simd_arm64.s, act_arm64.s, q8_arm64.s, and q8rows_arm64.s with the
// dot-product extension's SDOT, which every Apple M-series core has), so
// a model's outputs on a Mac are its outputs on Linux (TestGolden checks
// the arm64 sets against the amd64 records, TestCanonVectors each kernel
// family, both under qemu in make test). Elsewhere the Go loops run.
//
// # One arithmetic on every CPU
//
// The canonical orders are written down in the tests (dotCanon, dotQ8Ref,
// axpyCanon) with exact arithmetic, and every kernel of both architectures
// is held to them bit for bit. The scalar code is written so that Go
// compiles it to the same roundings everywhere: Go fuses x*y+z into one
// multiply-add on arm64 (not on amd64 below GOAMD64=v3) unless an explicit
// conversion rounds the product, so every product that is meant to round
// on its own is converted (dotGo, Axpy, GELUTanh), and a fused step is
// written as one (math.FMA, fma32). math.Exp and math.Tanh differ between
// architectures (assembly on amd64 and on arm64, different algorithms), so
// the activations call exp64 and tanh64 (canon.go): math.Exp's amd64 FMA
// steps and math.Tanh's pure-Go steps, in Go, the same bits on every
// machine, which the SIMD kernels of both architectures copy. The choice
// of kernels is fixed per process, so row independence holds on every
// machine; machines without the SIMD kernels (the Go loops' Dot order
// differs from the 32-lane one) may round differently.
package cpu
