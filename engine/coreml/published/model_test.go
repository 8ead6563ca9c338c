package published

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"anechat/engine"
	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/model/safetensors"
	"anechat/engine/spec"
)

// The fixture geometry is the synthetic published bundle's geometry: three decode
// chunks (PUBLISHED.md's layout cut small): chunk1 owns two sliding and
// one full cache slot, chunk2 one of each and hands kv13/kv14 on, chunk3
// ends in the argmax.
const (
	pgV, pgH, pgL, pgP = 64, 8, 6, 2
	pgCtx, pgW, pgK    = 24, 16, 4
	pgN                = 8 // the prefill chunks' width
	pgHdS, pgHdF, pgSW = 4, 8, 8
)

var pgSlots = [][2]int{{2, 1}, {1, 1}, {0, 0}} // per chunk: sliding, full

// pgLayers are the fixture's layer_types: chunk1 owns layers 0-2 (its
// sliding slots 0, 1 and full slot 0), chunk2 layers 3 and 4 (the KV
// producers, returned by a prefill as kv13_* and kv14_*), layer 5 shares.
const pgLayers = `["sliding_attention","sliding_attention","full_attention","sliding_attention","full_attention","sliding_attention"]`

// pgPrefillOut names, per prefill chunk, the K/V outputs and the slot
// (8*chunk+4*kind+slot, as fakeFn numbers them) whose rows they are.
var pgPrefillOut = []map[string]int{{"K0": 0, "K1": 1, "K2": 4}, {"kv13_k": 8, "kv14_k": 12}, {}}

// fixture writes a published bundle with random INT8 sidecars and RoPE
// tables (fp16) and empty chunk directories; the fake runtime supplies
// the functions.
func fixture(t *testing.T) string { t.Helper(); return fixtureWith(t, false) }

