// Package mlcore is the Core ML layer of the Core ML backend: it runs
// "function F of compiled model M on these host buffers" and nothing more.
// Bundles, sidecars, masks, KV and the chunk pipeline live above it.
//
// The name says what it provides: the calls into Core ML (MLModel,
// MLMultiArray, MLPredictionOptions, ...), under engine/coreml as
// DESIGN.md's layout asks.
//
// The package has three parts:
//
//   - a platform-neutral API (Runtime, Function, Buffer, ComputeUnits) with
//     the checks that need no Core ML: buffer shapes, strides and dtypes
//     against each other and against a function's description, the compile
//     cache (Cache), the translation of NSError into Go errors;
//   - calls.go: every Objective-C selector, C function, C global and
//     optional class the darwin code uses, with the argument and return
//     types it assumes, the header each was read from and the macOS version
//     that introduced it. The darwin
//     code can only send messages through that table, and a test run on
//     Linux checks every call site against it and the table against facts
//     read from Apple's public headers (testdata/coreml_headers.txt);
//   - the darwin/arm64 code (runtime_darwin_arm64.go), which calls Core ML
//     through github.com/ebitengine/purego without cgo, so that
//     `GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go vet` type-checks every line
//     of it on Linux. Elsewhere New returns an *UnsupportedError.
//
// # Host buffers
//
// Core ML reads inputs from and writes outputs into host memory through
// MLMultiArray objects made with initWithDataPointer:...:deallocator:nil,
// so no bytes are copied. The memory must stay alive and unmoved while Core
// ML holds a pointer to it: Predict keeps every Buffer reachable until it
// returns and releases every MLMultiArray it made before it returns, so the
// rule for callers is only "do not touch a buffer's contents from another
// goroutine during Predict". Go's garbage collector does not move heap
// objects today; Alloc's page-aligned memory (mmap where there is one) is
// outside the Go heap altogether and is what Core ML's own header
// recommends for output backings ("use page-aligned address").
//
// On a Mac the runtime also makes IOSurface-backed float16 buffers
// (SurfaceAllocator, surface.go): the same Buffer, whose memory is a
// CVPixelBuffer with an MLMultiArray made once over it, rows padded as the
// pixel buffer pads them (the strides say so), locked by the host except
// during Predict, and each an input or an output backing for its whole
// life.
//
// # Compute plans
//
// On macOS 14.4 or later the runtime also reads a compiled model's compute
// plan (Planner, plan.go): which device each operation of each function
// prefers, and its estimated cost. Summarize turns it into a Placement.
package mlcore
