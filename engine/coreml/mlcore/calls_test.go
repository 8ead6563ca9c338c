package mlcore

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestMethodTable checks the table by itself: one argument per ':' of each
// selector, no selector listed twice for one class, parseable versions,
// headers named.
func TestMethodTable(t *testing.T) {
	seen := map[string]bool{}
	for s, m := range methods {
		if m.Name == "" {
			t.Fatalf("sel %d has no entry", s)
		}
		if got := strings.Count(m.Name, ":"); got != len(m.Args) {
			t.Errorf("%s %s: %d ':' but %d argument types", m.Class, m.Name, got, len(m.Args))
		}
		key := m.Class + " " + m.Name + " " + strconv.FormatBool(m.Static)
		if seen[key] {
			t.Errorf("%s listed twice", key)
		}
		seen[key] = true
		if m.Since != "" {
			if _, err := parseOSVersion(m.Since); err != nil {
				t.Errorf("%s: %v", m.Name, err)
			}
		}
		if !strings.HasPrefix(m.Header, "<") {
			t.Errorf("%s: header %q", m.Name, m.Header)
		}
		if _, ok := kindFor(m.Ret); !ok {
			t.Errorf("%s returns %s, which no send helper returns", m.Name, m.Ret)
		}
	}
}

func kindFor(ret ctype) (string, bool) {
	for helper, rets := range sendKinds {
		if slices.Contains(rets, ret) {
			return helper, true
		}
	}
	return "", false
}

// fixture is testdata/coreml_headers.txt, parsed.
type fixture struct {
	sources  map[string]bool
	methods  map[string][]string // "+ Class sel" -> fields: args, ret, since, source
	typedefs map[string]string
	enums    map[string][2]string // value expression, since
	funcs    map[string][2]string // args, ret
	externs  map[string][2]string // type, since
	classes  map[string]string    // since
	used     map[string]bool
}

func readFixture(t *testing.T) *fixture {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "coreml_headers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fx := &fixture{sources: map[string]bool{}, methods: map[string][]string{}, typedefs: map[string]string{},
		enums: map[string][2]string{}, funcs: map[string][2]string{}, externs: map[string][2]string{},
		classes: map[string]string{}, used: map[string]bool{}}
	commit := regexp.MustCompile(`^[0-9a-f]{40}$`)
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fs := strings.Split(text, "\t")
		want := map[string]int{"source": 5, "method": 8, "typedef": 4, "enum": 5, "func": 5, "extern": 5, "class": 4}[fs[0]]
		if want == 0 || len(fs) != want {
			t.Fatalf("coreml_headers.txt:%d: %d fields for %q", line, len(fs), fs[0])
		}
		if fs[0] != "source" && !fx.sources[fs[1]] {
			t.Fatalf("coreml_headers.txt:%d: source %q is not declared above", line, fs[1])
		}
		switch fs[0] {
		case "source":
			if !commit.MatchString(fs[3]) || !strings.Contains(fs[2], "/") || fs[4] == "" {
				t.Fatalf("coreml_headers.txt:%d: a source needs repository, 40-hex commit and path", line)
			}
			fx.sources[fs[1]] = true
		case "method":
			fx.methods[fs[2]+" "+fs[3]+" "+fs[4]] = []string{fs[5], fs[6], fs[7]}
		case "typedef":
			fx.typedefs[fs[2]] = fs[3]
		case "enum":
			fx.enums[fs[2]] = [2]string{fs[3], fs[4]}
		case "func":
			fx.funcs[fs[2]] = [2]string{fs[3], fs[4]}
		case "extern":
			fx.externs[fs[2]] = [2]string{fs[3], fs[4]}
		case "class":
			fx.classes[fs[2]] = fs[3]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return fx
}

