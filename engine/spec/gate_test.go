package spec

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"anechat/engine/kv"
	"anechat/engine/model"
)

// fakeClock is a clock that only the model calls move: the tests inject
// call costs through it.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// costedTarget charges every model call its width's cost (sec, seconds)
// times load(n, w) for the n-th call made through it (1-based, counted in
// *n) of width w, on clock.
type costedTarget struct {
	Target
	clock *fakeClock
	sec   map[int]float64
	load  func(n, w int) float64
	n     *int
}

func (c costedTarget) Forward(ctx context.Context, tokens []int32, want model.Output) (model.Result, error) {
	*c.n++
	c.clock.t = c.clock.t.Add(time.Duration(c.sec[len(tokens)] * c.load(*c.n, len(tokens)) * float64(time.Second)))
	return c.Target.Forward(ctx, tokens, want)
}

// smolCosts are SmolLM2-135M's call times on the CPU (BENCHMARKS.md, after
// the row kernels): a width-4 call costs 1.36 width-1 calls.
var smolCosts = map[int]float64{1: 0.0109, 2: 0.0112, 3: 0.0130, 4: 0.0148, 5: 0.0170, 6: 0.0192, 7: 0.0213, 8: 0.0235}

// truthSource proposes the width-1 continuation of whichever prompt the
// request is (an oracle for every request of a sequence): drafts that are
// always right, so whether they are sent is the cost model's call alone.
type truthSource struct {
	truths [][]int32 // prompt + width-1 output, per prompt
	cur    []int32
	n      int
	// sparse: propose nothing at every third position, so width-1 calls
	// come between the wide ones.
	sparse bool
}

func (s *truthSource) Name() string { return "truth" }
func (s *truthSource) Reset(h []int32) {
	s.cur, s.n = nil, len(h)
	for _, t := range s.truths {
		if len(t) >= len(h) && slices.Equal(t[:len(h)], h) {
			s.cur = t
		}
	}
}
func (s *truthSource) Append(int32) { s.n++ }
func (s *truthSource) Propose(n int) Proposal {
	end := min(s.n+n, len(s.cur))
	if end <= s.n || (s.sparse && s.n%3 == 0) {
		return Proposal{}
	}
	return Proposal{Tokens: s.cur[s.n:end], Match: 8}
}

// gateRig is one Decoder serving a sequence of requests, as a model load
// in the app or the API does, with the call costs injected.
type gateRig struct {
	t      *testing.T
	m      *fakeModel
	dec    *Decoder
	clock  *fakeClock
	hist   [][]int32
	base   [][]int32 // width-1 output per prompt
	nCalls int
}

const gateTokens = 160

func newGateRig(t *testing.T, prompts int, sparse bool) *gateRig {
	const vocab = 40
	g := &gateRig{t: t, m: newFakeModel(vocab), clock: &fakeClock{t: time.Unix(0, 0)}}
	src := &truthSource{sparse: sparse}
	for _, h := range distinctPrompts(prompts, vocab) {
		out := ids(reference(t, g.m, h, Request{MaxTokens: gateTokens}))
		g.hist = append(g.hist, h)
		g.base = append(g.base, out)
		src.truths = append(src.truths, append(slices.Clone(h), out...))
	}
	g.dec = &Decoder{Sources: []Source{src}, Costs: NewCosts(smolCosts), now: g.clock.now}
	return g
}

// distinctPrompts returns n distinct prompts (different first tokens, so the
// truth source tells them apart).
func distinctPrompts(n, vocab int) [][]int32 {
	out := prompts(n, vocab)
	for i := range out {
		out[i] = append([]int32{int32(i % vocab)}, out[i]...)
	}
	return out
}

