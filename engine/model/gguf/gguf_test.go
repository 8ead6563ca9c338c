package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"anechat/internal/testres"
)

func TestStories260K(t *testing.T) {
	f, err := Open(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version() != 3 || len(f.Tensors()) != 48 {
		t.Fatalf("version %d, %d tensors; want 3, 48", f.Version(), len(f.Tensors()))
	}
	if a, err := f.String("general.architecture"); err != nil || a != "llama" {
		t.Fatalf("architecture %q, %v", a, err)
	}
	for key, want := range map[string]int{"llama.embedding_length": 64, "llama.feed_forward_length": 172,
		"llama.block_count": 5, "llama.attention.head_count": 8, "llama.attention.head_count_kv": 4,
		"llama.rope.dimension_count": 8, "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2} {
		if got, err := f.Int(key); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", key, got, err, want)
		}
	}
	if eps, err := f.Float32("llama.attention.layer_norm_rms_epsilon"); err != nil || eps != 1e-5 {
		t.Errorf("rms eps %v, %v", eps, err)
	}
	toks, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil || len(toks) != 512 {
		t.Fatalf("tokens: %d, %v", len(toks), err)
	}
	if scores, err := f.Float32s("tokenizer.ggml.scores"); err != nil || len(scores) != 512 {
		t.Fatalf("scores: %d, %v", len(scores), err)
	}
	if types, err := f.Int32s("tokenizer.ggml.token_type"); err != nil || len(types) != 512 {
		t.Fatalf("token types: %d, %v", len(types), err)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || emb.Type != F32 || !reflect.DeepEqual(emb.Dims, []int{64, 512}) || emb.Size != 64*512*4 {
		t.Fatalf("token_embd.weight: %+v", emb)
	}
	a, err := f.TensorData("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.TensorData("output.weight")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) { // models/README.md: output.weight equals token_embd.weight
		t.Fatal("output.weight differs from token_embd.weight")
	}
	if _, err := f.TensorData("nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing tensor error %v", err)
	}
	if _, err := f.Int("general.architecture"); err == nil || !strings.Contains(err.Error(), "general.architecture") {
		t.Fatalf("type error %v", err)
	}
	if _, err := f.String("no.such.key"); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing key error %v", err)
	}
}

func sampleWriter() *Writer {
	w := NewWriter()
	w.Set("general.architecture", "test")
	w.Set("u8", uint8(200))
	w.Set("i8", int8(-5))
	w.Set("u16", uint16(65000))
	w.Set("i16", int16(-300))
	w.Set("u32", uint32(4000000000))
	w.Set("i32", int32(-7))
	w.Set("f32", float32(1.5))
	w.Set("bool", true)
	w.Set("u64", uint64(1<<40))
	w.Set("i64", int64(-1<<40))
	w.Set("f64", 2.25)
	w.Set("strs", []string{"a", "", "héllo"})
	w.Set("f32s", []float32{1, -2, 3.5})
	w.Set("i32s", []int32{1, -2, 3})
	w.Set("u8s", []uint8{1, 2})
	w.Set("bools", []bool{true, false})
	w.Set("f64s", []float64{0.5})
	w.AddF32("a", []int{3, 2}, []float32{1, 2, 3, 4, 5, 6})
	w.AddTensor("q", Q8_0, []int{32}, make([]byte, 34))
	w.AddTensor("h", F16, []int{5}, make([]byte, 10))
	return w
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.gguf")
	if err := sampleWriter().WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]any{"u8": uint8(200), "i8": int8(-5), "u16": uint16(65000), "i16": int16(-300),
		"u32": uint32(4000000000), "i32": int32(-7), "f32": float32(1.5), "bool": true, "u64": uint64(1 << 40),
		"i64": int64(-1 << 40), "f64": 2.25, "strs": []string{"a", "", "héllo"}, "f32s": []float32{1, -2, 3.5},
		"i32s": []int32{1, -2, 3}, "u8s": []uint8{1, 2}, "bools": []bool{true, false}, "f64s": []float64{0.5}}
	for k, v := range want {
		if got, ok := f.Value(k); !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	if n, err := f.Int("u64"); err != nil || n != 1<<40 {
		t.Errorf("Int(u64) = %d, %v", n, err)
	}
	if _, err := f.Uint32("i32"); err == nil {
		t.Error("Uint32 of a negative value succeeded")
	}
	if v, err := f.Float32("f64"); err != nil || v != 2.25 {
		t.Errorf("Float32(f64) = %v, %v", v, err)
	}
	if v, err := f.Int32s("u8s"); err != nil || !reflect.DeepEqual(v, []int32{1, 2}) {
		t.Errorf("Int32s(u8s) = %v, %v", v, err)
	}
	ts := f.Tensors()
	if len(ts) != 3 || ts[1].Type != Q8_0 || ts[1].Size != 34 || ts[2].Size != 10 {
		t.Fatalf("tensors %+v", ts)
	}
	for _, ti := range ts {
		if ti.Offset%int64(f.Alignment()) != 0 {
			t.Errorf("%s misaligned at %d", ti.Name, ti.Offset)
		}
	}
	d, _ := f.TensorData("a")
	if binary.LittleEndian.Uint32(d[20:]) != 0x40c00000 { // 6.0
		t.Errorf("tensor a data %x", d)
	}
}

