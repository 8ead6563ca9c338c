package mlcore

import (
	"context"
	"errors"
	"fmt"
)

// LoadPackage loads a function of a model package through the compile
// cache: it compiles the package once (Cache.Compiled), loads the compiled
// model, and when Core ML cannot load an entry that came from the cache
// (its files look whole but are not), evicts it, recompiles and loads once
// more. An error that is not Core ML's (a cancelled context, a macOS too
// old for the options) is returned at once.
func LoadPackage(ctx context.Context, rt Runtime, cache *Cache, pkg string, opts LoadOptions) (Function, error) {
	entry, err := cache.Compiled(ctx, pkg)
	if err != nil {
		return nil, err
	}
	fn, err := rt.Load(ctx, entry.Path, opts)
	var nserr *NSError
	if err == nil || entry.Fresh || !errors.As(err, &nserr) {
		return fn, err
	}
	cache.log.Warn("coreml: cannot load the cached compiled model; recompiling", "package", pkg, "entry", entry.Path, "reason", err)
	if err := cache.Evict(entry.Key); err != nil {
		return nil, err
	}
	entry, err = cache.Compiled(ctx, pkg)
	if err != nil {
		return nil, err
	}
	fn, err = rt.Load(ctx, entry.Path, opts)
	if err != nil {
		return nil, fmt.Errorf("mlcore: loading %s after recompiling it: %w", pkg, err)
	}
	return fn, nil
}