// serve runs prompt i at width 4 with the calls' costs scaled by load (of
// the rig's call count) and checks the output is width 1's.
func (g *gateRig) serve(i int, load func(n, w int) float64) Stats {
	g.t.Helper()
	h := g.hist[i]
	c, err := kv.New(g.m.Config().KV, max(MaxWidth, len(h)))
	if err != nil {
		g.t.Fatal(err)
	}
	if n := len(h) - 1; n > 0 {
		if _, err := g.m.Forward(context.Background(), h[:n], 0, c, model.Argmax); err != nil {
			g.t.Fatal(err)
		}
		if err := c.Commit(n); err != nil {
			g.t.Fatal(err)
		}
	}
	tgt := costedTarget{Target: BackendTarget{g.m, c}, clock: g.clock, sec: smolCosts, load: load, n: &g.nCalls}
	var out []int32
	st, err := g.dec.Run(context.Background(), tgt, Request{History: h, MaxTokens: gateTokens, Width: 4, Room: 1000}, func(tk Token) error {
		out = append(out, tk.ID)
		return nil
	})
	if err != nil {
		g.t.Fatal(err)
	}
	if !slices.Equal(out, g.base[i]) {
		g.t.Fatalf("prompt %d: output differs from width 1", i)
	}
	return st
}

// spike is a burst of load: the machine runs 6x slower for calls from..to.
func spike(from, to int) func(int, int) float64 {
	return func(n, _ int) float64 {
		if n >= from && n <= to {
			return 6
		}
		return 1
	}
}

// wideSpike makes wide calls 8x as costly as measured for calls from..to,
// width-1 calls as measured: wide calls truly do not pay meanwhile.
func wideSpike(from, to int) func(int, int) float64 {
	return func(n, w int) float64 {
		if w > 1 && n >= from && n <= to {
			return 8
		}
		return 1
	}
}

func quiet(int, int) float64 { return 1 }

// TestGateRecoversAfterSpike reproduces issue 23's "speculation stops
// drafting for the rest of a model load": a burst of load during one
// request (every call 6x slower for a while, width-1 calls included) must
// not stop the requests after it from drafting once the machine is quiet
// again. The drafts are always right, so at SmolLM2's costs a quiet
// request drafts nearly every call.
func TestGateRecoversAfterSpike(t *testing.T) {
	g := newGateRig(t, 6, false)
	fresh := g.serve(0, quiet)
	if fresh.Accepted < gateTokens/2 {
		t.Fatalf("a quiet request accepted %d drafts: the rig does not draft", fresh.Accepted)
	}
	// The burst: the second request's calls run 6x slower.
	first := g.nCalls + 1
	g.serve(1, spike(first, first+1000))
	var after []Stats
	for i := 2; i < 6; i++ {
		after = append(after, g.serve(i, quiet))
	}
	// The burst's calls were all slower alike: a wide call compared with a
	// width-1 call of the same moment costs what it did, so the requests
	// after it (and even the first, which waited for a fresh width-1 call)
	// draft as a quiet one does.
	for i, a := range after {
		if a.Accepted < fresh.Accepted*9/10 || a.Declined != 0 {
			t.Fatalf("request %d after the burst: %v (quiet: %v)", i+1, statsLine(after), statsLine([]Stats{fresh}))
		}
	}
}

func statsLine(sts []Stats) [][3]int {
	var out [][3]int
	for _, s := range sts {
		out = append(out, [3]int{s.TargetCalls, s.Drafted, s.Accepted})
	}
	return out
}

// TestGateDeclinesThenRecovers: while wide calls truly cost far more than
// measured (8x, width-1 calls as measured, so the comparison is fresh), the
// gate declines the drafts, says why in DraftNote and probes once every
// probeEvery declined calls; once the calls cost what was measured again,
// the next requests draft as on a quiet machine, and their stats carry no
// note.
func TestGateDeclinesThenRecovers(t *testing.T) {
	calm := newGateRig(t, 4, true)
	var want []Stats
	for i := range 4 {
		want = append(want, calm.serve(i, quiet))
	}
	for _, st := range want {
		if st.Accepted < gateTokens/3 || st.Declined != 0 || st.Probes != 0 || st.DraftNote != "" {
			t.Fatalf("a quiet request: %+v", st)
		}
	}
	g := newGateRig(t, 4, true)
	busy := g.serve(0, wideSpike(1, 1000))
	if busy.Declined < probeEvery || busy.Probes == 0 || busy.Accepted >= want[0].Accepted*3/4 {
		t.Fatalf("wide calls at 8x: declined %d, probes %d, accepted %d (quiet: %d)", busy.Declined, busy.Probes, busy.Accepted, want[0].Accepted)
	}
	// One probe per probeEvery declined calls.
	if n := (busy.Declined + busy.Probes) / (probeEvery + 1); busy.Probes < n || busy.Probes > n+1 {
		t.Fatalf("%d probes for %d declined calls, want about %d", busy.Probes, busy.Declined, n)
	}
	var x float64
	if _, err := fmt.Sscanf(busy.DraftNote, "drafting paused: wide calls measured %fx width 1", &x); err != nil || !strings.HasSuffix(busy.DraftNote, "x width 1") || x < 2 {
		t.Fatalf("DraftNote %q: ratio %v (%v), want a ratio over 2 (measured 1.0-1.4, then 8x)", busy.DraftNote, x, err)
	}
	// Quiet again: the next request drafts again within a probe's wait,
	// the one after as on a quiet machine.
	a, b := g.serve(1, quiet), g.serve(2, quiet)
	if a.Accepted < want[1].Accepted*2/3 || a.Probes > 1 {
		t.Fatalf("first quiet request after the burst: %+v (quiet: %+v)", a, want[1])
	}
	if b.Accepted < want[2].Accepted*9/10 || b.Declined != 0 || b.DraftNote != "" {
		t.Fatalf("second quiet request after the burst: %+v (quiet: %+v)", b, want[2])
	}
}