// TestTruncated cuts the sample file at every length: each prefix must fail
// with an error naming the file, never panic.
func TestTruncated(t *testing.T) {
	data, err := sampleWriter().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(data)-1; n++ {
		_, err := Parse("cut.gguf", data[:n])
		if err == nil {
			// Cutting only trailing padding of the last tensor may still leave a valid file.
			if n >= len(data)-DefaultAlignment {
				continue
			}
			t.Fatalf("prefix of %d/%d bytes parsed", n, len(data))
		}
		if !strings.Contains(err.Error(), "cut.gguf") {
			t.Fatalf("error does not name the file: %v", err)
		}
	}
}

func TestCorrupt(t *testing.T) {
	good, _ := sampleWriter().Bytes()
	cases := []struct {
		name string
		edit func(w *Writer)
		raw  func(b []byte) []byte
		want string
	}{
		{name: "magic", raw: func(b []byte) []byte { b[0] = 'X'; return b }, want: "bad magic"},
		{name: "version", raw: func(b []byte) []byte { b[4] = 9; return b }, want: "version 9"},
		{name: "huge kv count", raw: func(b []byte) []byte { binary.LittleEndian.PutUint64(b[16:], 1<<60); return b }, want: "metadata count"},
		{name: "huge tensor count", raw: func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], 1<<60); return b }, want: "tensor count"},
		{name: "unknown type", edit: func(w *Writer) { w.AddTensor("weird", Type(99), []int{4}, make([]byte, 4)) }, want: `tensor "weird": unknown tensor type 99`},
		{name: "bad block", edit: func(w *Writer) { w.AddTensor("blk", Q4_0, []int{31}, make([]byte, 18)) }, want: `tensor "blk": row length 31`},
		{name: "zero dim", edit: func(w *Writer) { w.AddTensor("z", F32, []int{0}, nil) }, want: `tensor "z": dimension 0`},
		{name: "too many dims", edit: func(w *Writer) { w.AddTensor("d5", F32, []int{1, 1, 1, 1, 1}, make([]byte, 4)) }, want: `tensor "d5": 5 dimensions`},
		{name: "short data", edit: func(w *Writer) { w.AddTensor("short", F32, []int{1000}, make([]byte, 8)) }, want: `tensor "short": data`},
		{name: "dup tensor", edit: func(w *Writer) { w.AddF32("a", []int{1}, []float32{1}) }, want: `tensor "a" appears twice`},
		{name: "dup key", edit: func(w *Writer) { w.Set("u8", uint8(1)) }, want: `"u8" appears twice`},
		{name: "bad alignment", edit: func(w *Writer) { w.Set("general.alignment", uint32(3)) }, want: "general.alignment"},
		{name: "bad value type", raw: func(b []byte) []byte {
			i := bytes.Index(b, []byte("general.architecture")) + len("general.architecture")
			binary.LittleEndian.PutUint32(b[i:], 77)
			return b
		}, want: "unknown value type 77"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var data []byte
			if c.edit != nil {
				w := sampleWriter()
				c.edit(w)
				data, _ = w.Bytes()
			} else {
				data = c.raw(append([]byte(nil), good...))
			}
			_, err := Parse("bad.gguf", data)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.gguf") {
				t.Fatalf("error %v, want one naming bad.gguf and containing %q", err, c.want)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Fatalf("missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "empty.gguf") {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("directory opened")
	}
}

// FuzzParse feeds arbitrary bytes to the parser; it must return an error or a
// File whose tensors all lie inside the data, never panic.
func FuzzParse(f *testing.F) {
	good, _ := sampleWriter().Bytes()
	f.Add(good)
	f.Add(good[:64])
	nested := NewWriter()
	nested.Set("x", []string{"a"})
	b, _ := nested.Bytes()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.gguf", data)
		if err != nil {
			return
		}
		for _, ti := range file.Tensors() {
			d, err := file.TensorData(ti.Name)
			if err != nil || int64(len(d)) != ti.Size || ti.Offset+ti.Size > int64(len(data)) {
				t.Fatalf("tensor %q: %d bytes, %v", ti.Name, len(d), err)
			}
		}
		if u := file.Unread(); len(u) != 0 {
			t.Fatalf("%d tensors unread after reading all", len(u))
		}
		for _, k := range file.Keys() {
			file.String(k)
			file.Int(k)
			file.Int32s(k)
			file.Float32s(k)
			file.Strings(k)
			if id, err := file.TokenID(k, 100); err == nil && (id < -1 || id >= 100) || err != nil && id != -1 {
				t.Fatalf("TokenID(%q) = %d, %v", k, id, err)
			}
		}
	})
}
