package cpu

import (
	"errors"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/mmap"
)

// A model's tensors alias the memory mappings of its files. When a file is
// truncated on disk while it is mapped, reading it faults: Forward and the
// loaders defer mmap.Guard, so the fault becomes an error wrapping
// model.ErrModelChanged for that call, and Pool.For carries faults of its
// worker goroutines to the guarded caller.

// checkFiles is the models' CheckFiles: a *mmap.ChangedError for the first
// mapping whose file is no longer the one mapped.
func checkFiles(maps []*mmap.Mapping) error {
	for _, m := range maps {
		if m == nil {
			continue
		}
		if err := m.Check(); err != nil {
			return err
		}
	}
	return nil
}

// rollbackOnFault, deferred before mmap.Guard in a Forward, drops the rows
// the call reserved in cache when the guard turned a fault into *errp, as
// Forward does for its other errors.
func rollbackOnFault(errp *error, cache *kv.Cache) {
	if errors.Is(*errp, model.ErrModelChanged) {
		cache.Rollback()
	}
}
