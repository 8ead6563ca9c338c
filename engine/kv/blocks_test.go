package kv

import "testing"

func TestBlockHashes(t *testing.T) {
	ids := make([]int32, 3*BlockSize+10)
	for i := range ids {
		ids[i] = int32(i % 97)
	}
	h := BlockHashes(testMeta, ids)
	if len(h) != 3 {
		t.Fatalf("%d hashes for %d tokens, want 3", len(h), len(ids))
	}
	if got := BlockHashes(testMeta, ids[:2*BlockSize]); len(got) != 2 || got[0] != h[0] || got[1] != h[1] {
		t.Errorf("a prefix's hashes are not a prefix of the hashes: %v vs %v", got, h)
	}
	if got := BlockHashes(testMeta, ids[:BlockSize-1]); len(got) != 0 {
		t.Errorf("%d hashes for less than a block", len(got))
	}
	// A change in block 1 changes hashes 1 and 2 (chained), not 0.
	other := append([]int32(nil), ids...)
	other[BlockSize+5]++
	got := BlockHashes(testMeta, other)
	if got[0] != h[0] || got[1] == h[1] || got[2] == h[2] {
		t.Errorf("change in block 1: %v vs %v", got, h)
	}
	// Bound to the model, tokenizer and template.
	for _, m := range []Meta{{Model: "x", Tokenizer: testMeta.Tokenizer, Template: testMeta.Template}, {Model: testMeta.Model, Tokenizer: "y", Template: testMeta.Template}, {Model: testMeta.Model, Tokenizer: testMeta.Tokenizer}} {
		if BlockHashes(m, ids)[0] == h[0] {
			t.Errorf("meta %+v does not change the hashes", m)
		}
	}
	// Field boundaries are unambiguous.
	a := BlockHashes(Meta{Model: "ab", Tokenizer: "c"}, ids)
	b := BlockHashes(Meta{Model: "a", Tokenizer: "bc"}, ids)
	if a[0] == b[0] {
		t.Error("meta fields run into each other")
	}
}