// fixtureWith is fixture, with prefill_chunk1..3 when prefill.
func fixtureWith(t *testing.T, prefill bool) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(7))
	cfg := fmt.Sprintf(`{"model_name":"tiny-published","architecture":"gemma4","hidden_size":%d,"context_length":%d,"vocab_size":%d,"num_layers":%d,"per_layer_dim":%d,"sliding_window":%d,"bos_token_id":2,"eos_token_id":1,"embed_scale":2.828,"per_layer_embed_scale":2.0,"layer_types":%s,"num_kv_shared_layers":1}`,
		pgH, pgCtx, pgV, pgL, pgP, pgW, pgLayers)
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("model_config.json", []byte(cfg))
	rnd := func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return b
	}
	scales := func() []byte {
		b := make([]byte, 2*pgV)
		for r := range pgV {
			binary.LittleEndian.PutUint16(b[2*r:], coreml.ToHalf(0.5+rng.Float32()))
		}
		return b
	}
	write("embed_tokens_q8.bin", rnd(pgV*pgH))
	write("embed_tokens_scales.bin", scales())
	write("embed_tokens_per_layer_q8.bin", rnd(pgV*pgL*pgP))
	write("embed_tokens_per_layer_scales.bin", scales())
	write("per_layer_projection.bin", make([]byte, pgL*pgP*pgH*2))
	for _, kind := range []string{"sliding", "full"} {
		w := pgHdS
		if kind == "full" {
			w = pgHdF
		}
		for _, f := range []string{"cos", "sin"} {
			vals := make([]uint16, pgCtx*w)
			for i := range vals {
				vals[i] = coreml.ToHalf(rng.Float32()*2 - 1)
			}
			writeNPYData(t, filepath.Join(dir, f+"_"+kind+".npy"), vals, pgCtx, w)
		}
	}
	for j := range pgSlots {
		names := []string{fmt.Sprintf("chunk%d.mlmodelc", j+1)}
		if prefill {
			names = append(names, fmt.Sprintf("prefill_chunk%d.mlmodelc", j+1))
		}
		for _, n := range names {
			if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// writeNPYData writes a float16 .npy v1 file of shape with vals.
func writeNPYData(t *testing.T, path string, vals []uint16, shape ...int) {
	t.Helper()
	var dims []string
	for _, d := range shape {
		dims = append(dims, fmt.Sprint(d))
	}
	h := fmt.Sprintf("{'descr': '<f2', 'fortran_order': False, 'shape': (%s), }", strings.Join(dims, ", "))
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(b[8:], uint16(len(h)))
	b = append(b, h...)
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func f16(name string, shape ...int) mlcore.FeatureSpec {
	return mlcore.FeatureSpec{Name: name, MultiArray: true, DType: mlcore.Float16, Shape: shape}
}

// features is the contract of PUBLISHED.md for chunk j at width T (1:
// decode_q1, pgK: verify_qK).
func features(j, T int) (ins, outs []mlcore.FeatureSpec) {
	ins = []mlcore.FeatureSpec{
		f16("hidden_states", 1, T, pgH),
		f16("causal_mask_full", 1, 1, T, pgCtx), f16("causal_mask_sliding", 1, 1, T, pgW),
		f16("cos_s", 1, 1, T, pgHdS), f16("sin_s", 1, 1, T, pgHdS), f16("cos_f", 1, 1, T, pgHdF), f16("sin_f", 1, 1, T, pgHdF),
	}
	if T == 1 {
		ins = append(ins, f16("update_mask", 1, 1, pgCtx, 1))
	} else {
		ins = append(ins, f16("update_indicator", 1, 1, pgCtx, T))
	}
	if j == 0 {
		ins = append(ins, f16("per_layer_raw", 1, T, pgL*pgP))
		outs = append(outs, f16("per_layer_combined_out", 1, T, pgL*pgP))
	} else {
		ins = append(ins, f16("per_layer_combined", 1, T, pgL*pgP))
	}
	ns, nf := pgSlots[j][0], pgSlots[j][1]
	if ns > 0 {
		for _, n := range []string{"K", "V"} {
			ins = append(ins, f16(n+"_sliding_in", ns, 1, pgW, pgSW), f16(n+"_full_in", nf, 1, pgCtx, pgSW))
			if T == 1 {
				outs = append(outs, f16(n+"_sliding_out", ns, 1, pgW, pgSW), f16(n+"_full_out", nf, 1, pgCtx, pgSW))
			} else {
				outs = append(outs, f16("new_"+n+"_sliding", ns, 1, T, pgHdS), f16("new_"+n+"_full", nf, 1, T, pgHdF))
			}
		}
	}
	if j == 1 {
		outs = append(outs, f16("kv13_k", 1, 1, pgW, pgHdS), f16("kv13_v", 1, 1, pgW, pgHdS), f16("kv14_k", 1, 1, pgCtx, pgHdF), f16("kv14_v", 1, 1, pgCtx, pgHdF))
	}
	if j == 2 {
		ins = append(ins, f16("kv13_k", 1, 1, pgW, pgHdS), f16("kv13_v", 1, 1, pgW, pgHdS), f16("kv14_k", 1, 1, pgCtx, pgHdF), f16("kv14_v", 1, 1, pgCtx, pgHdF))
		id := mlcore.FeatureSpec{Name: "token_id", MultiArray: true, DType: mlcore.Int32, Shape: []int{1}}
		if T > 1 {
			id = mlcore.FeatureSpec{Name: "token_ids", MultiArray: true, DType: mlcore.Int32, Shape: []int{1, T}}
		}
		outs = append(outs, id)
	} else {
		outs = append(outs, f16("hidden_states_out", 1, T, pgH))
	}
	return ins, outs
}

// prefillFeatures is prefill chunk j's contract (PUBLISHED.md).
func prefillFeatures(j int) (ins, outs []mlcore.FeatureSpec) {
	N := pgN
	ins = []mlcore.FeatureSpec{f16("hidden_states", 1, N, pgH), f16("causal_mask", 1, 1, N, N),
		f16("cos_s", 1, 1, N, pgHdS), f16("sin_s", 1, 1, N, pgHdS), f16("cos_f", 1, 1, N, pgHdF), f16("sin_f", 1, 1, N, pgHdF)}
	switch j {
	case 0:
		ins = append(ins, f16("per_layer_raw", 1, N, pgL*pgP))
		outs = append(outs, f16("per_layer_combined_out", 1, N, pgL*pgP), f16("hidden_states_out", 1, N, pgH))
	case 1:
		ins = append(ins, f16("per_layer_combined", 1, N, pgL*pgP))
		outs = append(outs, f16("hidden_states_out", 1, N, pgH))
	case 2:
		ins = append(ins, f16("per_layer_combined", 1, N, pgL*pgP), f16("last_position_mask", 1, N, 1),
			f16("kv13_k", 1, 1, N, pgHdS), f16("kv13_v", 1, 1, N, pgHdS), f16("kv14_k", 1, 1, N, pgHdF), f16("kv14_v", 1, 1, N, pgHdF))
		outs = append(outs, mlcore.FeatureSpec{Name: "token_id", MultiArray: true, DType: mlcore.Int32, Shape: []int{1}})
	}
	for k, u := range pgPrefillOut[j] {
		hd := pgHdS
		if u%8 >= 4 {
			hd = pgHdF
		}
		v := "V" + k[1:]
		if k[:2] == "kv" {
			v = k[:len(k)-1] + "v"
		}
		outs = append(outs, f16(k, 1, 1, N, hd), f16(v, 1, 1, N, hd))
	}
	return ins, outs
}

// fakeRuntime is a fake mlcore.Runtime that loads the synthetic bundle's
// chunks as fakeFns. edit, when set, changes a function's features (a
// damaged bundle); noVerify makes verify_qK fail to load, from chunk
// verifyFrom+1 on when that is set.
type fakeRuntime struct {
	edit       func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec)
	noVerify   bool
	verifyFrom int
	calls      map[string]int
}

func (r *fakeRuntime) Compile(context.Context, string) (string, error) {
	return "", errors.New("the fixture's chunks are compiled")
}

func (r *fakeRuntime) Load(_ context.Context, compiled string, o mlcore.LoadOptions) (mlcore.Function, error) {
	var j int
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	if _, err := fmt.Sscanf(filepath.Base(compiled), "prefill_chunk%d.mlmodelc", &j); err == nil {
		ins, outs := prefillFeatures(j - 1)
		if r.edit != nil {
			ins, outs = r.edit(j-1, FuncPrefill, ins, outs)
		}
		return &fakeFn{j: j - 1, T: pgN, ins: ins, outs: outs, calls: r.calls, name: FuncPrefill}, nil
	}
	if _, err := fmt.Sscanf(filepath.Base(compiled), "chunk%d.mlmodelc", &j); err != nil {
		return nil, err
	}
	j--
	name, T := FuncDecode, 1
	if o.FunctionName == FuncVerify {
		if r.noVerify && j >= r.verifyFrom {
			return nil, errors.New("no function verify_qK")
		}
		name, T = FuncVerify, pgK
	} else if o.FunctionName != "" {
		return nil, fmt.Errorf("no function %s", o.FunctionName)
	}
	ins, outs := features(j, T)
	if r.edit != nil {
		ins, outs = r.edit(j, name, ins, outs)
	}
	return &fakeFn{j: j, T: T, ins: ins, outs: outs, calls: r.calls, name: name}, nil
}

// fakeFn executes a toy model that follows the contract: each owned cache
// slot u gets, at position p, the rows k[d] = e[d%H]*(1+u/4) + cos[p][d],
// v[d] = e[(d+1)%H] - cos[p][d] (e: the chunk's hidden row); the chunk
// builds the key buffers as CoreML-LLM's graphs do (PUBLISHED.md, "The
// sliding window": a sliding buffer shifted by the call's T rows, a full
// one with them scattered in) and hashes, in slot order, the rows each
// query's masks open into hidden[j+1]; the last chunk picks
// hash(hidden, per-layer row) % V. The oracle hashes the rows Gemma's
// attention sees (positions p-W+1..p on sliding slots, 0..p on full
// ones), so a host whose masks, update masks or cache inputs open any
// other row gets other ids.
type fakeFn struct {
	j, T      int
	name      string
	ins, outs []mlcore.FeatureSpec
	calls     map[string]int
}

func (f *fakeFn) Inputs() []mlcore.FeatureSpec  { return f.ins }
func (f *fakeFn) Outputs() []mlcore.FeatureSpec { return f.outs }
func (f *fakeFn) Stats() mlcore.Stats           { return mlcore.Stats{} }
func (f *fakeFn) Close() error                  { return nil }

// slotRows is the toy model's K and V rows of slot u for hidden row e and
// RoPE row c (hd wide).
func slotRows(e []uint16, c []uint16, u, hd int) (k, v []uint16) {
	for d := range hd {
		k = append(k, coreml.ToHalf(safetensors.HalfToFloat(e[d%len(e)])*(1+float32(u)/4)+safetensors.HalfToFloat(c[d])))
		v = append(v, coreml.ToHalf(safetensors.HalfToFloat(e[(d+1)%len(e)])-safetensors.HalfToFloat(c[d])))
	}
	return k, v
}

func hashRows(h interface{ Write([]byte) (int, error) }, rows ...[]uint16) {
	for _, r := range rows {
		for _, x := range r {
			h.Write([]byte{byte(x), byte(x >> 8)})
		}
	}
}

func (f *fakeFn) Predict(_ context.Context, in, out map[string]mlcore.Buffer) error {
	f.calls[f.name]++
	if f.name == FuncPrefill {
		return f.prefill(in, out)
	}
	T, j := f.T, f.j
	h16 := func(m map[string]mlcore.Buffer, n string) []uint16 { return m[n].Float16s() }
	// The positions: the update mask's one (decode) or column 0 of the
	// update indicator (verify).
	var s int
	if T == 1 {
		um := h16(in, "update_mask")
		s = slices.Index(um, coreml.ToHalf(1))
	} else {
		ui := h16(in, "update_indicator")
		for p := range pgCtx {
			if ui[p*T] == coreml.ToHalf(1) {
				s = p
				break
			}
		}
	}
	// The masks are added to the scores, so the toy model needs them to
	// be 0 (attend) or -inf (skip); which slots they open is what the
	// hashes below depend on.
	zero, ninf := coreml.ToHalf(0), coreml.ToHalf(float32(math.Inf(-1)))
	for _, m := range []string{"causal_mask_full", "causal_mask_sliding"} {
		for i, x := range h16(in, m) {
			if x != zero && x != ninf {
				return fmt.Errorf("chunk %d %s: %s entry %d is %#x, neither 0 nor -inf", j, f.name, m, i, x)
			}
		}
	}
	hid := h16(in, "hidden_states")
	plName := "per_layer_combined"
	if j == 0 {
		plName = "per_layer_raw"
		copy(h16(out, "per_layer_combined_out"), h16(in, plName))
	}
	if j == 2 {
		for t := range T {
			h := fnv.New32a()
			hashRows(h, hid[t*pgH:(t+1)*pgH], h16(in, plName)[t*pgL*pgP:(t+1)*pgL*pgP])
			name := "token_id"
			if T > 1 {
				name = "token_ids"
			}
			out[name].Int32s()[t] = int32(h.Sum32() % pgV)
		}
		return nil
	}
	hout := h16(out, "hidden_states_out")
	copy(hout, hid)
	ns, nf := pgSlots[j][0], pgSlots[j][1]
	// newRows[kind][slot][t] = (k, v)
	type kvRow struct{ k, v []uint16 }
	newRows := [2][][]kvRow{}
	for kind, n := range []int{ns, nf} {
		hd, cos := pgHdS, h16(in, "cos_s")
		if kind == 1 {
			hd, cos = pgHdF, h16(in, "cos_f")
		}
		for sl := range n {
			var rows []kvRow
			for t := range T {
				k, v := slotRows(hid[t*pgH:(t+1)*pgH], cos[t*hd:(t+1)*hd], 8*j+4*kind+sl, hd)
				rows = append(rows, kvRow{k, v})
			}
			newRows[kind] = append(newRows[kind], rows)
		}
	}
	// row of slot sl at position q for query t: from the cache inputs
	// (positions before s) or the call's own rows.
	cacheRow := func(name string, rows, sl, r, hd int) []uint16 {
		b := h16(in, name)
		o := (sl*rows + r) * pgSW
		for d := hd; d < pgSW; d++ {
			if b[o+d] != 0 {
				panic(fmt.Sprintf("%s slot %d row %d: column %d is not zero padding", name, sl, r, d))
			}
		}
		return b[o : o+hd]
	}
	// The keys a layer attends to, as gemma4_swa_chunks.py builds them
	// (PUBLISHED.md, "The sliding window"): a sliding layer's buffer
	// shifted left by T with the call's T rows appended (decode_q1: by
	// one), a full layer's buffer with the call's rows scattered in at
	// s..s+T-1; row t hashes, in slot order, the slots its mask opens.
	attend := func(kind, sl, i int) (k, v []uint16) {
		if kind == 0 {
			if i >= pgW-T {
				r := newRows[0][sl][i-(pgW-T)]
				return r.k, r.v
			}
			return cacheRow("K_sliding_in", pgW, sl, i+T, pgHdS), cacheRow("V_sliding_in", pgW, sl, i+T, pgHdS)
		}
		if i >= s && i < s+T {
			r := newRows[1][sl][i-s]
			return r.k, r.v
		}
		return cacheRow("K_full_in", pgCtx, sl, i, pgHdF), cacheRow("V_full_in", pgCtx, sl, i, pgHdF)
	}
	for t := range T {
		h := fnv.New32a()
		for kind, n := range []int{ns, nf} {
			m, w := h16(in, "causal_mask_sliding")[t*pgW:(t+1)*pgW], pgW
			if kind == 1 {
				m, w = h16(in, "causal_mask_full")[t*pgCtx:(t+1)*pgCtx], pgCtx
			}
			for sl := range n {
				for i := range w {
					if m[i] == zero {
						k, v := attend(kind, sl, i)
						hashRows(h, k, v)
					}
				}
			}
		}
		hout[t*pgH+j+1] = coreml.ToHalf(float32(h.Sum32() % 2048))
	}
	// The cache outputs.
	for _, n := range []string{"K", "V"} {
		pick := func(r kvRow) []uint16 {
			if n == "K" {
				return r.k
			}
			return r.v
		}
		if T == 1 {
			so, si := h16(out, n+"_sliding_out"), h16(in, n+"_sliding_in")
			fo, fi := h16(out, n+"_full_out"), h16(in, n+"_full_in")
			clear(so)
			for sl := range ns {
				copy(so[sl*pgW*pgSW:], si[sl*pgW*pgSW+pgSW:(sl+1)*pgW*pgSW])
				copy(so[(sl*pgW+pgW-1)*pgSW:], pick(newRows[0][sl][0]))
			}
			copy(fo, fi)
			for sl := range nf {
				copy(fo[(sl*pgCtx+s)*pgSW:], pick(newRows[1][sl][0]))
			}
		} else {
			so, fo := h16(out, "new_"+n+"_sliding"), h16(out, "new_"+n+"_full")
			for sl := range ns {
				for t := range T {
					copy(so[(sl*T+t)*pgHdS:], pick(newRows[0][sl][t]))
				}
			}
			for sl := range nf {
				for t := range T {
					copy(fo[(sl*T+t)*pgHdF:], pick(newRows[1][sl][t]))
				}
			}
		}
	}
	return nil
}

// openPub opens the fixture's Model through the Core ML executor's
// loading code on the fake runtime.
func openPub(t *testing.T, dir string, rt *fakeRuntime) (*Model, error) {
	t.Helper()
	p, err := coreml.ReadPublished(dir)
	if err != nil {
		return nil, err
	}
	r, err := NewCoreMLExecutor(context.Background(), rt, p, coreml.CoreMLOptions{CacheDir: t.TempDir()}, nil)
	if err != nil {
		return nil, err
	}
	be, err := NewModel(p, r, "test")
	if err != nil {
		r.Close()
		return nil, err
	}
	t.Cleanup(func() { be.Close() })
	return be, nil
}

// oracle computes the toy model's greedy continuation of seq directly
// from the bundle's files: the ids a correct host gets.
type oracle struct {
	be *Model
	// rows[u][p]: the K and V rows of slot u (8*chunk+4*kind+slot) at p
	// (of the sequence next was last called with).
	rows map[int][][2][]uint16
}

func (o *oracle) next(seq []int32) int32 {
	be := o.be
	o.rows = map[int][][2][]uint16{}
	var id int32
	for p, tok := range seq {
		hid := make([]uint16, pgH)
		be.embed.RowHalf(hid, int(tok))
		pl := make([]uint16, pgL*pgP)
		be.ple.RowHalf(pl, int(tok))
		for j := range 2 {
			h := fnv.New32a()
			for kind, n := range pgSlots[j] {
				hd, tab := pgHdS, be.ropes["cos_s"]
				if kind == 1 {
					hd, tab = pgHdF, be.ropes["cos_f"]
				}
				c := make([]uint16, hd)
				tab.row(c, p)
				for sl := range n {
					u := 8*j + 4*kind + sl
					if len(o.rows[u]) == p {
						k, v := slotRows(hid, c, u, hd)
						o.rows[u] = append(o.rows[u], [2][]uint16{k, v})
					}
					lo := 0
					if kind == 0 {
						lo = max(0, p-pgW+1)
					}
					for q := lo; q <= p; q++ {
						hashRows(h, o.rows[u][q][0], o.rows[u][q][1])
					}
				}
			}
			hid[j+1] = coreml.ToHalf(float32(h.Sum32() % 2048))
		}
		h := fnv.New32a()
		hashRows(h, hid, pl)
		id = int32(h.Sum32() % pgV)
	}
	return id
}

func TestModelReadsTheContract(t *testing.T) {
	be, err := openPub(t, fixture(t), &fakeRuntime{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := be.Config()
	if cfg.VocabSize != pgV || cfg.ContextLen != pgCtx || len(cfg.KV.Layers) != 5 || be.VerifyWidth() != pgK {
		t.Fatalf("config %+v, verify width %d", cfg, be.VerifyWidth())
	}
	sl := func(i int) kv.LayerSpec { return kv.LayerSpec{KVHeads: 1, HeadDim: pgHdS, Window: pgW, Source: i} }
	full := func(i int) kv.LayerSpec { return kv.LayerSpec{KVHeads: 1, HeadDim: pgHdF, Source: i} }
	want := []kv.LayerSpec{sl(0), sl(1), full(2), sl(3), full(4)}
	if !slices.Equal(cfg.KV.Layers, want) {
		t.Errorf("kv layers %v, want %v", cfg.KV.Layers, want)
	}
	if !slices.Equal(be.Widths(), []int{1, 2, 3, 4}) || !model.ArgmaxOnly(be) {
		t.Errorf("widths %v, argmax only %v", be.Widths(), model.ArgmaxOnly(be))
	}
}

// Decoding token by token and verifying in calls of 2..K give the ids the
// toy model defines, past the sliding window and through a piece wider
// than K: the host builds the cache inputs, masks, RoPE and embedding rows
// as the contract says and writes back exactly the call's rows.
func TestModelDecodeAndVerifyMatchTheModel(t *testing.T) {
	ctx := context.Background()
	for _, width := range []int{1, 2, 3, 4, 7} {
		rt := &fakeRuntime{}
		be, err := openPub(t, fixture(t), rt)
		if err != nil {
			t.Fatal(err)
		}
		o := &oracle{be: be}
		// run continues seq to 20 positions in calls of width, keeping
		// half of each call's rows, and returns the sequence.
		run := func(cache *kv.Cache, seq []int32, salt int) []int32 {
			for len(seq) < 20 {
				n := min(width, 20-len(seq))
				toks := make([]int32, n)
				for i := range toks {
					toks[i] = int32((len(seq)*7 + i*13 + salt) % pgV)
				}
				res, err := be.Forward(ctx, toks, len(seq), cache, model.Argmax)
				if err != nil {
					t.Fatalf("width %d at %d: %v", width, len(seq), err)
				}
				for i := range toks {
					if want := o.next(append(slices.Clone(seq), toks[:i+1]...)); res.Argmax[i] != want {
						t.Fatalf("width %d salt %d: position %d: id %d, the model gives %d", width, salt, len(seq)+i, res.Argmax[i], want)
					}
				}
				// Keep only the first rows, as a Session would after a
				// partial accept.
				keep := max(1, n/2)
				if err := cache.Commit(keep); err != nil {
					t.Fatal(err)
				}
				seq = append(seq, toks[:keep]...)
			}
			return seq
		}
		prefill := func(cache *kv.Cache, seq []int32) {
			if _, err := be.Forward(ctx, seq, 0, cache, model.Logits|model.Argmax|model.Last); err != nil {
				t.Fatal(err)
			}
			cache.Commit(len(seq))
		}
		a, err := kv.New(be.Config().KV, 8)
		if err != nil {
			t.Fatal(err)
		}
		prompt := []int32{2, 9, 17, 33, 5}
		prefill(a, prompt)
		seq := run(a, slices.Clone(prompt), 0)
		// Another cache on the same backend, then the first one again
		// after a truncation: the backend's copies of the rows must
		// follow whichever cache a call brings.
		b, _ := kv.New(be.Config().KV, 8)
		prefill(b, prompt[:3])
		run(b, slices.Clone(prompt[:3]), 1)
		if err := a.Truncate(11); err != nil {
			t.Fatal(err)
		}
		seq = run(a, seq[:11], 2)
		// The cache reset and refilled past the last call's position by
		// another backend: the rows are new although the positions
		// only advance.
		other, err := openPub(t, fixture(t), &fakeRuntime{})
		if err != nil {
			t.Fatal(err)
		}
		a.Reset()
		refill := []int32{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3}
		for p := 0; p < len(refill); p += 6 {
			if _, err := other.Forward(ctx, refill[p:p+6], p, a, model.Argmax|model.Last); err != nil {
				t.Fatal(err)
			}
			a.Commit(6)
		}
		run(a, refill, 3)
		if width > 1 && rt.calls[FuncVerify] == 0 {
			t.Errorf("width %d: no verify call", width)
		}
	}
}

// The verify graph shifts its sliding buffer by K before it attends, so
// it holds every key its rows need only from positions 0..W-K: a call
// that starts there runs verify_qK, one that starts later runs decode_q1
// row by row, and both give the model's ids.
func TestModelVerifyStopsAtTheWindow(t *testing.T) {
	ctx := context.Background()
	rt := &fakeRuntime{}
	be, err := openPub(t, fixture(t), rt)
	if err != nil {
		t.Fatal(err)
	}
	o := &oracle{be: be}
	seq := make([]int32, pgW-pgK+1)
	for i := range seq {
		seq[i] = int32((i*11 + 3) % pgV)
	}
	draft := []int32{7, 40, 12, 5}
	for _, start := range []int{pgW - pgK, pgW - pgK + 1} {
		cache, _ := kv.New(be.Config().KV, pgW)
		if _, err := be.Forward(ctx, seq[:start], 0, cache, model.Argmax|model.Last); err != nil {
			t.Fatal(err)
		}
		cache.Commit(start)
		verifies, decodes := rt.calls[FuncVerify], rt.calls[FuncDecode]
		res, err := be.Forward(ctx, draft, start, cache, model.Argmax)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range res.Argmax {
			if want := o.next(append(slices.Clone(seq[:start]), draft[:i+1]...)); id != want {
				t.Errorf("start %d: position %d: id %d, the model gives %d", start, start+i, id, want)
			}
		}
		nv, nd := rt.calls[FuncVerify]-verifies, rt.calls[FuncDecode]-decodes
		if exact := start <= pgW-pgK; (nv > 0) != exact || (nd > 0) == exact {
			t.Errorf("start %d (W %d, K %d): %d verify and %d decode chunk calls", start, pgW, pgK, nv, nd)
		}
	}
}

// A prefill returns the last row's argmax and no logits; a call that needs
// logits is refused with a message that says why.
func TestModelLogits(t *testing.T) {
	be, err := openPub(t, fixture(t), &fakeRuntime{})
	if err != nil {
		t.Fatal(err)
	}
	cache, _ := kv.New(be.Config().KV, 8)
	res, err := be.Forward(context.Background(), []int32{2, 3, 4}, 0, cache, model.Logits|model.Argmax|model.Last)
	if err != nil || len(res.Argmax) != 1 || res.Logits != nil {
		t.Fatalf("prefill: %+v, %v", res, err)
	}
	cache.Commit(3)
	if _, err := be.Forward(context.Background(), []int32{5}, 3, cache, model.Logits); !errors.Is(err, ErrNoLogits) || !strings.Contains(err.Error(), "argmax") {
		t.Errorf("logits: %v", err)
	}
}

func TestModelWithoutVerify(t *testing.T) {
	// Chunk 2's verify_qK fails to load: chunk 1's is closed again, and no
	// load record lists a verify function any more (doctor prints them).
	late, err := openPub(t, fixture(t), &fakeRuntime{noVerify: true, verifyFrom: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range late.Executor().(*coreml.CoreMLExecutor).Loads() {
		if l.Functions != [3]string{FuncDecode, ""} || l.Load[1] != 0 {
			t.Errorf("chunk %d after a later verify failed: functions %v, load %v", i+1, l.Functions, l.Load)
		}
	}
	if !slices.Equal(late.Widths(), []int{1}) {
		t.Errorf("widths %v after a later verify failed", late.Widths())
	}
	be, err := openPub(t, fixture(t), &fakeRuntime{noVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(be.Widths(), []int{1}) || be.Executor().(*coreml.CoreMLExecutor).NoVerify == "" {
		t.Errorf("widths %v, no verify %q", be.Widths(), be.Executor().(*coreml.CoreMLExecutor).NoVerify)
	}
	cache, _ := kv.New(be.Config().KV, 8)
	o := &oracle{be: be}
	res, err := be.Forward(context.Background(), []int32{2, 3, 4}, 0, cache, model.Argmax)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range res.Argmax {
		if want := o.next([]int32{2, 3, 4}[:i+1]); id != want {
			t.Errorf("position %d: %d, want %d", i, id, want)
		}
	}
}

// A damaged bundle or a bundle of another layout is refused with an error
// naming the file and the feature or field, never a panic.
func TestModelDamaged(t *testing.T) {
	replace := func(list []mlcore.FeatureSpec, name string, f func(*mlcore.FeatureSpec)) []mlcore.FeatureSpec {
		list = slices.Clone(list)
		for i := range list {
			if list[i].Name == name {
				list[i].Shape = slices.Clone(list[i].Shape)
				f(&list[i])
			}
		}
		return list
	}
	drop := func(list []mlcore.FeatureSpec, name string) []mlcore.FeatureSpec {
		return slices.DeleteFunc(slices.Clone(list), func(f mlcore.FeatureSpec) bool { return f.Name == name })
	}
	type editFn = func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec)
	cases := []struct {
		name  string
		edit  editFn
		files func(dir string)
		want  []string
	}{
		{"window", func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec) {
			if j == 1 {
				ins = replace(ins, "K_sliding_in", func(f *mlcore.FeatureSpec) { f.Shape[2] = 8 })
			}
			return ins, outs
		}, nil, []string{"chunk2.mlmodelc", "K_sliding_in", "sliding_window"}},
		{"context", func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec) {
			return replace(ins, "causal_mask_full", func(f *mlcore.FeatureSpec) { f.Shape[3] = 32 }), outs
		}, nil, []string{"chunk1.mlmodelc", "causal_mask_full", "context_length"}},
		{"no argmax", func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec) {
			return ins, drop(outs, "token_id")
		}, nil, []string{"chunk3.mlmodelc", "token_id"}},
		{"unknown input", func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec) {
			if j == 2 {
				ins = append(ins, f16("image_embedding", 1, 1, pgH))
			}
			return ins, outs
		}, nil, []string{"chunk3.mlmodelc", "image_embedding", "neither built by the host"}},
		{"carried shape", func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec) {
			if j == 2 && fn == FuncVerify {
				ins = replace(ins, "kv14_k", func(f *mlcore.FeatureSpec) { f.Shape[2] = pgCtx + pgK })
			}
			return ins, outs
		}, nil, []string{"chunk3.mlmodelc", "verify_qK", "kv14_k"}},
		{"host shape", func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec) {
			if fn == FuncVerify {
				ins = replace(ins, "update_indicator", func(f *mlcore.FeatureSpec) { f.Shape[3] = 1 })
			}
			return ins, outs
		}, nil, []string{"chunk1.mlmodelc", "update_indicator"}},
		{"verify rows", func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec) {
			if fn == FuncVerify {
				outs = drop(outs, "new_V_full")
			}
			return ins, outs
		}, nil, []string{"chunk1.mlmodelc", "new_V_full"}},
		{"stateful", func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec) {
			for _, n := range cacheInputs {
				ins = drop(ins, n)
			}
			return ins, outs
		}, nil, []string{"K_sliding_in", "stateful"}},
		{"rope width", nil, func(dir string) {
			writeNPYData(t, filepath.Join(dir, "cos_full.npy"), make([]uint16, pgCtx*4), pgCtx, 4)
		}, []string{"cos_full.npy", "(positions, 8)"}},
		{"sidecar", nil, func(dir string) {
			os.WriteFile(filepath.Join(dir, "embed_tokens_scales.bin"), make([]byte, 10), 0o644)
		}, []string{"embed_tokens_scales.bin"}},
		{"embed scale", nil, func(dir string) {
			raw, _ := os.ReadFile(filepath.Join(dir, "model_config.json"))
			os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(strings.Replace(string(raw), `"embed_scale":2.828`, `"embed_scale":0`, 1)), 0o644)
		}, []string{"model_config.json", "embed_scale"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := fixture(t)
			if c.files != nil {
				c.files(dir)
			}
			_, err := openPub(t, dir, &fakeRuntime{edit: c.edit})
			if err == nil {
				t.Fatal("opened")
			}
			if !errors.Is(err, coreml.ErrBundle) {
				t.Errorf("%v does not wrap coreml.ErrBundle", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

// A Session on the ideal synthetic bundle generates the toy model's greedy
// ids with speculation off (decode_q1 only) and on (verify_qK calls, wide
// calls costing what width 1 does, so free slots carry guesses): the host
// side keeps identity wherever the bundle's two functions agree. On a real
// published bundle they need not: doctor measures it.
func TestModelSessionIdentity(t *testing.T) {
	ctx := context.Background()
	prompt := []int32{2, 9, 17, 33, 9, 17, 33, 9, 17}
	var outs [2][]int32
	for k, width := range []int{1, pgK} {
		rt := &fakeRuntime{}
		be, err := openPub(t, fixture(t), rt)
		if err != nil {
			t.Fatal(err)
		}
		s, err := engine.NewSession(be, engine.SessionOptions{Ungated: true,
			Costs: spec.NewCosts(map[int]float64{1: 0.01, 2: 0.01, 3: 0.01, 4: 0.01})})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Prefill(ctx, prompt, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Generate(ctx, engine.GenerateOptions{MaxTokens: 12, Width: width}, func(tk engine.Token) error {
			outs[k] = append(outs[k], tk.ID)
			return nil
		}); err != nil {
			t.Fatalf("width %d: %v", width, err)
		}
		if width > 1 && rt.calls[FuncVerify] == 0 {
			t.Errorf("width %d made no verify call", width)
		}
		o := &oracle{be: be}
		seq := slices.Clone(prompt)
		for i, id := range outs[k] {
			if want := o.next(seq); id != want {
				t.Fatalf("width %d: token %d is %d, the model gives %d", width, i, id, want)
			}
			seq = append(seq, id)
		}
	}
	if len(outs[0]) == 0 || !slices.Equal(outs[0], outs[1]) {
		t.Errorf("speculation off %v, on %v", outs[0], outs[1])
	}
}

// The coreml.Loader opens a published bundle as a Model when it has a
// published executor (darwin/arm64 gives it Core ML's), with progress to the
// end; without one it refuses with the reason.
func TestLoaderOpensPublished(t *testing.T) {
	dir := fixture(t)
	src, err := load.Detect(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := coreml.Loader{Published: Opener(func(ctx context.Context, p *coreml.Published, progress func(done, total int)) (Executor, error) {
		return NewCoreMLExecutor(ctx, &fakeRuntime{}, p, coreml.CoreMLOptions{CacheDir: t.TempDir()}, progress)
	})}
	if err := l.Supports(src); err != nil {
		t.Fatal(err)
	}
	var last [2]int
	b, err := l.Open(context.Background(), src, load.Options{Progress: func(done, total int) { last = [2]int{done, total} }})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := b.(interface{ Close() error }); ok {
		defer c.Close()
	}
	if _, ok := b.(*Model); !ok || last[0] != last[1] || b.Config().Fingerprint != src.Fingerprint {
		t.Errorf("opened %T, progress %v, fingerprint %q", b, last, b.Config().Fingerprint)
	}
	if err := (coreml.Loader{}).Supports(src); err == nil || !strings.Contains(err.Error(), "CoreML-LLM") {
		t.Errorf("without a published executor: %v", err)
	}
}

// prefill is the toy model over rows 0..N-1 from position 0: the rows and
// hashes decode computes one position at a time.
func (f *fakeFn) prefill(in, out map[string]mlcore.Buffer) error {
	N, j := f.T, f.j
	h16 := func(m map[string]mlcore.Buffer, n string) []uint16 { return m[n].Float16s() }
	cm := h16(in, "causal_mask")
	for t := range N {
		for i := range N {
			if want := map[bool]uint16{true: coreml.ToHalf(0), false: coreml.ToHalf(float32(math.Inf(-1)))}[i <= t]; cm[t*N+i] != want {
				return fmt.Errorf("prefill chunk %d: causal_mask[%d][%d] is %#x", j, t, i, cm[t*N+i])
			}
		}
	}
	hid := h16(in, "hidden_states")
	plName := "per_layer_combined"
	if j == 0 {
		plName = "per_layer_raw"
		copy(h16(out, "per_layer_combined_out"), h16(in, plName))
	}
	if j == 2 {
		last := slices.Index(h16(in, "last_position_mask"), coreml.ToHalf(1))
		h := fnv.New32a()
		hashRows(h, hid[last*pgH:(last+1)*pgH], h16(in, plName)[last*pgL*pgP:(last+1)*pgL*pgP])
		out["token_id"].Int32s()[0] = int32(h.Sum32() % pgV)
		return nil
	}
	hout := h16(out, "hidden_states_out")
	copy(hout, hid)
	// rows[u][t] for the slots of this chunk, in hashing order: sliding
	// slots, then full.
	var us []int
	for kind, n := range pgSlots[j] {
		for sl := range n {
			us = append(us, 8*j+4*kind+sl)
		}
	}
	rows := map[int][][2][]uint16{}
	for _, u := range us {
		hd, cos := pgHdS, h16(in, "cos_s")
		if u%8 >= 4 {
			hd, cos = pgHdF, h16(in, "cos_f")
		}
		for t := range N {
			k, v := slotRows(hid[t*pgH:(t+1)*pgH], cos[t*hd:(t+1)*hd], u, hd)
			rows[u] = append(rows[u], [2][]uint16{k, v})
		}
	}
	for t := range N {
		h := fnv.New32a()
		for _, u := range us {
			lo := 0
			if u%8 < 4 {
				lo = max(0, t-pgW+1)
			}
			for q := lo; q <= t; q++ {
				hashRows(h, rows[u][q][0], rows[u][q][1])
			}
		}
		hout[t*pgH+j+1] = coreml.ToHalf(float32(h.Sum32() % 2048))
	}
	for k, u := range pgPrefillOut[j] {
		hd := len(rows[u][0][0])
		v := "V" + k[1:]
		if k[:2] == "kv" {
			v = k[:len(k)-1] + "v"
		}
		ko, vo := h16(out, k), h16(out, v)
		for t := range N {
			copy(ko[t*hd:], rows[u][t][0])
			copy(vo[t*hd:], rows[u][t][1])
		}
	}
	return nil
}

// A prefill from position 0 runs the prefill chunks (the last row's id
// and every layer's rows written where layer_types says), later prompt
// pieces and decode continue from those rows exactly as the model does;
// without layer_types the prompt runs token by token, and doctor's note
// says why.
func TestModelPrefillChunks(t *testing.T) {
	ctx := context.Background()
	rt := &fakeRuntime{}
	be, err := openPub(t, fixtureWith(t, true), rt)
	if err != nil {
		t.Fatal(err)
	}
	if be.PrefillNote() != "" || !slices.Equal(be.Widths(), []int{1, 2, 3, 4, pgN}) {
		t.Fatalf("prefill note %q, widths %v", be.PrefillNote(), be.Widths())
	}
	// The load times name their functions (doctor prints them so): each
	// decode chunk's two, then each prefill chunk's one.
	var fns [][3]string
	for _, l := range be.Executor().(*coreml.CoreMLExecutor).Loads() {
		fns = append(fns, l.Functions)
	}
	dv, pf := [3]string{FuncDecode, FuncVerify}, [3]string{FuncPrefill, ""}
	if want := [][3]string{dv, dv, dv, pf, pf, pf}; !slices.Equal(fns, want) {
		t.Fatalf("loads name %v, want %v", fns, want)
	}
	o := &oracle{be: be}
	for _, n := range []int{2, 5, pgN} {
		cache, _ := kv.New(be.Config().KV, pgN)
		prompt := []int32{2, 7, 11, 19, 23, 29, 31, 37}[:n]
		res, err := be.Forward(ctx, prompt, 0, cache, model.Argmax|model.Logits|model.Last)
		if err != nil {
			t.Fatal(err)
		}
		if want := o.next(prompt); len(res.Argmax) != 1 || res.Argmax[0] != want {
			t.Fatalf("prefill of %d: %v, the model gives %d", n, res.Argmax, want)
		}
		cache.Commit(n)
		// A second piece (position n > 0) and decoding see the rows the
		// prefill wrote.
		more := []int32{41, 43, 47}
		if _, err := be.Forward(ctx, more, n, cache, model.Argmax|model.Last); err != nil {
			t.Fatal(err)
		}
		cache.Commit(len(more))
		seq := append(slices.Clone(prompt), more...)
		res, err = be.Forward(ctx, []int32{53, 59}, len(seq), cache, model.Argmax)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range res.Argmax {
			if want := o.next(append(slices.Clone(seq), []int32{53, 59}[:i+1]...)); id != want {
				t.Fatalf("prefill of %d, then position %d: %d, the model gives %d", n, len(seq)+i, id, want)
			}
		}
	}
	if rt.calls[FuncPrefill] == 0 {
		t.Error("no prefill call")
	}

	dir := fixtureWith(t, true)
	raw, _ := os.ReadFile(filepath.Join(dir, "model_config.json"))
	os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(strings.Replace(string(raw), `"layer_types":`, `"layer_kinds":`, 1)), 0o644)
	be, err = openPub(t, dir, &fakeRuntime{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(be.PrefillNote(), "layer_types") || slices.Contains(be.Widths(), pgN) {
		t.Errorf("without layer_types: note %q, widths %v", be.PrefillNote(), be.Widths())
	}
	// A prefill chunk whose outputs are not where layer_types puts them.
	be, err = openPub(t, fixtureWith(t, true), &fakeRuntime{edit: func(j int, fn string, ins, outs []mlcore.FeatureSpec) ([]mlcore.FeatureSpec, []mlcore.FeatureSpec) {
		if fn == FuncPrefill && j == 0 {
			outs = slices.DeleteFunc(slices.Clone(outs), func(f mlcore.FeatureSpec) bool { return f.Name == "K2" })
		}
		return ins, outs
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := be.PrefillNote(); !strings.Contains(n, "prefill_chunk1.mlmodelc") || !strings.Contains(n, `"K2"`) {
		t.Errorf("missing K2: note %q", n)
	}
}

// TestSidecarRefusesAbsurdShapes: the per-layer table of a config with
// 16,777,216 layers, hidden 32,768 over empty files used to map as a
// 65,536 x 2^48 table (its size wrapped to 0) and Row(0) panicked. Now
// opening it fails, naming the file.
func TestSidecarRefusesAbsurdShapes(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"embed_tokens_per_layer_q8.bin", "embed_tokens_per_layer_scales.bin"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	for _, cols := range []int{1 << 48, 1 << 24 * 1 << 24} {
		s, err := openSidecar(dir, "embed_tokens_per_layer", 65536, cols, 16)
		if err == nil {
			row := s.Row(make([]float32, 8), 0) // panicked here
			t.Fatalf("a 65536 x %d table opened over empty files (row 0: %v)", cols, row[:1])
		}
		if !errors.Is(err, coreml.ErrBundle) || !strings.Contains(err.Error(), "embed_tokens_per_layer_q8.bin") {
			t.Errorf("cols %d: %v, want an coreml.ErrBundle naming the file", cols, err)
		}
	}
}
