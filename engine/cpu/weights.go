package cpu

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	"anechat/engine/kv"
	"anechat/engine/model/mmap"
)

// A model's tensors alias the memory mappings of its files. When a file is
// truncated on disk while it is mapped, reading it faults: Forward and the
// loaders defer mmap.Guard, so the fault becomes an error wrapping
// model.ErrModelChanged for that call, and Pool.Run carries faults of its
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

// endGuard ends a Forward's fault guard, mmap.Guard without its
// allocations (a decode step makes none: TestForwardAllocs). A Forward
// defers
//
//	defer func(old bool) { err = endGuard(recover(), old, err, m.maps, cache) }(debug.SetPanicOnFault(true))
//
// endGuard restores the goroutine's fault mode (old) and turns a fault
// panic r on one of maps into an error wrapping model.ErrModelChanged,
// dropping the rows the call reserved in cache as Forward does for its
// other errors; any other panic goes on unchanged (it is a bug).
func endGuard(r any, old bool, err error, maps []*mmap.Mapping, cache *kv.Cache) error {
	debug.SetPanicOnFault(old)
	if r == nil {
		return err
	}
	if ferr := mmap.Fault(r, maps...); ferr != nil {
		cache.Rollback()
		return ferr
	}
	panic(r)
}

// unboundTensors rejects a model file with tensors the loader did not bind
// (unread, in the order given): the model would run without them and
// compute garbage. A layer tensor (blockPrefix + index + ".") past the
// layer count names the config field that counts the layers; any other is
// a weight the architecture does not have.
func unboundTensors(path string, unread []string, blockPrefix, countField string, layers int) error {
	if len(unread) == 0 {
		return nil
	}
	more := ""
	if len(unread) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(unread)-1)
	}
	name := unread[0]
	if rest, ok := strings.CutPrefix(name, blockPrefix); ok {
		if i, _, ok := strings.Cut(rest, "."); ok {
			if n, err := strconv.Atoi(i); err == nil && n >= layers {
				return fmt.Errorf("cpu: %s: tensor %q%s belongs to layer %d, but %s = %d: the metadata does not match the weights (the file is damaged)",
					path, name, more, n, countField, layers)
			}
		}
	}
	return fmt.Errorf("cpu: %s: tensor %q%s is not a weight of the model the metadata describes, which would run without it: the file is damaged or of an unsupported variant",
		path, name, more)
}
