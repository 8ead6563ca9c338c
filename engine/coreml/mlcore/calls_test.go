package mlcore

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
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
		enums: map[string][2]string{}, funcs: map[string][2]string{}, used: map[string]bool{}}
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
		want := map[string]int{"source": 5, "method": 8, "typedef": 4, "enum": 5, "func": 5}[fs[0]]
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
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return fx
}

// headerCType maps a type as a header spells it to the C type it crosses
// objc_msgSend as.
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
		case "_Nullable", "_Nonnull", "__autoreleasing", "nullable", "oneway":
		default:
			base = append(base, tok)
		}
	}
	b := strings.Join(base, " ")
	switch {
	case stars == 2 && b == "NSError":
		return cErrOut, true
	case stars == 1 && (b == "void" || b == "const void"):
		return cVoidPtr, true
	case stars == 1 && b == "const char":
		return cCString, true
	case stars == 1 && regexp.MustCompile(`^[A-Z][A-Za-z]*$`).MatchString(b):
		return cID, true // a pointer to an object of class b
	case stars > 0:
		return "", false
	}
	switch b {
	case "void":
		return cVoid, true
	case "instancetype", "id", "ObjectType", "KeyType":
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
	}
	if under, ok := typedefs[b]; ok {
		return headerCType(under, typedefs)
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
			n, err := strconv.ParseInt(strings.TrimSpace(part), 0, 64)
			if err != nil {
				t.Fatalf("enum %s: %v", e.Name, err)
			}
			v |= int(n)
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
	// The versions the darwin code requires come from the same table.
	if enumSince("MLMultiArrayDataTypeFloat16") != "12.0" || enumSince("MLComputeUnitsCPUAndNeuralEngine") != "13.0" {
		t.Error("enumSince does not read enumValues")
	}
	// The Go values the rest of the package uses are the header's.
	if Float16 != mlMultiArrayDataTypeFloat16 || Float32 != mlMultiArrayDataTypeFloat32 || Int32 != mlMultiArrayDataTypeInt32 {
		t.Error("DType values are not MLMultiArrayDataType values")
	}
}

// TestHeaderCTypeMapping pins the mapping the fixture check relies on, with
// types as headers spell them.
func TestHeaderCTypeMapping(t *testing.T) {
	td := map[string]string{"MLComputeUnits": "NSInteger", "NSStringEncoding": "NSUInteger", "NSErrorDomain": "NSString *"}
	for in, want := range map[string]ctype{
		"NSError * _Nullable __autoreleasing *": cErrOut,
		"NSError **":                            cErrOut,
		"const void *":                          cVoidPtr,
		"void *":                                cVoidPtr,
		"const char *":                          cCString,
		"NSArray<NSNumber *> *":                 cID,
		"id<MLFeatureProvider>":                 cID,
		"instancetype":                          cID,
		"KeyType <NSCopying>":                   cID,
		"const ObjectType _Nonnull [_Nullable]": cIDArray,
		"void (^_Nullable)(void *bytes)":        cBlock,
		"oneway void":                           cVoid,
		"MLComputeUnits":                        cNSInteger,
		"NSStringEncoding":                      cNSUInt,
		"NSErrorDomain":                         cID,
		"long long":                             cLongLong,
		"BOOL":                                  cBOOL,
		"SEL _Nonnull":                          cSEL,
	} {
		got, ok := headerCType(in, td)
		if !ok || got != want {
			t.Errorf("headerCType(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"float", "char **", "MLUnknownEnum", "struct foo"} {
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
	"aBool": cBOOL, "aPtr": cVoidPtr, "aErr": cErrOut, "aNilBlock": cBlock,
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
	for _, c := range []string{"fnMsgSend", "fnPoolPush", "fnPoolPop", "libobjcPath", "coreMLPath"} {
		if !idents[c] {
			t.Errorf("the darwin code does not use %s", c)
		}
	}
	if len(cfuncs) != 3 {
		t.Errorf("calls.go lists %d C functions; update the check above", len(cfuncs))
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
