// Package coreml is the Core ML backend: it runs the bundles of the anechat
// converter (engine/coreml/convert, whose README documents the format) as a
// model.Backend, on the Neural Engine through Core ML on darwin/arm64, and
// through the reference executor anywhere.
//
// The package is the host side, the same on every platform:
//
//   - reading a bundle (OpenBundle, ReadManifest): the manifest's format and
//     version, every function's inputs and outputs checked against what the
//     format derives from the architecture and geometry, the architecture
//     checked against engine/arch (RoPE, scales, KV sharing), the sha256 of
//     the sidecars and the tokenizer; a bundle that fails any check is
//     refused with an error (wrapping ErrBundle) naming the file and what
//     is wrong, and nothing panics on a damaged manifest (FuzzReadManifest);
//   - the inputs of a call (inputs.go): INT8 or fp16 sidecar rows of the
//     call's tokens, the cos/sin rows of each RoPE spec from engine/arch's
//     tables, the exact masks per layer kind (DESIGN.md invariant 2), the
//     placement matrices, the cache tensors built from the caller's
//     kv.Cache with the call's own slots zero, and padding: rows past the
//     real ones repeat the last real row and are placed nowhere;
//   - the chunk pipeline (Model.Forward): every chunk in order, the
//     hidden state, the per-layer inputs and KV-shared layers' rows handed
//     from chunk to chunk, and the new K/V rows written into the cache's
//     pending rows at their positions, never committed (invariant 3: the
//     Session commits the accepted ones; the others are dropped for free).
//     A generation call (its unused rows padded) asking for ids
//     (model.Argmax) runs the generate function, whose last chunk returns
//     a blockwise argmax (per block of at most 16384 ids, the first
//     maximum and its value) and no logits; one asking for logits
//     (model.Logits) runs the sample function, which returns them before
//     the softcap, in the same blocks (the output projection is one
//     matmul whose result is [1,nb,T,B], so no value has a last axis
//     longer than a block). The engine asks for ids on every generation call of a
//     greedy session and for logits on every one of a sampled session, so
//     a session runs one function per chunk for all its generation calls
//     and speculation on and off compute every generated row with the same
//     function. Calls asking for the last row only (model.Last) run the
//     prefill function, which returns both;
//   - the host's end of the last chunk: the second level of the argmax
//     (the lowest block holding the row's maximum, so the id is the flat
//     argmax, ties to the lowest id, NaN never winning) and the softcap of
//     the logits in float32 exactly as the CPU backend computes it
//     (cpu.Softcap);
//   - the Executor interface between that and "run function F of chunk C on
//     these buffers": CoreMLExecutor (mlcore: compile cache, every function
//     of every chunk loaded and checked against the manifest) and the
//     reference executor in engine/coreml/refrun (the function contract in
//     float32 on the CPU backend's kernels);
//   - Loader, the engine/load Loader that opens bundles (registered by
//     internal/backends, first on darwin/arm64), with progress and
//     cancellation between files and chunks.
//
// AuditBundle (bundleaudit.go; `anechat bundle audit`) reads every saved
// package of a bundle with engine/coreml/mlprogram, a Go reader of the
// .mlpackage format (the protobuf ML program and its weight blobs), and
// checks it against the rules known to push work off the Neural Engine,
// each with its threshold and source in mlprogram/audit.go: package size,
// ops per function, last axes and reductions over 16384 elements outside
// matmul-class ops, integer values computed at run time, shapes that are
// not fixed. TestAuditFixtureBundles holds the converter's test bundles to
// them in make test.
//
// It also reads the layout the CoreML-LLM project publishes (Published;
// engine/coreml/published runs it; PUBLISHED.md has its function
// contract): its decode and verify functions are different functions, so
// speculation identity there is measured by doctor, not built in.
package coreml