// headerCType maps a type as a header spells it to the C type it crosses
// objc_msgSend (or a C call) as. Typedefs are resolved through the
// fixture's typedef lines, pointers included (CVPixelBufferRef * is a
// pointer to a struct pointer).
func headerCType(t string, typedefs map[string]string) (ctype, bool) {
	t = strings.TrimSpace(t)
	if strings.Contains(t, "(^") {
		return cBlock, true
	}
	if strings.Contains(t, "[") {
		return cIDArray, true
	}
	generic := regexp.MustCompile(`\s*<[^<>]*>`)
	for generic.MatchString(t) {
		t = generic.ReplaceAllString(t, "")
	}
	var base []string
	stars := 0
	for _, tok := range strings.Fields(strings.ReplaceAll(t, "*", " * ")) {
		switch tok {
		case "*":
			stars++
		case "_Nullable", "_Nonnull", "__autoreleasing", "nullable", "oneway",
			"CV_NULLABLE", "CV_NONNULL", "CV_RETURNS_RETAINED_PARAMETER", "CV_RELEASES_ARGUMENT":
		default:
			base = append(base, tok)
		}
	}
	b := strings.Join(base, " ")
	if under, ok := typedefs[strings.TrimPrefix(b, "const ")]; ok {
		return headerCType(under+strings.Repeat(" *", stars), typedefs)
	}
	cfStruct := regexp.MustCompile(`^(const )?struct __[A-Za-z]+$`).MatchString(b)
	switch {
	case stars == 2 && b == "NSError":
		return cErrOut, true
	case stars == 1 && (b == "void" || b == "const void"):
		return cVoidPtr, true
	case stars == 1 && b == "const char":
		return cCString, true
	case stars == 1 && cfStruct:
		return cCFRef, true // a Core Foundation reference: struct __CVBuffer *, ...
	case stars == 2 && cfStruct:
		return cCFRefOut, true
	case stars == 1 && regexp.MustCompile(`^[A-Z][A-Za-z]*$`).MatchString(b):
		return cID, true // a pointer to an object of class b
	case stars > 0:
		return "", false
	}
	switch b {
	case "void":
		return cVoid, true
	case "instancetype", "id", "ObjectType", "KeyType", "Class":
		return cID, true
	case "SEL":
		return cSEL, true
	case "BOOL":
		return cBOOL, true
	case "long long":
		return cLongLong, true
	case "NSInteger":
		return cNSInteger, true
	case "NSUInteger":
		return cNSUInt, true
	case "double":
		return cDouble, true
	case "size_t":
		return cSizeT, true
	case "unsigned int", "uint32_t":
		return cUInt32, true
	case "uint64_t":
		return cUInt64, true
	case "int32_t":
		return cInt32, true
	}
	return "", false
}

func (fx *fixture) ctypes(t *testing.T, what, list string) []ctype {
	t.Helper()
	if list == "" {
		return nil
	}
	var out []ctype
	for _, a := range strings.Split(list, ";") {
		c, ok := headerCType(a, fx.typedefs)
		if !ok {
			t.Fatalf("%s: no C type for header type %q", what, a)
		}
		out = append(out, c)
	}
	return out
}

