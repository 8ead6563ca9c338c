package mlprogram

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

const storiesPkg = "stories.bundle/chunk_0.mlpackage"

// TestPackagesMatchCoremltools: every test package (the converter's
// bundles and the audit's violating package) reads with the functions,
// op counts (constants excluded), constant counts and weight bytes that
// coremltools reads (gen.py's audit-expected.json).
func TestPackagesMatchCoremltools(t *testing.T) {
	exp := readExpected(t)
	for rel, fns := range exp.Packages {
		p, err := OpenPackage(context.Background(), filepath.Join(testDataDir(t), rel))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, fn := range p.Model.Functions {
			names = append(names, fn.Name)
		}
		var want []string
		for name := range fns {
			want = append(want, name)
		}
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Fatalf("%s: functions %v, coremltools reads %v", rel, names, want)
		}
		r := Audit(p, DefaultLimits())
		for _, fr := range r.Functions {
			w := fns[fr.Name]
			if fr.Ops != w.Ops || fr.Constants != w.Constants || fr.WeightBytes != w.WeightBytes {
				t.Errorf("%s %s: %d ops, %d constants, %d weight bytes; coremltools: %d, %d, %d",
					rel, fr.Name, fr.Ops, fr.Constants, fr.WeightBytes, w.Ops, w.Constants, w.WeightBytes)
			}
		}
	}
}

// TestReadProgramTypes: names, types and shapes as the converter's
// manifest declares them for stories.bundle (K=8, hidden 64, vocab 512).
func TestReadProgramTypes(t *testing.T) {
	p, err := OpenPackage(context.Background(), testData(t, storiesPkg))
	if err != nil {
		t.Fatal(err)
	}
	if p.Model.DefaultFunction != "generate_8" || p.ModelFile != "Data/com.apple.CoreML/model.mlmodel" {
		t.Fatalf("default function %q, model file %q", p.Model.DefaultFunction, p.ModelFile)
	}
	fn := p.Model.Function("generate_8")
	if fn == nil || fn.Opset != "CoreML8" {
		t.Fatalf("generate_8: %+v", fn)
	}
	if fn.Inputs[0].Name != "hidden_in" || fn.Inputs[0].Type.String() != "fp16[1,8,64]" {
		t.Errorf("first input %s %s, want hidden_in fp16[1,8,64]", fn.Inputs[0].Name, fn.Inputs[0].Type)
	}
	if !slices.Contains(fn.Block.Outputs, "block_argmax") || !slices.Contains(fn.Block.Outputs, "block_max") || slices.Contains(fn.Block.Outputs, "logits") {
		t.Errorf("outputs %v: want block_argmax and block_max, no logits", fn.Block.Outputs)
	}
	if s := p.Model.Function("sample_8"); s == nil || !slices.Contains(s.Block.Outputs, "logits") {
		t.Errorf("sample_8 lacks logits: %+v", s)
	}
	var argmax *Op
	walkOps(fn.Block, func(op *Op) {
		if op.Type == "reduce_argmax" {
			argmax = op
		}
	})
	if argmax == nil || argmax.Name != "block_argmax" || argmax.Outputs[0].Type.String() != "int32[1,1,8]" {
		t.Fatalf("reduce_argmax: %+v", argmax)
	}
	if x := argmax.Input("x"); len(x) != 1 || x[0].Name == "" {
		t.Errorf("reduce_argmax x: %+v", x)
	}
	// Every blob lies inside weight.bin, and weight.bin holds them all.
	size := p.WeightFiles["Data/com.apple.CoreML/weights/weight.bin"]
	var sum int64
	for _, b := range p.Blobs {
		sum += b.Size
		if b.DataOffset+b.Size > size || b.DType != 1 { // BlobDataType Float16
			t.Errorf("blob %+v in a file of %d bytes", b, size)
		}
	}
	if sum == 0 || sum > size || size-sum > 64*int64(len(p.Blobs)+1)+63*int64(len(p.Blobs)) {
		t.Errorf("blobs hold %d of weight.bin's %d bytes", sum, size)
	}
	if p.Bytes <= size {
		t.Errorf("package size %d not above weight.bin's %d", p.Bytes, size)
	}

	v, err := OpenPackage(context.Background(), testData(t, "audit-violations.mlpackage"))
	if err != nil {
		t.Fatal(err)
	}
	flex, enum := v.Model.Function("flexible"), v.Model.Function("enumerated")
	if flex.InputFlex["flex"] != FlexRange || flex.Inputs[0].Type.String() != "fp16[1,?]" {
		t.Errorf("flexible input: %v %s", flex.InputFlex, flex.Inputs[0].Type)
	}
	if enum.InputFlex["e"] != FlexEnumerated {
		t.Errorf("enumerated input: %v", enum.InputFlex)
	}
}

