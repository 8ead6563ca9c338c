package mlcore

import (
	"context"
	"errors"
	"fmt"
)

// LoadPackage loads a function of a model package through the compile
// cache: it compiles the package once (Cache.Compiled) and loads the
// compiled model. When Core ML cannot load an entry that came from the
// cache, the entry is verified byte for byte (Cache.Verify): a damaged one
// is evicted, recompiled and loaded once more; an intact one means Core ML
// refuses the model itself (an unknown function name, say), and its error
// is returned. Errors that are not Core ML's (a cancelled context, a macOS
// too old for the options) are returned at once.
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
	damage := cache.Verify(ctx, entry)
	if damage == nil || ctx.Err() != nil {
		return nil, err
	}
	cache.log.Warn("coreml: the cached compiled model is damaged; recompiling", "package", pkg, "entry", entry.Path, "load error", err, "damage", damage)
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
