package model

import "anechat/engine/kv"

// Config describes a loaded model. Everything the host side needs to drive a
// backend (embedding sizes, KV geometry, stop tokens) lives here, so the same
// Session code serves the CPU and Core ML backends.
type Config struct {
	// Arch is the architecture name: "llama" or "gemma4".
	Arch string
	// VocabSize is the number of rows of the output logits.
	VocabSize int
	// Hidden is the residual stream width.
	Hidden int
	// ContextLen is the longest sequence the backend accepts (positions
	// 0..ContextLen-1).
	ContextLen int
	// KV is the geometry of the host KV cache this model needs.
	KV kv.Geometry
	// BOS is the beginning-of-sequence id, or -1 when the model has none.
	BOS int32
	// EOS lists the ids that end generation.
	EOS []int32
	// Fingerprint identifies the exact weights (see Fingerprint functions in
	// this package); snapshots and caches are bound to it.
	Fingerprint string
}

// IsEOS reports whether id ends generation for this model.
func (c Config) IsEOS(id int32) bool {
	for _, e := range c.EOS {
		if e == id {
			return true
		}
	}
	return false
}