// TestOpenPackageRefuses: a damaged package, a path leaving it or a file
// that is not a regular file is an error naming the file, never a panic
// or a read outside the package.
func TestOpenPackageRefuses(t *testing.T) {
	model := filepath.Join("Data", "com.apple.CoreML", "model.mlmodel")
	weights := filepath.Join("Data", "com.apple.CoreML", "weights", "weight.bin")
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	manifest := func(path string) func(dir string) {
		return func(dir string) {
			raw, err := os.ReadFile(filepath.Join(dir, "Manifest.json"))
			must(err)
			s := strings.Replace(string(raw), `"com.apple.CoreML/model.mlmodel"`, `"`+path+`"`, 1)
			must(os.WriteFile(filepath.Join(dir, "Manifest.json"), []byte(s), 0o644))
		}
	}
	cases := []struct {
		name   string
		damage func(dir string)
		want   string // in the error
	}{
		{"no Manifest.json", func(dir string) { must(os.Remove(filepath.Join(dir, "Manifest.json"))) }, "Manifest.json"},
		{"Manifest.json not JSON", func(dir string) { must(os.WriteFile(filepath.Join(dir, "Manifest.json"), []byte("{"), 0o644)) }, "not valid JSON"},
		{"model path climbs out", manifest("../../../outside"), "leaves the package"},
		{"model path absolute", manifest("/etc/hostname"), "leaves the package"},
		{"model is a symlink", func(dir string) {
			must(os.Remove(filepath.Join(dir, model)))
			must(os.Symlink(outside, filepath.Join(dir, model)))
		}, "not a regular file"},
		{"model directory is a symlink out", func(dir string) {
			other := copyTree(t, filepath.Join(dir, "Data"))
			must(os.RemoveAll(filepath.Join(dir, "Data")))
			must(os.Symlink(other, filepath.Join(dir, "Data")))
		}, "model.mlmodel"},
		{"model is a FIFO", func(dir string) {
			must(os.Remove(filepath.Join(dir, model)))
			must(syscall.Mkfifo(filepath.Join(dir, model), 0o644))
		}, "not a regular file"},
		{"model truncated", func(dir string) {
			raw, err := os.ReadFile(filepath.Join(dir, model))
			must(err)
			must(os.WriteFile(filepath.Join(dir, model), raw[:len(raw)/2], 0o644))
		}, "model.mlmodel"},
		{"weights truncated", func(dir string) { must(os.Truncate(filepath.Join(dir, weights), 1000)) }, "outside the file"},
		{"weights missing", func(dir string) { must(os.Remove(filepath.Join(dir, weights))) }, "weight.bin"},
		{"blob sentinel", func(dir string) {
			f, err := os.OpenFile(filepath.Join(dir, weights), os.O_RDWR, 0)
			must(err)
			_, err = f.WriteAt([]byte{0, 0, 0, 0}, 64)
			must(err)
			must(f.Close())
		}, "sentinel"},
		{"storage version", func(dir string) {
			f, err := os.OpenFile(filepath.Join(dir, weights), os.O_RDWR, 0)
			must(err)
			_, err = f.WriteAt([]byte{9}, 4)
			must(err)
			must(f.Close())
		}, "version 9"},
		{"a symlink in the package", func(dir string) { must(os.Symlink(outside, filepath.Join(dir, "Data", "link"))) }, "not a regular file"},
	}
	src := testData(t, storiesPkg)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyTree(t, src)
			c.damage(dir)
			_, err := OpenPackage(context.Background(), dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if !errors.Is(err, ErrPackage) && !errors.Is(err, ErrFormat) {
				t.Errorf("%v wraps neither ErrPackage nor ErrFormat", err)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("%v does not name the package %s", err, dir)
			}
		})
	}
	// The package itself as a symlink, and a file that is no package.
	link := filepath.Join(t.TempDir(), "link.mlpackage")
	must(os.Symlink(src, link))
	for _, p := range []string{link, outside, filepath.Join(t.TempDir(), "missing.mlpackage")} {
		if _, err := OpenPackage(context.Background(), p); !errors.Is(err, ErrPackage) {
			t.Errorf("%s: %v, want ErrPackage", p, err)
		}
	}
}

// msg encodes a protobuf message from fields built by the helpers below.
func msg(fs ...[]byte) []byte { return slices.Concat(fs...) }

func fBytes(n protowire.Number, b []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), b)
}

func fVarint(n protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), v)
}

// model wraps a MILSpec.Program's fields into a Model.
func model(program ...[]byte) []byte {
	return msg(fVarint(1, 9), fBytes(502, msg(program...)))
}