func sinceField(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// TestTableMatchesHeaders checks every entry of calls.go (selectors, enum
// values, C functions) against the facts read off the headers, and that
// the fixture has no fact the table does not use.
func TestTableMatchesHeaders(t *testing.T) {
	fx := readFixture(t)
	for _, m := range methods {
		kind := "-"
		if m.Static {
			kind = "+"
		}
		key := kind + " " + m.Class + " " + m.Name
		f, ok := fx.methods[key]
		if !ok {
			t.Errorf("%s is not in testdata/coreml_headers.txt", key)
			continue
		}
		fx.used[key] = true
		if got := fx.ctypes(t, key, f[0]); !slices.Equal(got, m.Args) {
			t.Errorf("%s: the header's arguments are %v, the table says %v", key, got, m.Args)
		}
		if got := fx.ctypes(t, key, f[1]); len(got) != 1 || got[0] != m.Ret {
			t.Errorf("%s: the header returns %v, the table says %s", key, got, m.Ret)
		}
		if sinceField(f[2]) != m.Since {
			t.Errorf("%s: the header says since %q, the table %q", key, f[2], m.Since)
		}
	}
	for key := range fx.methods {
		if !fx.used[key] {
			t.Errorf("testdata/coreml_headers.txt has %s, which calls.go does not use", key)
		}
	}
	for _, e := range enumValues {
		f, ok := fx.enums[e.Name]
		if !ok {
			t.Errorf("enum %s is not in testdata/coreml_headers.txt", e.Name)
			continue
		}
		v := 0
		for _, part := range strings.Split(f[0], "|") {
			n, err := enumPart(strings.TrimSpace(part))
			if err != nil {
				t.Fatalf("enum %s: %v", e.Name, err)
			}
			v |= n
		}
		if v != e.Value {
			t.Errorf("%s is %#x in the header, %#x in calls.go", e.Name, v, e.Value)
		}
		if sinceField(f[1]) != e.Since {
			t.Errorf("%s: since %q in the header, %q in calls.go", e.Name, f[1], e.Since)
		}
	}
	if len(fx.enums) != len(enumValues) {
		t.Errorf("the fixture has %d enum values, calls.go %d", len(fx.enums), len(enumValues))
	}
	for _, c := range cfuncs {
		if c.Lib != libobjcPath && c.Lib != coreVideoPath {
			t.Errorf("%s: library %q", c.Name, c.Lib)
		}
		f, ok := fx.funcs[c.Name]
		if !ok {
			t.Errorf("function %s is not in testdata/coreml_headers.txt", c.Name)
			continue
		}
		if got := fx.ctypes(t, c.Name, f[0]); !slices.Equal(got, c.Args) {
			t.Errorf("%s: the header's arguments are %v, calls.go says %v", c.Name, got, c.Args)
		}
		if got := fx.ctypes(t, c.Name, f[1]); len(got) != 1 || got[0] != c.Ret {
			t.Errorf("%s: the header returns %v, calls.go says %s", c.Name, got, c.Ret)
		}
	}
	if len(fx.funcs) != len(cfuncs) {
		t.Errorf("the fixture has %d functions, calls.go %d", len(fx.funcs), len(cfuncs))
	}
	for _, v := range cvars {
		f, ok := fx.externs[v.Name]
		if !ok {
			t.Errorf("global %s is not in testdata/coreml_headers.txt", v.Name)
			continue
		}
		if got := fx.ctypes(t, v.Name, f[0]); len(got) != 1 || got[0] != v.Type {
			t.Errorf("%s: the header declares %v, calls.go %s", v.Name, got, v.Type)
		}
		if sinceField(f[1]) != v.Since {
			t.Errorf("%s: since %q in the header, %q in calls.go", v.Name, f[1], v.Since)
		}
	}
	if len(fx.externs) != len(cvars) {
		t.Errorf("the fixture has %d globals, calls.go %d", len(fx.externs), len(cvars))
	}
	for _, c := range optionalClasses {
		since, ok := fx.classes[c.Name]
		if !ok || sinceField(since) != c.Since {
			t.Errorf("class %s: the header says since %q (found %v), calls.go %q", c.Name, since, ok, c.Since)
		}
	}
	if len(fx.classes) != len(optionalClasses) {
		t.Errorf("the fixture has %d classes, calls.go %d", len(fx.classes), len(optionalClasses))
	}
	// Block arguments: the parameters the header gives the block.
	for s, params := range blockParams {
		m := methods[s]
		kind := map[bool]string{true: "+", false: "-"}[m.Static]
		f := fx.methods[kind+" "+m.Class+" "+m.Name]
		var block string
		for _, a := range strings.Split(f[0], ";") {
			if strings.Contains(a, "(^") {
				block = a
			}
		}
		got, err := blockParamTypes(block, fx.typedefs)
		if err != nil || !slices.Equal(got, params) {
			t.Errorf("%s: the header's block %q takes %v (%v), calls.go says %v", m.Name, block, got, err, params)
		}
	}
	for s, m := range methods {
		hasBlock := slices.Contains(m.Args, cBlock)
		if _, ok := blockParams[sel(s)]; ok != (hasBlock && m.Name != "initWithDataPointer:shape:dataType:strides:deallocator:error:") {
			t.Errorf("%s: a block argument needs its parameters in blockParams (only the deallocator, always nil, has none)", m.Name)
		}
	}
	// The versions the darwin code requires come from the same table.
	if enumSince("MLMultiArrayDataTypeFloat16") != "12.0" || enumSince("MLComputeUnitsCPUAndNeuralEngine") != "13.0" {
		t.Error("enumSince does not read enumValues")
	}
	// The Go values the rest of the package uses are the header's.
	if Float16 != mlMultiArrayDataTypeFloat16 || Float32 != mlMultiArrayDataTypeFloat32 || Int32 != mlMultiArrayDataTypeInt32 {
		t.Error("DType values are not MLMultiArrayDataType values")
	}
}

// enumPart reads one part of an enum value: a number, or a four-character
// code ('L00h'), packed big-endian as C compilers do.
func enumPart(p string) (int, error) {
	if len(p) == 6 && p[0] == '\'' && p[5] == '\'' {
		return int(p[1])<<24 | int(p[2])<<16 | int(p[3])<<8 | int(p[4]), nil
	}
	n, err := strconv.ParseInt(p, 0, 64)
	return int(n), err
}

// blockParamTypes reads the parameter types of a block type as a header
// spells it, "void (^)(A * _Nullable a, B * _Nullable b)", parameter names
// dropped.
func blockParamTypes(block string, typedefs map[string]string) ([]ctype, error) {
	_, rest, ok := strings.Cut(block, "(^")
	if !ok {
		return nil, fmt.Errorf("not a block type")
	}
	_, params, ok := strings.Cut(rest, ")(")
	if !ok || !strings.HasSuffix(params, ")") {
		return nil, fmt.Errorf("no parameter list")
	}
	var out []ctype
	for _, p := range strings.Split(strings.TrimSuffix(params, ")"), ",") {
		fields := strings.Fields(p)
		if len(fields) < 2 {
			return nil, fmt.Errorf("parameter %q has no name", p)
		}
		c, ok := headerCType(strings.Join(fields[:len(fields)-1], " "), typedefs)
		if !ok {
			return nil, fmt.Errorf("no C type for %q", p)
		}
		out = append(out, c)
	}
	return out, nil
}

// goTypes is the Go type each C type crosses a purego call as (the rule in
// calls.go's ctype comment).
var goTypes = map[ctype]reflect.Type{
	cID:        reflect.TypeFor[uintptr](),
	cCFRef:     reflect.TypeFor[uintptr](),
	cSizeT:     reflect.TypeFor[uintptr](),
	cUInt32:    reflect.TypeFor[uint32](),
	cUInt64:    reflect.TypeFor[uint64](),
	cInt32:     reflect.TypeFor[int32](),
	cVoidPtr:   reflect.TypeFor[unsafe.Pointer](),
	cCFRefOut:  reflect.TypeFor[*uintptr](),
	cDouble:    reflect.TypeFor[float64](),
	cBOOL:      reflect.TypeFor[bool](),
	cNSInteger: reflect.TypeFor[int](),
	cNSUInt:    reflect.TypeFor[uint](),
}

// TestCFunctionGoTypes checks the Go function types the darwin code
// registers with purego against the C prototypes of cfuncs: every
// CoreVideo function is a field of coreVideo named after it, with one Go
// parameter (and result) of the mapped type per C one; likewise the block
// handler of every block argument.
func TestCFunctionGoTypes(t *testing.T) {
	check := func(name string, ft reflect.Type, args []ctype, ret ctype) {
		t.Helper()
		if ft.Kind() != reflect.Func || ft.NumIn() != len(args) {
			t.Errorf("%s: Go type %v for %d C parameters", name, ft, len(args))
			return
		}
		for i, a := range args {
			if want := goTypes[a]; want == nil || ft.In(i) != want {
				t.Errorf("%s: parameter %d is %v in Go, %s in C (want %v)", name, i, ft.In(i), a, want)
			}
		}
		switch {
		case ret == cVoid && ft.NumOut() != 0:
			t.Errorf("%s returns void, the Go type %v", name, ft)
		case ret != cVoid && (ft.NumOut() != 1 || ft.Out(0) != goTypes[ret]):
			t.Errorf("%s returns %s, the Go type %v", name, ret, ft)
		}
	}
	cv := reflect.TypeFor[coreVideo]()
	fields := map[string]bool{}
	for i := range cv.NumField() {
		fields[cv.Field(i).Name] = true
	}
	n := 0
	for _, c := range cfuncs {
		if c.Lib != coreVideoPath {
			continue
		}
		n++
		f, ok := cv.FieldByName(c.Name)
		if !ok {
			t.Errorf("coreVideo has no field %s", c.Name)
			continue
		}
		check(c.Name, f.Type, c.Args, c.Ret)
	}
	if n != cv.NumField() {
		t.Errorf("coreVideo has %d fields for %d CoreVideo functions in cfuncs", cv.NumField(), n)
	}
	check("planCompletion", reflect.TypeFor[planCompletion](), blockParams[selPlanLoad], cVoid)
}

// TestHeaderCTypeMapping pins the mapping the fixture check relies on, with
// types as headers spell them.
func TestHeaderCTypeMapping(t *testing.T) {
	td := map[string]string{"MLComputeUnits": "NSInteger", "NSStringEncoding": "NSUInteger", "NSErrorDomain": "NSString *",
		"CVPixelBufferRef": "CVImageBufferRef", "CVImageBufferRef": "CVBufferRef", "CVBufferRef": "struct __CVBuffer *",
		"CFStringRef": "const struct __CFString *", "CVPixelBufferLockFlags": "CVOptionFlags", "CVOptionFlags": "uint64_t",
		"OSType": "FourCharCode", "FourCharCode": "UInt32", "UInt32": "unsigned int", "CVReturn": "int32_t"}
	for in, want := range map[string]ctype{
		"NSError * _Nullable __autoreleasing *":  cErrOut,
		"NSError **":                             cErrOut,
		"const void *":                           cVoidPtr,
		"void *":                                 cVoidPtr,
		"const char *":                           cCString,
		"NSArray<NSNumber *> *":                  cID,
		"id<MLFeatureProvider>":                  cID,
		"instancetype":                           cID,
		"KeyType <NSCopying>":                    cID,
		"const ObjectType _Nonnull [_Nullable]":  cIDArray,
		"void (^_Nullable)(void *bytes)":         cBlock,
		"oneway void":                            cVoid,
		"MLComputeUnits":                         cNSInteger,
		"NSStringEncoding":                       cNSUInt,
		"NSErrorDomain":                          cID,
		"long long":                              cLongLong,
		"BOOL":                                   cBOOL,
		"SEL _Nonnull":                           cSEL,
		"Class":                                  cID,
		"double":                                 cDouble,
		"id<MLComputeDeviceProtocol>":            cID,
		"NSArray<id<MLComputeDeviceProtocol>> *": cID,
		"CVPixelBufferRef":                       cCFRef,
		"CVPixelBufferRef CV_NONNULL":            cCFRef,
		"CV_RETURNS_RETAINED_PARAMETER CVPixelBufferRef CV_NULLABLE * CV_NONNULL": cCFRefOut,
		"CFStringRef":                  cCFRef,
		"const CFStringRef CV_NONNULL": cCFRef,
		"CVPixelBufferLockFlags":       cUInt64,
		"OSType":                       cUInt32,
		"CVReturn":                     cInt32,
		"size_t":                       cSizeT,
		"void * CV_NULLABLE":           cVoidPtr,
		"void (^)(MLComputePlan * _Nullable computePlan, NSError * _Nullable error)": cBlock,
	} {
		got, ok := headerCType(in, td)
		if !ok || got != want {
			t.Errorf("headerCType(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"float", "char **", "MLUnknownEnum", "struct foo", "struct __CVBuffer ***", "int64_t"} {
		if got, ok := headerCType(in, td); ok {
			t.Errorf("headerCType(%q) = %q, want no mapping", in, got)
		}
	}
}

// selNames returns the names of the sel constants in calls.go, in order.
func selNames(t *testing.T) map[string]sel {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "calls.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]sel{}
	for _, d := range file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || len(g.Specs) == 0 || g.Specs[0].(*ast.ValueSpec).Names[0].Name != "selAlloc" {
			continue
		}
		for i, s := range g.Specs {
			names[s.(*ast.ValueSpec).Names[0].Name] = sel(i)
		}
	}
	if len(names) != int(numSels)+1 {
		t.Fatalf("found %d sel constants, want %d", len(names), numSels+1)
	}
	return names
}

var argCtors = map[string]ctype{
	"aID": cID, "aIDs": cIDArray, "aInt": cNSInteger, "aUint": cNSUInt, "aLongLong": cLongLong,
	"aBool": cBOOL, "aPtr": cVoidPtr, "aErr": cErrOut, "aNilBlock": cBlock, "aBlock": cBlock, "aCF": cCFRef,
}

// TestDarwinCallSites reads the darwin files (whatever the platform the
// test runs on) and checks every send* call against the table: the
// selector is a table constant, each argument is made by the constructor
// of the C type the table gives for it, and the helper returns the table's
// result type. Every table entry must be used, and every C function looked
// up.
func TestDarwinCallSites(t *testing.T) {
	names := selNames(t)
	files, err := filepath.Glob("*_darwin*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	if len(files) == 0 {
		t.Fatal("no darwin files")
	}
	used := map[sel]int{}
	idents := map[string]bool{}
	literals := map[string]bool{}
	calls := 0
	for _, name := range files {
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				idents[id.Name] = true
			}
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil {
					literals[v] = true
				}
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fun, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			helper := fun.Sel.Name
			if _, ok := sendKinds[helper]; !ok {
				return true
			}
			pos := fset.Position(call.Pos())
			calls++
			if call.Ellipsis.IsValid() || len(call.Args) < 2 {
				t.Errorf("%s: %s needs a receiver, a selector and explicit arguments", pos, helper)
				return true
			}
			id, ok := call.Args[1].(*ast.Ident)
			s, known := names[idOrEmpty(id, ok)]
			if !ok || !known || s == numSels {
				t.Errorf("%s: %s's selector must be a sel constant from calls.go", pos, helper)
				return true
			}
			used[s]++
			var args []arg
			for _, a := range call.Args[2:] {
				c, ok := a.(*ast.CallExpr)
				var ct ctype
				if ok {
					if f, ok := c.Fun.(*ast.Ident); ok {
						ct = argCtors[f.Name]
					}
				}
				if ct == "" {
					t.Errorf("%s: %s: every argument must be made by an a* constructor of calls.go", pos, methods[s].Name)
					return true
				}
				args = append(args, arg{t: ct})
			}
			if msg := checkCall(s, helper, args); msg != "" {
				t.Errorf("%s: %s", pos, msg)
			}
			return true
		})
	}
	if calls < int(numSels) {
		t.Errorf("found %d send calls, fewer than the %d selectors", calls, numSels)
	}
	for s := range numSels {
		if used[s] == 0 {
			t.Errorf("%s %s is in the table but never sent", methods[s].Class, methods[s].Name)
		}
	}
	for _, c := range []string{"fnMsgSend", "fnPoolPush", "fnPoolPop", "libobjcPath", "coreMLPath", "coreVideoPath", "cvars", "optionalClasses"} {
		if !idents[c] {
			t.Errorf("the darwin code does not use %s", c)
		}
	}
	// The CoreVideo functions are called as fields of coreVideo, and every
	// global and optional class is looked up by name.
	for _, c := range cfuncs {
		if c.Lib == coreVideoPath && !idents[c.Name] {
			t.Errorf("the darwin code never calls %s", c.Name)
		}
	}
	for _, v := range cvars {
		if !literals[v.Name] {
			t.Errorf("the darwin code never reads %s", v.Name)
		}
	}
	for _, c := range optionalClasses {
		if !literals[c.Name] {
			t.Errorf("the darwin code never uses the class %s", c.Name)
		}
	}
}

