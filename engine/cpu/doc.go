// Package cpu is the pure-Go backend: numeric kernels (kernels.go, matrix.go,
// attention.go) and the code that executes the architectures described in
// engine/arch. Every model is one decoder (decoder.go: the lifecycle and
// the forward driver: guard, input check, Reserve, scratch, layer loop,
// logits) whose weights one binder binds to the names engine/arch gives
// (bind.go: a GGUF file, a safetensors directory, random weights), each
// once and shape-checked. Its layers are made of the blocks of blocks.go
// (attention, gated MLP: one forward method each, the parts an
// architecture lacks left nil), and per architecture (llama.go, qwen.go,
// gemma3.go, gemma4.go) there is only what differs: which weights the
// blocks bind, the activation, the RoPE specs and scales, and gemma4's
// layer with its per-layer inputs.
//
// # Memory and goroutines
//
// A backend owns a Pool of workers started once (NewPool; the backend's
// Close ends the pool it made) and keeps the memory of each Forward (pass:
// one buffer per meaning) for the next call, one per concurrent call, so a
// decode step allocates only its Result. Forward calls on distinct caches
// may run concurrently (model.Backend).
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
//	Matrix, NewMatrix, FromF32            weights in F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q2_K..Q6_K (Supported), aliasing the mapping
//	(*Matrix).MatMul, MatMulInput, Input  out = x·Wᵀ for K tokens, each weight row read once for all K
//	(*Matrix).Row                         dequantised row (embedding lookup)
//	RMSNorm, RMSNormRows                  y = x/rms(x)·w (w may be nil: weightless norm), per row
//	Dot, Dot3, Axpy, Add, Softmax         vector helpers (Dot3 = three Dots of one row, bit-identical)
//	SiLU, GELUTanh, Argmax                activations, greedy pick (ties to the lowest id)
//	Attend, AttendGroup                   query heads over kv.Cache rows, honouring Visible (sliding windows)
//	AttendBlock                           Attend for a block of tokens and heads, K/V rows walked once per run
//	Pool, Task                            the persistent worker pool every parallel kernel runs on
//	F16, BF16, ToF16, ToBF16, Quantize    conversions; Quantize encodes test weights
//	RandomLlama                           a random-weight llama GGUF of any geometry (tests, benchmarks)
//
// On amd64 with AVX2/FMA/F16C, Dot, Dot3 and the dequantisers (F16, BF16,
// Q8_0, Q4_0, Q4_1) run assembly (simd_amd64.s); F32/F16/BF16 rows of 1, 2
// or 4 tokens are multiplied by fused kernels that widen the weights as they
// stream them (dot4_amd64.s; the 4-token one needs AVX-512 registers), each
// token's result Dot's bit for bit.
//
// # Integer formats
//
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the K formats Q2_K..Q6_K (layouts in
// kquant.go) multiply quantised activations, as llama.cpp's CPU path does
// for each: 8 bits per block of 32 with the block's scale and sum
// (quantizeQ8) for the 32-value formats, Q8_K (one scale per 256, int16
// sums per 16 and 32: q8k.go) for the K formats. Each output is one
// canonical sum, defined in Go in dotref.go (exact int32 block and
// sub-block products, then one chain of single-rounding FMAs per row over
// the blocks in order), and every kernel computes exactly it, whatever the
// width: the Go loops (matMulRef; everywhere without row kernels), on
// amd64 the row kernels, 8 rows at a time with the rows in the vector
// lanes, with AVX-512 VNNI (q8rows_amd64.s, q5rows_amd64.s, kqrows_amd64.s)
// or AVX2 (q8rowsavx2_amd64.s, q5rowsavx2_amd64.s, kqrowsavx2_amd64.s) for
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K (Q2_K and Q3_K run the
// Go loops), and on arm64 the SDOT row kernels (q8rows_arm64.s,
// kqrows_arm64.s, kq23rows_arm64.s) for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K and Q6_K (every integer format); q8_amd64.s and
// q8_arm64.s hold the 32-value quantisers, q8k_amd64.s and q8k_arm64.s the
// Q8_K ones. So a model gives the same bits with
// every kernel set, and on every architecture (TestCanonicalSums,
// TestGolden's sets). Dequantisation (Row) gives the PyPI gguf package's
// reference values bit for bit (TestDequantReference). With AVX2 the
// attention walks K and V rows run by run (dotRowsAVX2, wsumAVX2) and the
// exponentials of SiLU, GELU-tanh and Softmax are computed four at a time
// in packed doubles.
//
// On arm64 every float kernel and activation has a NEON twin computing
// the same bits (simd_arm64.s, act_arm64.s), so a model's outputs on a
// Mac are its outputs on Linux (TestGolden checks the arm64 sets against
// the amd64 records, TestCanonVectors each kernel family, both under qemu
// in make test). Elsewhere the Go loops run.
//
// # One arithmetic on every CPU
//
// The canonical orders are written down with exact arithmetic (dotref.go
// for the integer sums; dotCanon and axpyCanon in the tests for the float
// ones), and every kernel of both architectures is held to them bit for
// bit. The scalar code is written so that Go compiles it to the same
// roundings everywhere: Go fuses x*y+z into one multiply-add on arm64
// (not on amd64 below GOAMD64=v3) unless an explicit conversion rounds the
// product, so every product that is meant to round on its own is
// converted (dotGo, Axpy, GELUTanh, the dequantisers), and a fused step is
// written as one (math.FMA, fma32). math.Exp and math.Tanh differ between
// architectures (assembly on amd64 and on arm64, different algorithms), so
// the activations call exp64 and tanh64 (canon.go): math.Exp's amd64 FMA
// steps and math.Tanh's pure-Go steps, in Go, the same bits on every
// machine, which the SIMD kernels of both architectures copy (the tests
// compare them with the Go code at test time). The choice of kernels is
// fixed per process, so row independence holds on every machine; machines
// without the float SIMD kernels (the Go loops' Dot order differs from the
// 32-lane one) may round float weights differently.
package cpu
