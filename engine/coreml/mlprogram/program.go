// Package mlprogram reads saved Core ML ML programs (.mlpackage) on any
// platform, without Core ML: the functions of a package, their operations
// with the types and shapes of their inputs and outputs, and the weight
// blobs the operations reference. Audit checks a package against the rules
// known to push work off the Neural Engine (audit.go cites each rule's
// source); `anechat bundle audit` prints its report.
//
// The reader decodes only the protobuf fields it needs, with field numbers
// taken from coremltools' mlmodel/format/Model.proto, MIL.proto and
// FeatureTypes.proto (CoreML.Specification.Model, its mlProgram field =
// 502, a MILSpec.Program). It is written for files that may be hostile:
// sizes, counts and nesting are bounded (wire.go), paths never leave the
// package and only regular files are opened (package.go), and no input
// makes it panic (FuzzReadProgram).
package mlprogram

import (
	"fmt"
	"slices"
	"strings"
)

// DType is a MIL data type (MIL.proto, enum DataType).
type DType int32

// The MIL data types.
const (
	Bool     DType = 1
	String   DType = 2
	Float16  DType = 10
	Float32  DType = 11
	Float64  DType = 12
	BFloat16 DType = 13
	Int8     DType = 21
	Int16    DType = 22
	Int32    DType = 23
	Int64    DType = 24
	Int4     DType = 25
	UInt8    DType = 31
	UInt16   DType = 32
	UInt32   DType = 33
	UInt64   DType = 34
	UInt4    DType = 35
	UInt2    DType = 36
	UInt1    DType = 37
	UInt6    DType = 38
	UInt3    DType = 39
	FP8E4M3  DType = 40
	FP8E5M2  DType = 41
)

