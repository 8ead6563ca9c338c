// Package model defines what every backend shares: the model Config, the Backend
// interface that runs a forward pass, and the readers for weight files (GGUF,
// safetensors).
package model

import (
	"context"
	"errors"

	"anechat/engine/kv"
	"anechat/engine/model/mmap"
)

// Output says what a Forward call must return for each position.
type Output int

const (
	// Logits asks for the full logits row of every position.
	Logits Output = 1 << iota
	// Argmax asks for the greedy token of every position. Backends that can
	// compute it in-graph (Core ML) avoid copying logits back to the host.
	Argmax
	// Last, combined with Logits and/or Argmax, asks for the row of the last
	// position only: Result then holds exactly one row. Prefill uses it, so
	// a backend may skip the output projection of every other position.
	Last
)

// Result is what a Forward call returns. Row t belongs to tokens[t].
type Result struct {
	// Logits holds one row of Config.VocabSize values per position when the
	// call asked for Logits; nil otherwise.
	Logits [][]float32
	// Argmax holds the greedy token per position when the call asked for
	// Argmax; nil otherwise. Ties go to the lowest id and NaN never wins
	// (as sample.Greedy); a row of NaN only gives -1, which the decode
	// loops report as ErrDamaged.
	Argmax []int32
}

// A Backend runs the model. The CPU and Core ML backends implement it.
//
// Concurrency: Forward calls on distinct caches may run at the same time
// (two sessions on one loaded model), and each returns what it would alone;
// calls on one cache must not overlap, since the cache is the caller's
// state. Config and Widths may be called at any time. A backend that
// cannot run calls in parallel serialises them itself.
type Backend interface {
	// Config describes the loaded model: architecture, vocabulary, context,
	// KV geometry and fingerprint.
	Config() Config
	// Widths lists the call widths the backend can run. nil means any width
	// (the CPU backend); Core ML lists the widths of its compiled functions.
	Widths() []int
	// Forward runs tokens at positions start.. against cache. It reserves
	// len(tokens) pending rows in cache (cache.Reserve), writes their K/V
	// there and returns what want asks for. It never commits: only the
	// Session does (DESIGN.md invariant 3). The numbers for each token
	// depend only on the token, its position and the committed rows, never
	// on len(tokens) (invariant 1). It does not keep tokens after it
	// returns: the decode loops reuse the slice for the next call.
	Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want Output) (Result, error)
}

// KernelNamer is implemented by backends that choose their compute kernels
// at run time (the CPU backend picks its integer kernels by CPU features).
// Kernels names the set in use with a version, e.g. "cpu/avx2.1". Speeds
// measured on a backend depend on its kernels and the machine, not only on
// the model: whatever keeps such measurements between runs (the speculative
// decoder's per-width call costs) keys them by this name too, so a table
// measured by another build, or on another CPU when a data dir is copied,
// is not reused.
type KernelNamer interface {
	Kernels() string
}

// KernelsOf returns b's Kernels, or "" when b does not implement
// KernelNamer.
func KernelsOf(b Backend) string {
	if k, ok := b.(KernelNamer); ok {
		return k.Kernels()
	}
	return ""
}

// ErrModelChanged is wrapped by the errors of backends whose weights file
// changed on disk after it was loaded (a re-download, an editor saving over
// it): the error is a *mmap.ChangedError naming the file, and the model has
// to be loaded again. Forward returns it for a call that found its mapped
// weights truncated under it; CheckFiles before a generation, in the common
// case where the file changed between two replies.
var ErrModelChanged = mmap.ErrChanged

// ErrDamaged is wrapped by the errors for a model call whose logits row has
// no number in it (every logit is NaN): no token can be picked, and weights
// that compute NaN are damaged.
var ErrDamaged = errors.New("the model computed only NaN logits: the model file is damaged; download it again")

// FileChecker is implemented by backends whose weights are mapped from
// files. CheckFiles returns an error wrapping ErrModelChanged when a file is
// no longer the one loaded; it costs a stat call per file.
type FileChecker interface {
	CheckFiles() error
}

// CheckFiles returns b's CheckFiles, or nil when b does not implement
// FileChecker. The Session runs it before each prefill and generation.
func CheckFiles(b Backend) error {
	if c, ok := b.(FileChecker); ok {
		return c.CheckFiles()
	}
	return nil
}

// ArgmaxOnlyer is implemented by backends whose model computes the greedy
// token in-graph and returns no logits (a published CoreML-LLM bundle,
// engine/coreml/published.Model): they answer Argmax, and a prefill's
// Logits|Last with no row (the Session then computes the last token again
// in its first decode call); a call that needs logits fails.
type ArgmaxOnlyer interface {
	ArgmaxOnly() bool
}

// ArgmaxOnly reports whether b returns greedy ids only.
func ArgmaxOnly(b Backend) bool {
	a, ok := b.(ArgmaxOnlyer)
	return ok && a.ArgmaxOnly()
}
