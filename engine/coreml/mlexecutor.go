package coreml

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"anechat/engine/coreml/mlcore"
)

// CoreMLOptions configure the Core ML executor.
type CoreMLOptions struct {
	// ComputeUnits says where Core ML may run the functions (the zero
	// value: the CPU and the Neural Engine).
	ComputeUnits mlcore.ComputeUnits
	// CacheDir keeps the compiled packages (compiling a chunk takes long
	// the first time); "" means <user cache dir>/anechat/coreml.
	CacheDir string
	// Log receives the compile cache's notices; nil means slog.Default().
	Log *slog.Logger
}

// ChunkLoad is what loading one chunk took.
type ChunkLoad struct {
	Package string
	// Compiled is true when the package was compiled by this load (not
	// found in the compile cache).
	Compiled bool
	// Compile is the time to find or compile the package (hashing it to
	// find its cache entry included); Load the time to load each of its
	// functions, named by Functions ("" for none): generate, prefill (and
	// sample between them on the last chunk) for a bundle of the
	// converter; decode then verify, or prefill alone, for a published
	// one.
	Compile   time.Duration
	Load      [3]time.Duration
	Functions [3]string
	// Model is the compiled model the functions were loaded from (the
	// .mlmodelc directory): what a compute plan is read from.
	Model string
}

// CoreMLExecutor runs the bundle's chunk packages with Core ML (package
// mlcore). It is an Executor.
type CoreMLExecutor struct {
	rt    mlcore.Runtime
	log   *slog.Logger
	units mlcore.ComputeUnits
	fns   []map[string]mlcore.Function // per chunk, by function name
	loads []ChunkLoad
	// surfaces and plain count the buffers AllocShared made
	// IOSurface-backed and those that fell back to plain memory.
	surfaces, plain int
	// NoVerify, for a published bundle (published.NewCoreMLExecutor),
	// says why no verify function was loaded; "" when every chunk has one.
	NoVerify string
	// NoPrefill says why a published bundle's prefill chunks are not
	// loaded; "" when they are.
	NoPrefill string
}

// CoreMLExecutorOpener returns the OpenExecutor of the Core ML executor on rt
// (mlcore.New()).
func CoreMLExecutorOpener(rt mlcore.Runtime, o CoreMLOptions) OpenExecutor {
	return func(ctx context.Context, b *Bundle, progress func(done, total int)) (Executor, error) {
		return NewCoreMLExecutor(ctx, rt, b, o, progress)
	}
}

// DefaultCacheDir is where compiled packages go when CoreMLOptions.CacheDir
// is empty.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("coreml: compiled model cache: %w", err)
	}
	return filepath.Join(d, "anechat", "coreml"), nil
}

// NewCoreMLExecutor compiles (once, through the compile cache) and loads every
// function of every chunk of b, and checks each loaded function's inputs
// and outputs against the manifest. progress receives the functions loaded
// so far and their total; ctx is checked between chunks and functions (a
// compile Core ML has started cannot be interrupted).
func NewCoreMLExecutor(ctx context.Context, rt mlcore.Runtime, b *Bundle, o CoreMLOptions, progress func(done, total int)) (_ *CoreMLExecutor, err error) {
	if o.CacheDir == "" {
		if o.CacheDir, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	cache := mlcore.NewCache(o.CacheDir, rt.Compile, o.Log)
	r := newCoreMLExecutor(rt, o)
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	m := b.Manifest
	total := 0
	for _, c := range m.Chunks {
		total += len(c.Functions)
	}
	done := 0
	for j := range m.Chunks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pkg := b.PackagePath(j)
		cl := ChunkLoad{Package: pkg}
		t0 := time.Now()
		entry, err := cache.Compiled(ctx, pkg)
		if err != nil {
			return nil, fmt.Errorf("coreml: %s: %w", pkg, err)
		}
		cl.Compile, cl.Compiled, cl.Model = time.Since(t0), entry.Fresh, entry.Path
		fns := map[string]mlcore.Function{}
		r.fns = append(r.fns, fns)
		for i := range m.Chunks[j].Functions {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			info := &m.Chunks[j].Functions[i]
			opts := mlcore.LoadOptions{ComputeUnits: o.ComputeUnits, FunctionName: info.Name}
			t1 := time.Now()
			fn, err := rt.Load(ctx, entry.Path, opts)
			var nserr *mlcore.NSError
			if err != nil && !entry.Fresh && errors.As(err, &nserr) {
				// Perhaps a damaged cache entry: LoadPackage verifies it and
				// recompiles when it is.
				fn, err = mlcore.LoadPackage(ctx, rt, cache, pkg, opts)
			}
			if err != nil {
				return nil, fmt.Errorf("coreml: loading function %s of %s: %w", info.Name, pkg, err)
			}
			cl.Load[i], cl.Functions[i] = time.Since(t1), info.Name
			fns[info.Name] = fn
			if err := CheckFunction(pkg, info, fn.Inputs(), fn.Outputs()); err != nil {
				return nil, err
			}
			done++
			if progress != nil {
				progress(done, total)
			}
		}
		r.loads = append(r.loads, cl)
	}
	return r, nil
}

// LoadedCoreMLExecutor returns the executor of functions loaded outside
// NewCoreMLExecutor (engine/coreml/published loads a published bundle's
// chunks): fns[j] are chunk j's functions by name, loads what loading each
// chunk took. Its Close closes them.
func LoadedCoreMLExecutor(rt mlcore.Runtime, o CoreMLOptions, fns []map[string]mlcore.Function, loads []ChunkLoad) *CoreMLExecutor {
	r := newCoreMLExecutor(rt, o)
	r.fns, r.loads = fns, loads
	return r
}

