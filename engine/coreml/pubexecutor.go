package coreml

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"anechat/engine/coreml/mlcore"
)

// NewPublishedExecutor loads the decode chunks of a published CoreML-LLM
// bundle with Core ML (on rt): each chunk's default function as PubDecode
// (the project's engine loads it so, ChunkedEngine.swift) and its
// "verify_qK" function as PubVerify. A .mlpackage chunk is compiled once
// through the compile cache; a .mlmodelc one is loaded as it is. When a
// chunk has no verify function (an older bundle, or macOS before 15, which
// cannot select a function), none is kept and the backend decodes one
// token per call; NoVerify says why. progress receives the functions
// loaded so far and their total; ctx is checked between them.
func NewPublishedExecutor(ctx context.Context, rt mlcore.Runtime, p *Published, o CoreMLOptions, progress func(done, total int)) (_ *CoreMLExecutor, err error) {
	r := newCoreMLExecutor(rt, o)
	defer func() {
		if err != nil {
			r.Close()
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
	compiled := func(name string, cl *ChunkLoad) (string, error) {
		pkg := filepath.Join(p.Dir, name)
		if !strings.HasSuffix(name, ".mlpackage") {
			return pkg, nil
		}
		if cache == nil {
			if o.CacheDir == "" {
				var err error
				if o.CacheDir, err = DefaultCacheDir(); err != nil {
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
		cl := ChunkLoad{Package: pkg}
		t0 := time.Now()
		compiled, err := compiled(name, &cl)
		if err != nil {
			return nil, err
		}
		cl.Compile, cl.Model = time.Since(t0), compiled
		fns := map[string]mlcore.Function{}
		r.fns = append(r.fns, fns)
		t1 := time.Now()
		fn, err := rt.Load(ctx, compiled, mlcore.LoadOptions{ComputeUnits: o.ComputeUnits})
		if err != nil {
			return nil, fmt.Errorf("coreml: loading the decode function of %s: %w", pkg, err)
		}
		cl.Load[0], cl.Functions[0] = time.Since(t1), PubDecode
		fns[PubDecode] = fn
		step()
		if r.NoVerify == "" {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t2 := time.Now()
			vf, err := rt.Load(ctx, compiled, mlcore.LoadOptions{ComputeUnits: o.ComputeUnits, FunctionName: PubVerify})
			if err != nil {
				r.NoVerify = fmt.Sprintf("%s: no %s function loaded (%v): one token per call", pkg, PubVerify, err)
				for i, f := range r.fns[:j] {
					if v := f[PubVerify]; v != nil {
						v.Close()
						delete(f, PubVerify)
					}
					// Their load records no longer list a function in use.
					r.loads[i].Load[1], r.loads[i].Functions[1] = 0, ""
				}
			} else {
				cl.Load[1], cl.Functions[1] = time.Since(t2), PubVerify
				fns[PubVerify] = vf
			}
		}
		step()
		r.loads = append(r.loads, cl)
	}
	// The prefill chunks, one per decode chunk, each loaded as PubPrefill
	// of the decode chunk of its number; a bundle without them (or with
	// fewer) prefills with the decode function.
	if len(p.Prefill) != len(p.Decode) {
		r.NoPrefill = fmt.Sprintf("%d prefill chunks for %d decode chunks: the prompt runs token by token", len(p.Prefill), len(p.Decode))
		return r, nil
	}
	for j, name := range p.Prefill {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cl := ChunkLoad{Package: filepath.Join(p.Dir, name)}
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
		cl.Load[0], cl.Functions[0] = time.Since(t1), PubPrefill
		r.fns[j][PubPrefill] = fn
		r.loads = append(r.loads, cl)
		step()
	}
	return r, nil
}

// Features implements PubExecutor: the features of a loaded function.
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
