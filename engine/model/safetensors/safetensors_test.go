package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/model"
)

// fixture is the directory gen.py (engine/cpu/testdata/gemma4) writes:
// files made by the reference safetensors library.
const fixture = "../../cpu/testdata/gemma4"

// build assembles a .safetensors file from a header object and data.
func build(header map[string]any, data []byte) []byte {
	h, err := json.Marshal(header)
	if err != nil {
		panic(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(out, h...)
	return append(out, data...)
}

func entry(dtype string, shape []int, begin, end int) map[string]any {
	return map[string]any{"dtype": dtype, "shape": shape, "data_offsets": []int{begin, end}}
}

// sample is a valid two-tensor file: a 2x3 F32 and a 4-element BF16.
func sample() []byte {
	var data []byte
	for i := range 6 {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(i)+0.5))
	}
	for _, v := range []float32{1, -2, 0.25, 3} {
		data = binary.LittleEndian.AppendUint16(data, uint16(math.Float32bits(v)>>16))
	}
	return build(map[string]any{
		"w":            entry("F32", []int{2, 3}, 0, 24),
		"b":            entry("BF16", []int{4}, 24, 32),
		"__metadata__": map[string]string{"format": "pt"},
	}, data)
}

func TestParseSample(t *testing.T) {
	f, err := Parse("mem", sample())
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Metadata()["format"]; got != "pt" {
		t.Errorf("metadata format = %q", got)
	}
	ts := f.Tensors()
	if len(ts) != 2 || ts[0].Name != "b" || ts[1].Name != "w" {
		t.Fatalf("tensors = %+v", ts)
	}
	w, _ := f.Tensor("w")
	if w.DType != F32 || len(w.Shape) != 2 || w.Shape[0] != 2 || w.Shape[1] != 3 || w.Elements() != 6 {
		t.Errorf("w = %+v", w)
	}
	data, err := f.TensorData("w")
	if err != nil {
		t.Fatal(err)
	}
	v, err := Float32s(w, data)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range v {
		if x != float32(i)+0.5 {
			t.Errorf("w[%d] = %v", i, x)
		}
	}
	b, _ := f.Tensor("b")
	data, _ = f.TensorData("b")
	v, err = Float32s(b, data)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, -2, 0.25, 3}; !model.SameBits(v, want) {
		t.Errorf("b = %v, want %v", v, want)
	}
	if _, err := f.TensorData("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing tensor: err = %v", err)
	}
}