// newCoreMLExecutor is the empty executor the constructors fill.
func newCoreMLExecutor(rt mlcore.Runtime, o CoreMLOptions) *CoreMLExecutor {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	return &CoreMLExecutor{rt: rt, log: log, units: o.ComputeUnits}
}

// Name implements Executor.
func (r *CoreMLExecutor) Name() string { return "Core ML (" + r.units.String() + ")" }

// AllocShared implements SharedAllocator: an IOSurface-backed buffer when
// the runtime makes them (Core ML on a Mac, mlcore.SurfaceAllocator),
// else plain memory. A surface that cannot be made (CVPixelBufferCreate
// refused the size, say) falls back to plain memory with a log line: the
// call still works, Core ML copies that buffer on each call.
func (r *CoreMLExecutor) AllocShared(shape []int) (mlcore.Buffer, func() error, error) {
	if sa, ok := r.rt.(mlcore.SurfaceAllocator); ok {
		buf, free, err := sa.AllocSurface(shape...)
		if err == nil {
			r.surfaces++
			return buf, free, nil
		}
		r.plain++
		r.log.Warn("coreml: no IOSurface-backed buffer; using plain memory, which Core ML copies on each call", "shape", shape, "error", err)
	}
	return mlcore.Alloc(mlcore.Float16, shape...)
}

// SharedBuffers reports how many buffers AllocShared made IOSurface-backed
// and how many fell back to plain memory.
func (r *CoreMLExecutor) SharedBuffers() (surfaces, plain int) { return r.surfaces, r.plain }

// ChunkPlacement is where the functions of one chunk package run, as its
// compute plan says.
type ChunkPlacement struct {
	Package   string             `json:"package"`
	Functions []mlcore.Placement `json:"functions"`
}

// planTimeout bounds the wait for one package's compute plan. Core ML
// builds the plan as it would load the model for the device (the
// compiled-model cache makes later loads fast); ten minutes is far above
// any load doctor has reported, and only guards against a completion
// handler that never comes.
const planTimeout = 10 * time.Minute

// Placement reads the compute plan of every loaded chunk with the
// executor's compute units and summarises each function of it
// (mlcore.Summarize). It returns an error matching errors.ErrUnsupported
// when the runtime reads no compute plans (it is not Core ML), and
// Core ML's *mlcore.OSVersionError before macOS 14.4.
func (r *CoreMLExecutor) Placement(ctx context.Context) ([]ChunkPlacement, error) {
	pl, ok := r.rt.(mlcore.Planner)
	if !ok {
		return nil, fmt.Errorf("coreml: %w: where operations run needs Core ML's compute plan (MLComputePlan, macOS 14.4 or later on Apple silicon)", errors.ErrUnsupported)
	}
	var out []ChunkPlacement
	for _, l := range r.loads {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pctx, cancel := context.WithTimeout(ctx, planTimeout)
		plan, err := pl.ComputePlan(pctx, l.Model, r.units)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("coreml: the compute plan of %s: %w", l.Package, err)
		}
		out = append(out, ChunkPlacement{Package: l.Package, Functions: mlcore.SummarizePlan(plan)})
	}
	return out, nil
}

// Float implements Executor: Core ML's fp16 features take fp16 buffers.
func (r *CoreMLExecutor) Float() mlcore.DType { return mlcore.Float16 }

// Run implements Executor.
func (r *CoreMLExecutor) Run(ctx context.Context, chunk int, fn *FunctionInfo, inputs, outputs map[string]mlcore.Buffer) error {
	if chunk < 0 || chunk >= len(r.fns) {
		return fmt.Errorf("coreml: no chunk %d", chunk)
	}
	f, ok := r.fns[chunk][fn.Name]
	if !ok {
		return fmt.Errorf("coreml: chunk %d has no function %s loaded", chunk, fn.Name)
	}
	return f.Predict(ctx, inputs, outputs)
}

// Loads reports what loading each chunk took.
func (r *CoreMLExecutor) Loads() []ChunkLoad { return append([]ChunkLoad(nil), r.loads...) }

// ComputeUnits is where Core ML may run the functions.
func (r *CoreMLExecutor) ComputeUnits() mlcore.ComputeUnits { return r.units }

// Stats returns each loaded function's counters, by chunk and name.
func (r *CoreMLExecutor) Stats() []map[string]mlcore.Stats {
	out := make([]map[string]mlcore.Stats, len(r.fns))
	for j, fns := range r.fns {
		out[j] = map[string]mlcore.Stats{}
		for name, f := range fns {
			out[j][name] = f.Stats()
		}
	}
	return out
}

// Close releases every loaded function.
func (r *CoreMLExecutor) Close() error {
	var first error
	for _, fns := range r.fns {
		for _, f := range fns {
			if err := f.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	r.fns = nil
	return first
}

// Features implements published.Executor (engine/coreml/published): the features of a loaded function.
func (r *CoreMLExecutor) Features(chunk int, fn string) (ins, outs []mlcore.FeatureSpec, ok bool) {
	if chunk < 0 || chunk >= len(r.fns) {
		return nil, nil, false
	}
	f, ok := r.fns[chunk][fn]
	if !ok {
		return nil, nil, false
	}
	return f.Inputs(), f.Outputs(), true
}
