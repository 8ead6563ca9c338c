package refrun_test

import (
	"context"
	"slices"
	"testing"

	"anechat/engine"
	"anechat/engine/kv"
)

// memStore is an engine.SnapshotStore over a map (whole blocks of the
// longest shared prefix, as the storage index matches them).
type memStore struct {
	dir  string
	recs map[string]memRec
}

type memRec struct {
	key    string
	meta   kv.Meta
	blocks []string
	tokens int
}

func (m *memStore) Dir() string { return m.dir }

func (m *memStore) LongestPrefix(_ context.Context, meta kv.Meta, ids []int32) (engine.StoredSnapshot, bool, error) {
	want := kv.BlockHashes(meta, ids)
	best, path := 0, ""
	for p, r := range m.recs {
		n := 0
		for r.meta == meta && n < len(want) && n < len(r.blocks) && want[n] == r.blocks[n] {
			n++
		}
		if n > best {
			best, path = n, p
		}
	}
	if best == 0 {
		return engine.StoredSnapshot{}, false, nil
	}
	return engine.StoredSnapshot{Path: path, Tokens: m.recs[path].tokens}, true, nil
}

func (m *memStore) Replace(_ context.Context, key string, meta kv.Meta, ids []int32, s engine.StoredSnapshot) ([]string, error) {
	var orphans []string
	for p, r := range m.recs {
		if key != "" && r.key == key && p != s.Path {
			delete(m.recs, p)
			orphans = append(orphans, p)
		}
	}
	m.recs[s.Path] = memRec{key: key, meta: meta, blocks: kv.BlockHashes(meta, ids), tokens: len(ids)}
	return orphans, nil
}

func (m *memStore) Forget(_ context.Context, path string) error {
	delete(m.recs, path)
	return nil
}

// TestResumeContinuesAsInMemory: a conversation saved after its first turn
// and resumed from the KV snapshot by a new session (as after a restart)
// continues exactly as the session that kept it in memory, with
// speculation on, greedy (the generate function) and sampled with a seed
// (the sample function): the snapshot holds the rows as the backend
// computed them.
func TestResumeContinuesAsInMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(testing.TB) pair
		temp float64
	}{{"gemma4", gemmaPair, 0}, {"stories", storiesPair, 0}, {"gemma4 sampled", gemmaPair, 0.8}} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.open(t)
			ctx := context.Background()
			store := &memStore{dir: t.TempDir(), recs: map[string]memRec{}}
			meta := kv.Meta{Model: p.ml.Config().Fingerprint, Tokenizer: "test"}
			session := func() *engine.Session {
				s, err := engine.NewSession(p.ml, engine.SessionOptions{Snapshots: store, Meta: meta,
					Costs: freeCosts()})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			gen := func(s *engine.Session, prompt []int32, n int) ([]int32, engine.Stats) {
				if err := s.Resume(ctx, prompt, nil); err != nil {
					t.Fatal(err)
				}
				var out []int32
				st, err := s.Generate(ctx, engine.GenerateOptions{MaxTokens: n, Width: 8, Temperature: tc.temp, Seed: 3}, func(tk engine.Token) error {
					out = append(out, tk.ID)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return out, st
			}
			V := p.ml.Config().VocabSize
			var turn1 []int32
			for _, pr := range prompts(V) {
				turn1 = append(turn1, pr...)
			}
			turn1 = turn1[:60]
			s1 := session()
			got1, _ := gen(s1, turn1, 16)
			if _, err := s1.Save(ctx, "conv"); err != nil {
				t.Fatal(err)
			}
			if len(store.recs) != 1 {
				t.Fatalf("%d snapshots saved", len(store.recs))
			}
			turn2 := append(append(slices.Clone(turn1), got1...), prompts(V)[1][:9]...)
			mem, _ := gen(s1, turn2, 24)
			s2 := session()
			resumed, st := gen(s2, turn2, 24)
			if st.ResumedTokens == 0 {
				t.Fatal("the second session resumed nothing")
			}
			if !slices.Equal(resumed, mem) {
				t.Fatalf("resumed %v, in memory %v", resumed, mem)
			}
		})
	}
}