// TestReferenceDTypes checks F16 and BF16 decoding against torch's own
// widening of the same values (written by gen.py with the safetensors
// library), bit for bit, including zeros, subnormals and the largest half.
func TestReferenceDTypes(t *testing.T) {
	f, err := Open(filepath.Join(fixture, "dtypes.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	get := func(name string, dt DType) []float32 {
		t.Helper()
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("no tensor %q", name)
		}
		if ti.DType != dt {
			t.Fatalf("%s: dtype %s, want %s", name, ti.DType, dt)
		}
		data, err := f.TensorData(name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := Float32s(ti, data)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct{ narrow, wide string }{{"x.f16", "x.f16.as_f32"}, {"x.bf16", "x.bf16.as_f32"}} {
		dt := F16
		if strings.HasSuffix(c.narrow, "bf16") {
			dt = BF16
		}
		got, want := get(c.narrow, dt), get(c.wide, F32)
		if len(got) != len(want) || len(got) != 68 {
			t.Fatalf("%s: %d values, want %d", c.narrow, len(got), len(want))
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Errorf("%s[%d] = %v (%#x), torch says %v (%#x)", c.narrow, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
	m := get("m.f32", F32)
	x := get("x.f32", F32)
	if !model.SameBits(m, x[:60]) {
		t.Errorf("m.f32 is not the first 60 values of x.f32")
	}
	ti, _ := f.Tensor("ids.i64")
	data, _ := f.TensorData("ids.i64")
	if ti.DType != I64 || len(data) != 40 || binary.LittleEndian.Uint64(data[32:]) != 4 {
		t.Errorf("ids.i64 = %+v %v", ti, data)
	}
	if _, err := Float32s(ti, data); err == nil || !strings.Contains(err.Error(), "ids.i64") {
		t.Errorf("Float32s of I64: err = %v", err)
	}
	if f.Metadata()["made_by"] != "gen.py" {
		t.Errorf("metadata = %v", f.Metadata())
	}
}

func TestOpenDirFixture(t *testing.T) {
	d, err := OpenDir(filepath.Join(fixture, "model"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var cfg struct {
		ModelType string `json:"model_type"`
		Hidden    int    `json:"hidden_size"`
	}
	if err := json.Unmarshal(d.Config(), &cfg); err != nil || cfg.ModelType != "gemma4_text" || cfg.Hidden != 64 {
		t.Fatalf("config = %+v, %v", cfg, err)
	}
	ti, ok := d.Tensor("model.layers.3.mlp.gate_proj.weight")
	if !ok || ti.DType != F32 || len(ti.Shape) != 2 || ti.Shape[0] != 192 || ti.Shape[1] != 64 {
		t.Fatalf("gate_proj of layer 3 = %+v, %v", ti, ok)
	}
	if _, ok := d.Tensor("model.layers.3.self_attn.k_proj.weight"); ok {
		t.Errorf("KV-shared layer 3 has a k_proj")
	}
	if n := len(d.Tensors()); n != 98 {
		t.Errorf("%d tensors, want 98", n)
	}
	v, ti, err := d.Float32s("model.layers.0.layer_scalar")
	if err != nil || len(v) != 1 || v[0] < 0.5 || v[0] > 1 || len(ti.Shape) != 1 {
		t.Errorf("layer_scalar = %v %+v %v", v, ti, err)
	}
	_, _, err = d.Float32s("model.nope")
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "model.nope") {
		t.Errorf("missing tensor: err = %v", err)
	}
	if files := d.Files(); len(files) != 2 || filepath.Base(files[1]) != "model.safetensors" {
		t.Errorf("files = %v", files)
	}
}

func TestOpenDirSharded(t *testing.T) {
	dir := t.TempDir()
	one := build(map[string]any{"a": entry("F32", []int{1}, 0, 4)}, make([]byte, 4))
	two := build(map[string]any{"b": entry("F16", []int{2}, 0, 4)}, make([]byte, 4))
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("config.json", []byte(`{"model_type":"x"}`))
	write("model-00001-of-00002.safetensors", one)
	write("model-00002-of-00002.safetensors", two)
	write("stray.safetensors", []byte("junk")) // not in the index: ignored
	write(IndexName, []byte(`{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`))
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ts := d.Tensors(); len(ts) != 2 || ts[0].Name != "a" || ts[1].Name != "b" || ts[1].DType != F16 {
		t.Errorf("tensors = %+v", ts)
	}
	d.Close()

	// Without the index every .safetensors file counts: the stray one fails,
	// naming its file.
	os.Remove(filepath.Join(dir, IndexName))
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "stray.safetensors") {
		t.Errorf("stray file: err = %v", err)
	}
	// The same tensor in two files.
	write("stray.safetensors", one)
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("duplicate tensor: err = %v", err)
	}
	// An index naming a path outside the directory.
	write(IndexName, []byte(`{"weight_map":{"a":"../x.safetensors"}}`))
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "../x.safetensors") {
		t.Errorf("escaping index: err = %v", err)
	}
}

func TestOpenDirErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("no config: err = %v", err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"broken`), 0o644)
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("bad config: err = %v", err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{}`), 0o644)
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "no .safetensors") {
		t.Errorf("no weights: err = %v", err)
	}
	if _, err := Open(filepath.Join(dir, "absent.safetensors")); err == nil || !strings.Contains(err.Error(), "absent.safetensors") {
		t.Errorf("absent file: err = %v", err)
	}
}

// TestTruncated cuts a valid file at every length: each must fail with an
// error naming the file, and none may panic.
func TestTruncated(t *testing.T) {
	full := sample()
	for n := 0; n < len(full); n++ {
		_, err := Parse("cut.safetensors", full[:n])
		if err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(full))
		}
		if !strings.Contains(err.Error(), "cut.safetensors") {
			t.Fatalf("truncated to %d: error %q does not name the file", n, err)
		}
	}
}

func TestCorrupt(t *testing.T) {
	four := make([]byte, 16)
	cases := []struct {
		name string
		file []byte
		want string // in the error
	}{
		{"huge header length", binary.LittleEndian.AppendUint64(nil, 1<<62), "exceeds"},
		{"header past end", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "past the end"},
		{"too short", []byte{1, 2, 3}, "too short"},
		{"null header", append(binary.LittleEndian.AppendUint64(nil, 4), "null"...), "not a JSON object"},
		{"json array", append(binary.LittleEndian.AppendUint64(nil, 2), "[]"...), "not a JSON object"},
		{"bad json", append(binary.LittleEndian.AppendUint64(nil, 5), `{"a":`...), "not valid JSON"},
		{"trailing", append(binary.LittleEndian.AppendUint64(nil, 4), `{}{}`...), "after its JSON"},
		{"unknown dtype", build(map[string]any{"t": entry("F12", []int{1}, 0, 4)}, four), `tensor "t": unknown dtype "F12"`},
		{"missing field", build(map[string]any{"t": map[string]any{"dtype": "F32", "shape": []int{1}}}, four), `tensor "t": entry needs`},
		{"entry not object", build(map[string]any{"t": 5}, four), `tensor "t": malformed`},
		{"negative dim", build(map[string]any{"t": entry("F32", []int{-1}, 0, 4)}, four), `tensor "t": negative dimension`},
		{"shape too big", build(map[string]any{"t": entry("F32", []int{1 << 40, 1 << 40}, 0, 4)}, four), `tensor "t": shape`},
		{"wrong size", build(map[string]any{"t": entry("F32", []int{2}, 0, 4)}, four), `tensor "t": 4 bytes of data, want 8`},
		{"offsets reversed", build(map[string]any{"t": entry("F32", []int{1}, 4, 0)}, four), `tensor "t": data_offsets`},
		{"offsets past end", build(map[string]any{"t": entry("F32", []int{2}, 12, 20)}, four), `run past`},
		{"three offsets", build(map[string]any{"t": map[string]any{"dtype": "F32", "shape": []int{1}, "data_offsets": []int{0, 4, 8}}}, four), `must be [begin, end]`},
		{"float offsets", build(map[string]any{"t": map[string]any{"dtype": "F32", "shape": []int{1}, "data_offsets": []float64{0, 4.5}}}, four), `tensor "t": malformed`},
		{"overlap", build(map[string]any{"t": entry("F32", []int{2}, 0, 8), "u": entry("F32", []int{2}, 4, 12)}, four), `overlap`},
		{"bad metadata", build(map[string]any{"__metadata__": map[string]any{"k": 1}}, nil), "__metadata__"},
		{"too many dims", build(map[string]any{"t": entry("U8", make([]int, 17), 0, 0)}, nil), "dimensions"},
	}
	for _, c := range cases {
		_, err := Parse("bad.safetensors", c.file)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), "bad.safetensors") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want the file name and %q", c.name, err, c.want)
		}
	}
	// Zero-element tensors and scalars are valid.
	f, err := Parse("ok", build(map[string]any{"e": entry("F32", []int{0, 3}, 0, 0), "s": entry("F16", []int{}, 0, 2)}, []byte{0, 0x3c}))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := f.Tensor("s")
	data, _ := f.TensorData("s")
	if v, err := Float32s(s, data); err != nil || len(v) != 1 || v[0] != 1 {
		t.Errorf("scalar = %v, %v", v, err)
	}
}

func TestHalfToFloat(t *testing.T) {
	for _, c := range []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.960464477539063e-08},
		{0x03ff, 6.097555160522461e-05}, {0x0400, 6.103515625e-05}, {0x3555, 0.333251953125},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	} {
		if got := HalfToFloat(c.h); got != c.want {
			t.Errorf("HalfToFloat(%#x) = %v, want %v", c.h, got, c.want)
		}
	}
	if v := HalfToFloat(0x7e00); !math.IsNaN(float64(v)) {
		t.Errorf("HalfToFloat(NaN) = %v", v)
	}
	if v := HalfToFloat(0x8000); math.Float32bits(v) != 0x80000000 {
		t.Errorf("HalfToFloat(-0) = %#x", math.Float32bits(v))
	}
}

// FuzzParse feeds arbitrary bytes to the header parser: it may fail, never
// panic, and whatever it accepts must lie inside the input.
func FuzzParse(f *testing.F) {
	f.Add(sample())
	f.Add(build(map[string]any{"e": entry("F32", []int{0, 3}, 0, 0), "s": entry("F16", []int{}, 0, 2)}, []byte{0, 0x3c}))
	f.Add(build(map[string]any{"t": entry("F32", []int{2}, 0, 8), "u": entry("F32", []int{2}, 4, 12)}, make([]byte, 12)))
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, 2))
	if data, err := os.ReadFile(filepath.Join(fixture, "dtypes.safetensors")); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz", data)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, ti := range file.Tensors() {
			b, err := file.TensorData(ti.Name)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(b)) != ti.Size || ti.Size != int64(ti.Elements()*ti.DType.Size()) {
				t.Fatalf("tensor %q: %d bytes, size %d, %d elements of %s", ti.Name, len(b), ti.Size, ti.Elements(), ti.DType)
			}
			if ti.DType.Float() {
				if _, err := Float32s(ti, b); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(b, data[ti.Offset:ti.Offset+ti.Size]) {
				t.Fatal("tensor data does not alias the input")
			}
		}
	})
}