// function is a Program.functions entry: name -> a function of opset
// CoreML8 whose block holds ops.
func function(name string, ops ...[]byte) []byte {
	var blk []byte
	for _, op := range ops {
		blk = append(blk, fBytes(3, op)...)
	}
	fn := msg(fBytes(2, []byte("CoreML8")), fBytes(3, msg(fBytes(1, []byte("CoreML8")), fBytes(2, blk))))
	return fBytes(2, msg(fBytes(1, []byte(name)), fBytes(2, fn)))
}

// TestReadProgramBounds: hand-made programs past each of the reader's
// bounds, or of another model type, are ErrFormat errors.
func TestReadProgramBounds(t *testing.T) {
	nested := msg(fBytes(1, []byte("cond")))
	for range maxDepth + 2 {
		nested = msg(fBytes(1, []byte("cond")), fBytes(4, fBytes(3, nested)))
	}
	many := make([][]byte, 0, maxOps+1)
	for range maxOps + 1 {
		many = append(many, nil)
	}
	params := fBytes(1, []byte("add"))
	for range maxValues + 1 {
		params = append(params, fBytes(2, nil)...) // an empty inputs entry
	}
	tensor := func(rank uint64, dims ...uint64) []byte {
		t := msg(fVarint(1, 10), fVarint(2, rank))
		for _, d := range dims {
			t = append(t, fBytes(3, fBytes(1, fVarint(1, d)))...)
		}
		return msg(fBytes(1, []byte("y")), fBytes(2, fBytes(1, t)))
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"neural network", msg(fVarint(1, 4), fBytes(500, nil)), "not an ML program"},
		{"no function", model(), "no function"},
		{"no block for the opset", model(fBytes(2, msg(fBytes(1, []byte("main")), fBytes(2, fBytes(2, []byte("CoreML8")))))), "no block"},
		{"function twice", model(function("main"), function("main")), "appears twice"},
		{"nested blocks", model(function("main", nested)), "nested"},
		{"too many ops", model(function("main", many...)), "operations"},
		{"too many parameters", model(function("main", params)), "reader's bound"},
		{"huge dimension", model(function("main", msg(fBytes(1, []byte("add")), fBytes(3, tensor(1, 1<<60))))), "dimension size"},
		{"rank and dimensions disagree", model(function("main", msg(fBytes(1, []byte("add")), fBytes(3, tensor(3, 1, 2))))), "rank 3"},
		{"wrong wire type", model(fVarint(2, 7)), "wire type"},
		{"truncated", model(function("main"))[:20], "field 502"},
		{"too large", make([]byte, MaxModelBytes+1), "bytes"},
	}
	for _, c := range cases {
		m, err := ReadProgram(c.data)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (model %v), want ErrFormat mentioning %q", c.name, err, m != nil, c.want)
		}
	}
	// Within the bounds: the same shapes read back.
	m, err := ReadProgram(model(function("main", msg(fBytes(1, []byte("add")), fBytes(3, tensor(2, 3, 4))))))
	if err != nil {
		t.Fatal(err)
	}
	if op := m.Functions[0].Block.Ops[0]; op.Type != "add" || op.Name != "y" || op.Outputs[0].Type.String() != "fp16[3,4]" {
		t.Fatalf("op %+v", op)
	}
}

// TestBaseType: the opset prefix Core ML's compute plan writes is dropped,
// nothing else.
func TestBaseType(t *testing.T) {
	for in, want := range map[string]string{
		"ios18.constexpr_lut_to_dense": "constexpr_lut_to_dense", "ios16.cast": "cast", "const": "const",
		"ios.x": "ios.x", "ios18": "ios18", "iosx.y": "iosx.y", "linear": "linear",
	} {
		if got := (&Op{Type: in}).BaseType(); got != want {
			t.Errorf("BaseType(%q) = %q, want %q", in, got, want)
		}
	}
	for typ, want := range map[string]bool{"const": true, "ios18.constexpr_lut_to_dense": true, "constexpr_cast": true, "cast": false, "linear": false} {
		if got := (&Op{Type: typ}).IsConst(); got != want {
			t.Errorf("IsConst(%q) = %v", typ, got)
		}
	}
}

// FuzzReadProgram: no model.mlmodel, however damaged, makes the reader or
// the audit of what it read panic or run past its bounds.
func FuzzReadProgram(f *testing.F) {
	for _, rel := range []string{storiesPkg, "audit-violations.mlpackage"} {
		if raw, err := os.ReadFile(filepath.Join(testDataDir(f), rel, "Data", "com.apple.CoreML", "model.mlmodel")); err == nil {
			f.Add(raw)
		}
	}
	f.Add(model(function("main", msg(fBytes(1, []byte("add"))))))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadProgram(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		r := Audit(&Package{Model: m, Blobs: map[BlobRef]Blob{}}, DefaultLimits())
		for _, fr := range r.Functions {
			if fr.Ops < 0 || fr.Constants < 0 {
				t.Fatalf("counts %+v", fr)
			}
		}
	})
}