// TestDraftNoteWhenNothingDrafts: a reply of width 4 that drafts nothing
// says why: nothing to copy, or nothing likely enough to be kept; width 1
// and a reply that drafted say nothing.
func TestDraftNoteWhenNothingDrafts(t *testing.T) {
	const vocab = 40
	m := newFakeModel(vocab)
	h := prompts(1, vocab)[0]
	costs := FixedCosts(smolCosts)
	_, none := run(t, m, &Decoder{Sources: []Source{&truthSource{}}, Costs: costs}, h, Request{MaxTokens: 20, Width: 4})
	if none.Drafted != 0 || none.DraftNote != "no drafts: nothing in the text to copy from" {
		t.Fatalf("no proposals: %+v", none)
	}
	_, wrong := run(t, m, &Decoder{Sources: []Source{&wrongSource{m: m}}, Costs: FixedCosts(map[int]float64{1: 1, 2: 1.9, 3: 2.8, 4: 3.7})}, h, Request{MaxTokens: 20, Width: 4})
	if wrong.Drafted != 0 || wrong.DraftNote != "no drafts: none was likely enough to be accepted to pay for a wider call" {
		t.Fatalf("wrong proposals: %+v", wrong)
	}
	_, one := run(t, m, &Decoder{Sources: []Source{&truthSource{}}, Costs: costs}, h, Request{MaxTokens: 20, Width: 1})
	if one.DraftNote != "" {
		t.Fatalf("width 1: %+v", one)
	}
}

// TestCostsFreshComparison: a wide call is compared with the width-1 call
// nearest it in the same request, before or after it, so a burst that slows
// both alike leaves the ratio as it was, and one that slows only the wide
// call moves it; a width-1 time from an earlier request is not fresh.
func TestCostsFreshComparison(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	c := NewCosts(map[int]float64{1: 0.010, 4: 0.0136})
	c.Observe(1, ms(10)) // a quiet width-1 call, then a new request
	c.newRequest()
	// The burst: wide calls 6x, then a width-1 call 6x after them.
	for range 4 {
		c.Observe(4, ms(81.6))
	}
	c.Observe(1, ms(60))
	if r := c.Ratio(4); r < 1.35 || r > 1.37 {
		t.Fatalf("ratio %v after a burst that slowed every call alike, want 1.36", r)
	}
	// Only the wide calls slower: the ratio follows.
	for range 4 {
		c.Observe(4, ms(300))
	}
	if r := c.Ratio(4); r < 2.5 {
		t.Fatalf("ratio %v after wide calls at 5x a fresh width-1 call", r)
	}
	// A sample counts at most twice its width.
	d := NewCosts(map[int]float64{1: 0.010, 4: 0.0136})
	d.Observe(1, ms(10))
	d.Observe(4, ms(10000))
	if r, want := d.Ratio(4), (measuredWeight*1.36+8)/(measuredWeight+1); r > want+1e-9 {
		t.Fatalf("one 1000x spike: ratio %v, want at most %v", r, want)
	}
}
