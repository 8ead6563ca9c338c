package published

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
)

// NewCoreMLExecutor loads the decode chunks of a published CoreML-LLM
// bundle with Core ML (on rt): each chunk's default function as FuncDecode
// (the project's engine loads it so, ChunkedEngine.swift) and its
// "verify_qK" function as FuncVerify. A .mlpackage chunk is compiled once
// through the compile cache; a .mlmodelc one is loaded as it is. When a
// chunk has no verify function (an older bundle, or macOS before 15, which
// cannot select a function), none is kept and the backend decodes one
// token per call; NoVerify says why. progress receives the functions
// loaded so far and their total; ctx is checked between them.
func NewCoreMLExecutor(ctx context.Context, rt mlcore.Runtime, p *coreml.Published, o coreml.CoreMLOptions, progress func(done, total int)) (_ *coreml.CoreMLExecutor, err error) {
	var fns []map[string]mlcore.Function // per decode chunk, by name
	var loads []coreml.ChunkLoad
	noVerify, noPrefill := "", ""
	executor := func() *coreml.CoreMLExecutor {
		r := coreml.LoadedCoreMLExecutor(rt, o, fns, loads)
		r.NoVerify, r.NoPrefill = noVerify, noPrefill
		return r
	}
	defer func() {
		if err != nil {
			for _, f := range fns {
				for _, fn := range f {
					fn.Close()
				}
			}
		}
	}()
	var cache *mlcore.Cache
	total, done := 2*len(p.Decode)+len(p.Prefill), 0
	step := func() {
		done++
		if progress != nil {
			progress(done, total)
		}
	}
	// compiled returns the .mlmodelc of a chunk file (compiling a
	// .mlpackage once, through the cache).
	compiled := func(name string, cl *coreml.ChunkLoad) (string, error) {
		pkg := filepath.Join(p.Dir, name)
		if !strings.HasSuffix(name, ".mlpackage") {
			return pkg, nil
		}
		if cache == nil {
			if o.CacheDir == "" {
				var err error
				if o.CacheDir, err = coreml.DefaultCacheDir(); err != nil {
					return "", err
				}
			}
			cache = mlcore.NewCache(o.CacheDir, rt.Compile, o.Log)
		}
		entry, err := cache.Compiled(ctx, pkg)
		if err != nil {
			return "", fmt.Errorf("coreml: %s: %w", pkg, err)
		}
		cl.Compiled = entry.Fresh
		return entry.Path, nil
	}
	for j, name := range p.Decode {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pkg := filepath.Join(p.Dir, name)
		cl := coreml.ChunkLoad{Package: pkg}
		t0 := time.Now()
		compiled, err := compiled(name, &cl)
		if err != nil {
			return nil, err
		}
		cl.Compile, cl.Model = time.Since(t0), compiled
		chunk := map[string]mlcore.Function{}
		fns = append(fns, chunk)
		t1 := time.Now()
		fn, err := rt.Load(ctx, compiled, mlcore.LoadOptions{ComputeUnits: o.ComputeUnits})
		if err != nil {
			return nil, fmt.Errorf("coreml: loading the decode function of %s: %w", pkg, err)
		}
		cl.Load[0], cl.Functions[0] = time.Since(t1), FuncDecode
		chunk[FuncDecode] = fn
		step()
		if noVerify == "" {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t2 := time.Now()
			vf, err := rt.Load(ctx, compiled, mlcore.LoadOptions{ComputeUnits: o.ComputeUnits, FunctionName: FuncVerify})
			if err != nil {
				noVerify = fmt.Sprintf("%s: no %s function loaded (%v): one token per call", pkg, FuncVerify, err)
				for i, f := range fns[:j] {
					if v := f[FuncVerify]; v != nil {
						v.Close()
						delete(f, FuncVerify)
					}
					// Their load records no longer list a function in use.
					loads[i].Load[1], loads[i].Functions[1] = 0, ""
				}
			} else {
				cl.Load[1], cl.Functions[1] = time.Since(t2), FuncVerify
				chunk[FuncVerify] = vf
			}
		}
		step()
		loads = append(loads, cl)
	}
	// The prefill chunks, one per decode chunk, each loaded as FuncPrefill
	// of the decode chunk of its number; a bundle without them (or with
	// fewer) prefills with the decode function.
	if len(p.Prefill) != len(p.Decode) {
		noPrefill = fmt.Sprintf("%d prefill chunks for %d decode chunks: the prompt runs token by token", len(p.Prefill), len(p.Decode))
		return executor(), nil
	}
	for j, name := range p.Prefill {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cl := coreml.ChunkLoad{Package: filepath.Join(p.Dir, name)}
		t0 := time.Now()
		path, err := compiled(name, &cl)
		if err != nil {
			return nil, err
		}
		cl.Compile, cl.Model = time.Since(t0), path
		t1 := time.Now()
		fn, err := rt.Load(ctx, path, mlcore.LoadOptions{ComputeUnits: o.ComputeUnits})
		if err != nil {
			return nil, fmt.Errorf("coreml: loading %s: %w", cl.Package, err)
		}
		cl.Load[0], cl.Functions[0] = time.Since(t1), FuncPrefill
		fns[j][FuncPrefill] = fn
		loads = append(loads, cl)
		step()
	}
	return executor(), nil
}