func idOrEmpty(id *ast.Ident, ok bool) string {
	if !ok {
		return ""
	}
	return id.Name
}

func TestCheckCall(t *testing.T) {
	var e uintptr = 7
	if msg := checkCall(selModelPredict, "sendID", []arg{aID(1), aID(2), aErr(&e)}); msg != "" {
		t.Fatalf("a right call: %s", msg)
	}
	if e != 0 {
		t.Error("aErr does not clear the out-parameter")
	}
	for name, c := range map[string]struct {
		s      sel
		helper string
		args   []arg
	}{
		"too few":      {selModelPredict, "sendID", []arg{aID(1), aID(2)}},
		"wrong type":   {selModelPredict, "sendID", []arg{aID(1), aInt(2), aErr(&e)}},
		"wrong result": {selArrayCount, "sendInt", nil},
		"void as id":   {selRelease, "sendID", nil},
		"no helper":    {selInit, "sendFloat", nil},
		"bad sel":      {numSels, "sendID", nil},
		"block as ptr": {selArrayInitWithDataPointer, "sendID", []arg{aPtr(nil), aID(0), aInt(0), aID(0), aPtr(nil), aErr(&e)}},
		"id as CF":     {selArrayInitWithPixelBuffer, "sendID", []arg{aID(1), aID(2)}},
		"double as id": {selCostWeight, "sendID", nil},
	} {
		if msg := checkCall(c.s, c.helper, c.args); msg == "" {
			t.Errorf("%s: accepted", name)
		}
	}
	ids := []uintptr{5, 6}
	if a := aIDs(ids); a.v.(unsafe.Pointer) != unsafe.Pointer(&ids[0]) || a.t != cIDArray {
		t.Error("aIDs does not pass the array's address")
	}
	if a := aIDs(nil); a.v.(unsafe.Pointer) != nil {
		t.Error("aIDs(nil) is not NULL")
	}
}