// String is the type's name in MIL's text form (fp16, int32, ...).
func (d DType) String() string {
	switch d {
	case Bool:
		return "bool"
	case String:
		return "string"
	case Float16:
		return "fp16"
	case Float32:
		return "fp32"
	case Float64:
		return "fp64"
	case BFloat16:
		return "bf16"
	case FP8E4M3:
		return "fp8e4m3"
	case FP8E5M2:
		return "fp8e5m2"
	case Int4:
		return "int4"
	}
	if d >= Int8 && d <= Int64 {
		return fmt.Sprintf("int%d", 8<<(d-Int8))
	}
	if d >= UInt8 && d <= UInt64 {
		return fmt.Sprintf("uint%d", 8<<(d-UInt8))
	}
	if d >= UInt4 && d <= UInt3 {
		return "uint" + [...]string{"4", "2", "1", "6", "3"}[d-UInt4]
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// IsInteger reports whether d is a signed or unsigned integer type.
func (d DType) IsInteger() bool {
	return (d >= Int8 && d <= Int4) || (d >= UInt8 && d <= UInt3)
}

// Kind is what a value's type is: a tensor, a state wrapping a tensor, or
// one of MIL's container types.
type Kind uint8

// The kinds of value types.
const (
	KindNone Kind = iota // no type given
	KindTensor
	KindState
	KindList
	KindTuple
	KindDict
)

// Type is a value's type. For tensors and states, DType and the shape:
// Rank is -1 when the rank is not fixed; Shape[i] is -1 when dimension i
// is not fixed.
type Type struct {
	Kind  Kind
	DType DType
	Rank  int
	Shape []int64
}

// Fixed reports whether the type's shape is fully known.
func (t Type) Fixed() bool {
	return t.Rank >= 0 && !slices.Contains(t.Shape, -1)
}

// Last is the size of the last dimension, -1 when unknown, 0 for a scalar.
func (t Type) Last() int64 {
	if t.Rank < 0 {
		return -1
	}
	if len(t.Shape) == 0 {
		return 0
	}
	return t.Shape[len(t.Shape)-1]
}

// String is the type as MIL's text writes it, e.g. fp16[1,8,64] (? for a
// dimension that is not fixed, [*] for an unknown rank).
func (t Type) String() string {
	switch t.Kind {
	case KindNone:
		return "untyped"
	case KindList:
		return "list"
	case KindTuple:
		return "tuple"
	case KindDict:
		return "dict"
	}
	var b strings.Builder
	if t.Kind == KindState {
		b.WriteString("state ")
	}
	b.WriteString(t.DType.String())
	if t.Rank < 0 {
		b.WriteString("[*]")
		return b.String()
	}
	b.WriteByte('[')
	for i, d := range t.Shape {
		if i > 0 {
			b.WriteByte(',')
		}
		if d < 0 {
			b.WriteByte('?')
		} else {
			fmt.Fprint(&b, d)
		}
	}
	b.WriteByte(']')
	return b.String()
}

// Var is a named value: a function or block input, or an op's output.
type Var struct {
	Name string
	Type Type
}

// BlobRef is a reference to a blob in a weight file: the file as the
// program names it (e.g. "@model_path/weights/weight.bin") and the offset
// of the blob's metadata in it.
type BlobRef struct {
	File   string
	Offset uint64
}

// Literal is a value written into the program: its type, its first
// integer elements when it holds integers (axes, shapes), and its blob
// when its data lives in a weight file.
type Literal struct {
	Type Type
	Ints []int64
	// NInts counts every integer element, also those not kept in Ints.
	NInts int
	Blob  *BlobRef
}

// Binding is one argument of an op's parameter: the name of a value in
// scope, or a literal.
type Binding struct {
	Name    string
	Literal *Literal
}

// Param is one parameter of an op with its arguments (one, or several
// for variadic parameters such as concat's values).
type Param struct {
	Name string
	Args []Binding
}

// Op is one operation.
type Op struct {
	// Type is the operation as saved (e.g. "linear", "reduce_argmax",
	// "constexpr_lut_to_dense").
	Type string
	// Name is the op's "name" attribute, or its first output's name.
	Name    string
	Inputs  []Param // sorted by name
	Outputs []Var
	// Blocks are the nested blocks of control flow (cond, while_loop).
	Blocks []*Block
	// Val is the "val" attribute (const ops), nil without one.
	Val *Literal
	// Blobs lists every weight blob the op references, in its attributes
	// and in literal arguments.
	Blobs []BlobRef
}

// Input returns the arguments of parameter name, nil when absent.
func (o *Op) Input(name string) []Binding {
	for _, p := range o.Inputs {
		if p.Name == name {
			return p.Args
		}
	}
	return nil
}

// BaseType is the op's type without an opset prefix such as "ios18."
// (Core ML's compute plan names ops that way).
func (o *Op) BaseType() string {
	rest, ok := strings.CutPrefix(o.Type, "ios")
	if !ok {
		return o.Type
	}
	digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
	if digits == 0 || digits == len(rest) || rest[digits] != '.' {
		return o.Type
	}
	return rest[digits+1:]
}

// IsConst reports whether the op only materialises a constant: const and
// the constexpr_* decompressions, which Core ML runs once at load. They
// are not counted as ops (CoreML-LLM counted its LUT decompressions as
// ops once and read a misleading 91-94% ANE placement,
// docs/MAC_BENCH_2026-04-19.md); their weight bytes are.
func (o *Op) IsConst() bool {
	t := o.BaseType()
	return t == "const" || strings.HasPrefix(t, "constexpr_")
}

// Block is a basic block: its inputs (loop bodies), the names it returns
// and its operations in order.
type Block struct {
	Inputs  []Var
	Outputs []string
	Ops     []*Op
}

// Flex is how a model input's shape may vary, as the model description
// declares it.
type Flex uint8

// The kinds of shape flexibility.
const (
	FlexNone       Flex = iota // one fixed shape
	FlexEnumerated             // a list of fixed shapes
	FlexRange                  // ranges of sizes
)

// String names the flexibility as coremltools does.
func (f Flex) String() string {
	switch f {
	case FlexEnumerated:
		return "enumerated shapes"
	case FlexRange:
		return "shape range"
	}
	return "fixed"
}

// Function is one function of the program, with its active block (the
// block specialization its opset names).
type Function struct {
	Name   string
	Opset  string
	Inputs []Var
	Block  *Block
	// InputFlex is each input's shape flexibility from the model
	// description (absent: fixed).
	InputFlex map[string]Flex
}

// Model is a model.mlmodel holding an ML program.
type Model struct {
	SpecVersion     int32
	DefaultFunction string
	Version         int64 // the program's version
	// Functions are sorted by name.
	Functions []*Function
}

// Function returns the function named name, nil when absent.
func (m *Model) Function(name string) *Function {
	for _, f := range m.Functions {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// decoder holds what is left of the reader's bounds while one model is
// decoded.
type decoder struct {
	ops, values int
}

func (d *decoder) value() error {
	d.values--
	if d.values < 0 {
		return fmt.Errorf("%w: more than %d functions, blocks, values and parameters (the reader's bound)", ErrFormat, maxValues)
	}
	return nil
}

// ReadProgram decodes a model.mlmodel (a serialized
// CoreML.Specification.Model) that holds an ML program. Any other model
// type, a damaged file or one past the reader's bounds is an error
// wrapping ErrFormat.
func ReadProgram(data []byte) (*Model, error) {
	if len(data) > MaxModelBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d a program may have", ErrFormat, len(data), MaxModelBytes)
	}
	d := &decoder{ops: maxOps, values: maxValues}
	m := &Model{}
	var desc, prog []byte
	sawProgram := false
	err := fields(data, func(f field) error {
		switch f.num {
		case 1: // specificationVersion
			if err := f.wantVarint("specificationVersion"); err != nil {
				return err
			}
			m.SpecVersion = int32Of(f.v)
		case 2: // description
			if err := f.wantBytes("description"); err != nil {
				return err
			}
			desc = f.b
		case 502: // mlProgram
			if err := f.wantBytes("mlProgram"); err != nil {
				return err
			}
			prog, sawProgram = f.b, true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !sawProgram {
		return nil, fmt.Errorf("%w: the model is not an ML program (no mlProgram field; neural network and other model types are not read)", ErrFormat)
	}
	flex, def, err := d.description(desc)
	if err != nil {
		return nil, fmt.Errorf("description: %w", err)
	}
	m.DefaultFunction = def
	if err := d.program(prog, m); err != nil {
		return nil, fmt.Errorf("mlProgram: %w", err)
	}
	if len(m.Functions) == 0 {
		return nil, fmt.Errorf("%w: the program has no function", ErrFormat)
	}
	for _, fn := range m.Functions {
		fn.InputFlex = flex[fn.Name]
		if fn.InputFlex == nil && len(m.Functions) == 1 {
			fn.InputFlex = flex[""] // a single-function model describes its inputs at the top level
		}
	}
	return m, nil
}

// readDescription reads the ModelDescription: each function's input
// flexibility (key "" for the top-level inputs of a single-function
// model) and the default function's name.
func (d *decoder) description(b []byte) (map[string]map[string]Flex, string, error) {
	out := map[string]map[string]Flex{}
	def := ""
	err := fields(b, func(f field) error {
		switch f.num {
		case 1: // input
			if err := f.wantBytes("input"); err != nil {
				return err
			}
			return d.feature(f.b, out, "")
		case 20: // functions
			if err := f.wantBytes("functions"); err != nil {
				return err
			}
			var name string
			var inputs [][]byte
			err := fields(f.b, func(g field) error {
				switch g.num {
				case 1:
					if err := g.wantBytes("function name"); err != nil {
						return err
					}
					name = string(g.b)
				case 2:
					if err := g.wantBytes("function input"); err != nil {
						return err
					}
					inputs = append(inputs, g.b)
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, in := range inputs {
				if err := d.feature(in, out, name); err != nil {
					return fmt.Errorf("function %q: %w", name, err)
				}
			}
		case 21: // defaultFunctionName
			if err := f.wantBytes("defaultFunctionName"); err != nil {
				return err
			}
			def = string(f.b)
		}
		return nil
	})
	return out, def, err
}

// feature records a FeatureDescription's shape flexibility under
// out[fn][name] when it has any.
func (d *decoder) feature(b []byte, out map[string]map[string]Flex, fn string) error {
	if err := d.value(); err != nil {
		return err
	}
	var name string
	flex := FlexNone
	err := fields(b, func(f field) error {
		switch f.num {
		case 1:
			if err := f.wantBytes("feature name"); err != nil {
				return err
			}
			name = string(f.b)
		case 3: // FeatureType
			if err := f.wantBytes("feature type"); err != nil {
				return err
			}
			return fields(f.b, func(g field) error {
				var arr []byte
				switch g.num {
				case 5: // multiArrayType
					if err := g.wantBytes("multiArrayType"); err != nil {
						return err
					}
					arr = g.b
				case 8: // stateType { arrayType = 1 }
					if err := g.wantBytes("stateType"); err != nil {
						return err
					}
					err := fields(g.b, func(h field) error {
						if h.num == 1 {
							if err := h.wantBytes("state arrayType"); err != nil {
								return err
							}
							arr = h.b
						}
						return nil
					})
					if err != nil {
						return err
					}
				case 4: // imageType: enumeratedSizes = 21, imageSizeRange = 31
					if err := g.wantBytes("imageType"); err != nil {
						return err
					}
					return fields(g.b, func(h field) error {
						switch h.num {
						case 21:
							flex = FlexEnumerated
						case 31:
							flex = FlexRange
						}
						return nil
					})
				}
				if arr == nil {
					return nil
				}
				// ArrayFeatureType: enumeratedShapes = 21, shapeRange = 31
				return fields(arr, func(h field) error {
					switch h.num {
					case 21:
						flex = FlexEnumerated
					case 31:
						flex = FlexRange
					}
					return nil
				})
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if flex != FlexNone {
		if out[fn] == nil {
			out[fn] = map[string]Flex{}
		}
		out[fn][name] = flex
	}
	return nil
}

// program decodes a MILSpec.Program into m.
func (d *decoder) program(b []byte, m *Model) error {
	seen := map[string]bool{}
	err := fields(b, func(f field) error {
		switch f.num {
		case 1: // version
			if err := f.wantVarint("version"); err != nil {
				return err
			}
			m.Version = int64(f.v)
		case 2: // functions: map<string, Function>
			if err := f.wantBytes("functions"); err != nil {
				return err
			}
			if err := d.value(); err != nil {
				return err
			}
			name, val, err := mapEntry(f.b, "function")
			if err != nil {
				return err
			}
			if seen[name] {
				return fmt.Errorf("%w: function %q appears twice", ErrFormat, name)
			}
			seen[name] = true
			fn, err := d.function(val)
			if err != nil {
				return fmt.Errorf("functions[%q]: %w", name, err)
			}
			fn.Name = name
			m.Functions = append(m.Functions, fn)
		}
		return nil
	})
	slices.SortFunc(m.Functions, func(a, b *Function) int { return strings.Compare(a.Name, b.Name) })
	return err
}

// function decodes a MILSpec.Function and picks its active block.
func (d *decoder) function(b []byte) (*Function, error) {
	fn := &Function{}
	blocks := map[string][]byte{}
	err := fields(b, func(f field) error {
		switch f.num {
		case 1: // inputs
			if err := f.wantBytes("inputs"); err != nil {
				return err
			}
			v, err := d.namedValueType(f.b, 0)
			if err != nil {
				return fmt.Errorf("inputs: %w", err)
			}
			fn.Inputs = append(fn.Inputs, v)
		case 2: // opset
			if err := f.wantBytes("opset"); err != nil {
				return err
			}
			fn.Opset = string(f.b)
		case 3: // block_specializations: map<string, Block>
			if err := f.wantBytes("block_specializations"); err != nil {
				return err
			}
			if err := d.value(); err != nil {
				return err
			}
			k, v, err := mapEntry(f.b, "block specialization")
			if err != nil {
				return err
			}
			blocks[k] = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	raw, ok := blocks[fn.Opset]
	if !ok {
		return nil, fmt.Errorf("%w: no block for the function's opset %q", ErrFormat, fn.Opset)
	}
	fn.Block, err = d.block(raw, 0)
	if err != nil {
		return nil, fmt.Errorf("block %q: %w", fn.Opset, err)
	}
	return fn, nil
}

// block decodes a MILSpec.Block at nesting depth depth.
func (d *decoder) block(b []byte, depth int) (*Block, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: blocks nested more than %d deep", ErrFormat, maxDepth)
	}
	if err := d.value(); err != nil {
		return nil, err
	}
	blk := &Block{}
	err := fields(b, func(f field) error {
		switch f.num {
		case 1: // inputs
			if err := f.wantBytes("block inputs"); err != nil {
				return err
			}
			v, err := d.namedValueType(f.b, depth)
			if err != nil {
				return err
			}
			blk.Inputs = append(blk.Inputs, v)
		case 2: // outputs
			if err := f.wantBytes("block outputs"); err != nil {
				return err
			}
			if err := d.value(); err != nil {
				return err
			}
			blk.Outputs = append(blk.Outputs, string(f.b))
		case 3: // operations
			if err := f.wantBytes("operations"); err != nil {
				return err
			}
			op, err := d.operation(f.b, depth)
			if err != nil {
				return fmt.Errorf("operations[%d]: %w", len(blk.Ops), err)
			}
			blk.Ops = append(blk.Ops, op)
		}
		return nil
	})
	return blk, err
}

// operation decodes a MILSpec.Operation.
func (d *decoder) operation(b []byte, depth int) (*Op, error) {
	d.ops--
	if d.ops < 0 {
		return nil, fmt.Errorf("%w: more than %d operations (the reader's bound)", ErrFormat, maxOps)
	}
	op := &Op{}
	err := fields(b, func(f field) error {
		switch f.num {
		case 1: // type
			if err := f.wantBytes("type"); err != nil {
				return err
			}
			op.Type = string(f.b)
		case 2: // inputs: map<string, Argument>
			if err := f.wantBytes("inputs"); err != nil {
				return err
			}
			if err := d.value(); err != nil {
				return err
			}
			name, val, err := mapEntry(f.b, "input")
			if err != nil {
				return err
			}
			p := Param{Name: name}
			err = fields(val, func(g field) error {
				if g.num != 1 { // arguments
					return nil
				}
				if err := g.wantBytes("argument"); err != nil {
					return err
				}
				bnd, err := d.binding(g.b, depth, op)
				if err != nil {
					return err
				}
				p.Args = append(p.Args, bnd)
				return nil
			})
			if err != nil {
				return fmt.Errorf("input %q: %w", name, err)
			}
			op.Inputs = append(op.Inputs, p)
		case 3: // outputs
			if err := f.wantBytes("outputs"); err != nil {
				return err
			}
			v, err := d.namedValueType(f.b, depth)
			if err != nil {
				return fmt.Errorf("outputs: %w", err)
			}
			op.Outputs = append(op.Outputs, v)
		case 4: // blocks
			if err := f.wantBytes("blocks"); err != nil {
				return err
			}
			blk, err := d.block(f.b, depth+1)
			if err != nil {
				return fmt.Errorf("blocks[%d]: %w", len(op.Blocks), err)
			}
			op.Blocks = append(op.Blocks, blk)
		case 5: // attributes: map<string, Value>
			if err := f.wantBytes("attributes"); err != nil {
				return err
			}
			key, val, err := mapEntry(f.b, "attribute")
			if err != nil {
				return err
			}
			lit, strs, err := d.literal(val, depth, op)
			if err != nil {
				return fmt.Errorf("attribute %q: %w", key, err)
			}
			switch key {
			case "name":
				if len(strs) > 0 {
					op.Name = strs[0]
				}
			case "val":
				op.Val = lit
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(op.Inputs, func(a, b Param) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(op.Inputs); i++ {
		if op.Inputs[i].Name == op.Inputs[i-1].Name {
			return nil, fmt.Errorf("%w: input %q appears twice", ErrFormat, op.Inputs[i].Name)
		}
	}
	if op.Name == "" && len(op.Outputs) > 0 {
		op.Name = op.Outputs[0].Name
	}
	return op, nil
}

// binding decodes an Argument.Binding; blobs it references are added to op.
func (d *decoder) binding(b []byte, depth int, op *Op) (Binding, error) {
	if err := d.value(); err != nil {
		return Binding{}, err
	}
	var bnd Binding
	err := fields(b, func(f field) error {
		switch f.num {
		case 1:
			if err := f.wantBytes("binding name"); err != nil {
				return err
			}
			bnd.Name = string(f.b)
		case 2:
			if err := f.wantBytes("binding value"); err != nil {
				return err
			}
			lit, _, err := d.literal(f.b, depth, op)
			if err != nil {
				return err
			}
			bnd.Literal = lit
		}
		return nil
	})
	return bnd, err
}

// namedValueType decodes a NamedValueType.
func (d *decoder) namedValueType(b []byte, depth int) (Var, error) {
	if err := d.value(); err != nil {
		return Var{}, err
	}
	var v Var
	err := fields(b, func(f field) error {
		switch f.num {
		case 1:
			if err := f.wantBytes("name"); err != nil {
				return err
			}
			v.Name = string(f.b)
		case 2:
			if err := f.wantBytes("type"); err != nil {
				return err
			}
			t, err := valueType(f.b, depth)
			if err != nil {
				return fmt.Errorf("%q: %w", v.Name, err)
			}
			v.Type = t
		}
		return nil
	})
	return v, err
}

// valueType decodes a ValueType. Containers keep only their kind; a state
// is described by the tensor it wraps.
func valueType(b []byte, depth int) (Type, error) {
	if depth > maxDepth {
		return Type{}, fmt.Errorf("%w: types nested more than %d deep", ErrFormat, maxDepth)
	}
	t := Type{Rank: -1}
	err := fields(b, func(f field) error {
		var err error
		switch f.num {
		case 1: // tensorType
			if err := f.wantBytes("tensorType"); err != nil {
				return err
			}
			t, err = tensorType(f.b)
		case 2:
			t = Type{Kind: KindList, Rank: -1}
		case 3:
			t = Type{Kind: KindTuple, Rank: -1}
		case 4:
			t = Type{Kind: KindDict, Rank: -1}
		case 5: // stateType { wrappedType = 1 }
			if err := f.wantBytes("stateType"); err != nil {
				return err
			}
			err = fields(f.b, func(g field) error {
				if g.num != 1 {
					return nil
				}
				if err := g.wantBytes("wrappedType"); err != nil {
					return err
				}
				w, err := valueType(g.b, depth+1)
				t = w
				return err
			})
			t.Kind = KindState
		}
		return err
	})
	return t, err
}

// tensorType decodes a TensorType.
func tensorType(b []byte) (Type, error) {
	t := Type{Kind: KindTensor}
	rank := int64(0)
	err := fields(b, func(f field) error {
		switch f.num {
		case 1:
			if err := f.wantVarint("dataType"); err != nil {
				return err
			}
			t.DType = DType(int32Of(f.v))
		case 2:
			if err := f.wantVarint("rank"); err != nil {
				return err
			}
			rank = int64(f.v)
		case 3: // dimensions
			if err := f.wantBytes("dimensions"); err != nil {
				return err
			}
			if len(t.Shape) >= maxRank {
				return fmt.Errorf("%w: more than %d dimensions", ErrFormat, maxRank)
			}
			size := int64(-1)
			err := fields(f.b, func(g field) error {
				if g.num != 1 { // unknown = 2 leaves -1
					return nil
				}
				if err := g.wantBytes("constant dimension"); err != nil {
					return err
				}
				size = 0 // proto3: a missing size is 0
				return fields(g.b, func(h field) error {
					if h.num != 1 {
						return nil
					}
					if err := h.wantVarint("dimension size"); err != nil {
						return err
					}
					var err error
					size, err = dimOf(h.v)
					return err
				})
			})
			if err != nil {
				return err
			}
			t.Shape = append(t.Shape, size)
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	switch {
	case rank == -1: // a rank that is not fixed
		t.Rank, t.Shape = -1, nil
	case rank == 0 && len(t.Shape) > 0: // proto3: a rank never written reads as 0
		t.Rank = len(t.Shape)
	case rank < 0 || rank > maxRank:
		return t, fmt.Errorf("%w: tensor rank %d", ErrFormat, rank)
	case int(rank) != len(t.Shape):
		if len(t.Shape) == 0 {
			// A scalar's type may omit its rank; a tensor declaring a
			// rank without dimensions has an unknown shape.
			t.Rank, t.Shape = int(rank), slices.Repeat([]int64{-1}, int(rank))
			return t, nil
		}
		return t, fmt.Errorf("%w: tensor rank %d with %d dimensions", ErrFormat, rank, len(t.Shape))
	default:
		t.Rank = int(rank)
	}
	return t, nil
}

// literal decodes a MILSpec.Value: its type, its integers (the first
// maxInts), its strings (only the first is kept: op names) and its blob;
// every blob it references, also inside nested values, is added to op.
func (d *decoder) literal(b []byte, depth int, op *Op) (*Literal, []string, error) {
	if depth > maxDepth {
		return nil, nil, fmt.Errorf("%w: values nested more than %d deep", ErrFormat, maxDepth)
	}
	if err := d.value(); err != nil {
		return nil, nil, err
	}
	lit := &Literal{Type: Type{Rank: -1}}
	var strs []string
	err := fields(b, func(f field) error {
		switch f.num {
		case 2: // type
			if err := f.wantBytes("value type"); err != nil {
				return err
			}
			t, err := valueType(f.b, depth+1)
			if err != nil {
				return err
			}
			lit.Type = t
		case 3: // immediateValue
			if err := f.wantBytes("immediateValue"); err != nil {
				return err
			}
			return fields(f.b, func(g field) error {
				if err := g.wantBytes("immediate value"); err != nil {
					return err
				}
				switch g.num {
				case 1: // tensor
					return tensorValue(g.b, lit, &strs)
				case 2, 3: // tuple, list: values = 1
					return fields(g.b, func(h field) error {
						if h.num != 1 {
							return nil
						}
						if err := h.wantBytes("element"); err != nil {
							return err
						}
						_, _, err := d.literal(h.b, depth+1, op)
						return err
					})
				case 4: // dictionary: values = 1 { key = 1, value = 2 }
					return fields(g.b, func(h field) error {
						if h.num != 1 {
							return nil
						}
						if err := h.wantBytes("dictionary pair"); err != nil {
							return err
						}
						return fields(h.b, func(k field) error {
							if k.num != 1 && k.num != 2 {
								return nil
							}
							if err := k.wantBytes("dictionary key or value"); err != nil {
								return err
							}
							_, _, err := d.literal(k.b, depth+1, op)
							return err
						})
					})
				}
				return nil
			})
		case 5: // blobFileValue { fileName = 1, offset = 2 }
			if err := f.wantBytes("blobFileValue"); err != nil {
				return err
			}
			ref := BlobRef{}
			err := fields(f.b, func(g field) error {
				switch g.num {
				case 1:
					if err := g.wantBytes("blob fileName"); err != nil {
						return err
					}
					ref.File = string(g.b)
				case 2:
					if err := g.wantVarint("blob offset"); err != nil {
						return err
					}
					ref.Offset = g.v
				}
				return nil
			})
			if err != nil {
				return err
			}
			lit.Blob = &ref
			op.Blobs = append(op.Blobs, ref)
		}
		return nil
	})
	return lit, strs, err
}

// tensorValue decodes a TensorValue's integers (ints = 2, longInts = 5)
// into lit and its first string (strings = 4) into strs.
func tensorValue(b []byte, lit *Literal, strs *[]string) error {
	return fields(b, func(f field) error {
		switch f.num {
		case 2, 5:
			if err := f.wantBytes("integers"); err != nil {
				return err
			}
			return fields(f.b, func(g field) error {
				if g.num != 1 {
					return nil
				}
				var err error
				lit.Ints, err = g.int64s(lit.Ints, maxInts, &lit.NInts)
				if f.num == 2 { // int32 values are sign-extended varints
					for i := range lit.Ints {
						lit.Ints[i] = int64(int32(lit.Ints[i]))
					}
				}
				return err
			})
		case 4:
			if err := f.wantBytes("strings"); err != nil {
				return err
			}
			return fields(f.b, func(g field) error {
				if g.num != 1 || len(*strs) > 0 {
					return nil
				}
				if err := g.wantBytes("string"); err != nil {
					return err
				}
				*strs = append(*strs, string(g.b))
				return nil
			})
		}
		return nil
	})
}
