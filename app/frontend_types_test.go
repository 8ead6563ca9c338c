package app

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"anechat/internal/testres"
)

// The window's TypeScript mirrors the services' JSON by hand (the build runs
// Wails with -skipbindings): frontend/src/types.ts declares the values and
// frontend/src/api.ts which method or event carries which. This test ties
// them to the Go code: every call in api.ts must name a bound method, pass
// as many arguments as it takes, each of a matching type, and expect its
// result's type; every event must carry its Go payload's type; and every
// interface in types.ts must be one of those values, with exactly the Go
// struct's JSON fields (optional exactly when the field is omitempty) and
// matching types. A Go string type with constants (an enum such as Theme or
// OutcomeKind) is the union of exactly its constants' values. Refinements
// TypeScript may add (a union of string literals for a plain Go string, a
// shape for free-form JSON) are allowed; a missing, extra, renamed or
// retyped field, and a missing or extra enum value, are not.

// jsonAs names the json.RawMessage fields whose JSON is a known Go type,
// by Go struct and JSON field name: Chat stores GenerateStats as a
// message's stats, ConversationOptions as a conversation's options, and
// Models a ModelMeta as a model's meta.
var jsonAs = map[string]reflect.Type{
	"Message.stats":        reflect.TypeFor[GenerateStats](),
	"Conversation.options": reflect.TypeFor[ConversationOptions](),
	"Model.meta":           reflect.TypeFor[ModelMeta](),
}

// ownJSON lists the Go types with a MarshalJSON of their own, each with the
// TypeScript type alias that describes its JSON.
var ownJSON = map[reflect.Type]string{
	reflect.TypeFor[Width](): "Width",
}

// events lists the payload type of each event the services emit.
var events = map[string]reflect.Type{
	EventToken:         reflect.TypeFor[TokenEvent](),
	EventProgress:      reflect.TypeFor[ProgressEvent](),
	EventDone:          reflect.TypeFor[DoneEvent](),
	EventError:         reflect.TypeFor[ErrorEvent](),
	EventTitle:         reflect.TypeFor[TitleEvent](),
	EventDownload:      reflect.TypeFor[Download](),
	EventModelProgress: reflect.TypeFor[ModelProgress](),
}

func TestFrontendTypesMatchGo(t *testing.T) {
	root, typesTS, apiTS := frontendSources(t)
	errs, err := frontendDrift(root, typesTS, apiTS)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// TestFrontendDriftIsCaught edits the real types.ts and api.ts the ways they
// drift and checks that each edit is reported, naming what changed.
func TestFrontendDriftIsCaught(t *testing.T) {
	root, typesTS, apiTS := frontendSources(t)
	for _, c := range []struct {
		what, file, old, new, want string
	}{
		{"a renamed field", "types", "  conversationId: number;\n  user: Message;", "  conversationID: number;\n  user: Message;", "types.ts Turn lacks Go app.Turn.ConversationID"},
		{"an extra field", "types", "  generating: number;\n", "  generating: number;\n  busy: boolean;\n", "types.ts Thread.busy: Go app.Thread has no such JSON field"},
		{"a retyped field", "types", "  prefillTokens: number;", "  prefillTokens: string;", "GenerateStats.prefillTokens (Go app.GenerateStats.PrefillTokens"},
		{"an optional field Go always sends", "types", "  snippet: string;", "  snippet?: string;", "optional in TypeScript, but Go always sends it"},
		{"a required field Go may leave out", "types", "  stats?: GenerateStats;\n  createdAt", "  stats: GenerateStats;\n  createdAt", "Go leaves it out when empty (omitempty)"},
		{"a nullable value without null", "types", "  message: Message | null;", "  message: Message;", "Go *storage.Message is null when nil"},
		{"a wrong result type", "api", `chat<Thread>("Thread", id)`, `chat<Turn>("Thread", id)`, "Go app.Thread is types.ts Turn"},
		{"a method Go does not have", "api", `chat<boolean>("Cancel", id)`, `chat<boolean>("Stop", id)`, "app.Chat has no method Stop"},
		{"a missing argument", "api", `chat<Turn>("Send", id, text)`, `chat<Turn>("Send", id)`, "passes 1 arguments, the Go method takes 2"},
		{"a mistyped argument", "api", "rename: (id: number, title: string)", "rename: (id: number, title: number)", "Chat.RenameConversation argument 2: Go string is a string; types.ts says number"},
		{"a wrong event payload", "api", `cb(d as ErrorEvent)`, `cb(d as ProgressEvent)`, "Go app.ErrorEvent is types.ts ProgressEvent"},
		{"an interface nothing carries", "types", "export interface TagCount {", "export interface Unused { x: number; }\nexport interface TagCount {", "types.ts declares interface Unused"},
		{"a number among the literals of a Go string", "types", `export type Role = "system" | "user" | "assistant";`, `export type Role = 1 | "user";`, "Go string is a string"},
		{"a literal Go's constants lack", "types", `export type Theme = "system" | "light" | "dark";`, `export type Theme = "system" | "light" | "dark" | "sepia";`, `"sepia", which Go app.Theme has no constant for`},
		{"a constant of Go the literals lack", "types", `export type Theme = "system" | "light" | "dark";`, `export type Theme = "system" | "light";`, `lacks "dark" (Go app.ThemeDark)`},
		{"an outcome kind the window does not know", "types", `"loaded" | "cancelled";`, `"loaded";`, `lacks "cancelled" (Go app.OutcomeCancelled)`},
		{"a Go enum typed as any string", "types", "  theme: Theme;\n  /** After", "  theme: string;\n  /** After", "want the union of its constants"},
	} {
		ty, api := typesTS, apiTS
		src := map[string]*string{"types": &ty, "api": &api}[c.file]
		if !strings.Contains(*src, c.old) {
			t.Fatalf("%s: %s.ts no longer holds %q: update this case", c.what, c.file, c.old)
		}
		*src = strings.Replace(*src, c.old, c.new, 1)
		errs, err := frontendDrift(root, ty, api)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, c.want) }) {
			t.Errorf("%s: no report containing %q; got %q", c.what, c.want, errs)
		}
	}
}

// frontendSources reads frontend/src/types.ts and api.ts; root is the
// repository's root.
func frontendSources(t *testing.T) (root, typesTS, apiTS string) {
	t.Helper()
	root = testres.RepoRoot(t)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, "frontend", "src", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return root, read("types.ts"), read("api.ts")
}

// frontendDrift compares types.ts and api.ts with the bound services and the
// events, returning each difference as a sentence that says what to change.
// root is the repository's root, where the Go enums' constants are read.
func frontendDrift(root, typesTS, apiTS string) ([]string, error) {
	decls, err := tsDeclarations(typesTS)
	if err != nil {
		return nil, fmt.Errorf("frontend/src/types.ts: %w", err)
	}
	calls, subs, err := apiCalls(apiTS)
	if err != nil {
		return nil, fmt.Errorf("frontend/src/api.ts: %w", err)
	}
	if len(calls) == 0 || len(subs) == 0 {
		return nil, fmt.Errorf("read %d calls and %d events in frontend/src/api.ts: the reader no longer understands it", len(calls), len(subs))
	}
	m := &mirror{decls: decls, root: root, seen: map[string]bool{}, done: map[string]bool{}, enums: map[reflect.Type][]goConst{}}

	services := map[string]reflect.Type{}
	for _, s := range New(Options{}).Services() {
		services[reflect.TypeOf(s).Elem().Name()] = reflect.TypeOf(s)
	}
	errType := reflect.TypeFor[error]()
	for _, c := range calls {
		at := fmt.Sprintf("api.ts:%d %s.%s", c.line, c.service, c.method)
		st, ok := services[c.service]
		if !ok {
			m.errf("%s: no bound service %q (app.Services has %v)", at, c.service, slices.Sorted(maps.Keys(services)))
			continue
		}
		meth, ok := st.MethodByName(c.method)
		if !ok {
			m.errf("%s: app.%s has no method %s", at, c.service, c.method)
			continue
		}
		ft := meth.Type
		if n := ft.NumIn() - 1; n != len(c.args) {
			m.errf("%s: passes %d arguments, the Go method takes %d (%s)", at, len(c.args), n, ft)
		} else {
			for j, a := range c.args {
				if a == nil {
					m.errf("%s: cannot tell argument %d's type (%s): annotate its parameter or add `satisfies Type`", at, j+1, c.argText[j])
					continue
				}
				m.compare(ft.In(j+1), a, fmt.Sprintf("%s argument %d", at, j+1))
			}
		}
		var outs []reflect.Type
		for j := range ft.NumOut() {
			if ft.Out(j) != errType {
				outs = append(outs, ft.Out(j))
			}
		}
		switch {
		case len(outs) == 0:
			if !isName(c.result, "void") {
				m.errf("%s: expects %s, the Go method returns no value (want void)", at, c.result)
			}
		case len(outs) == 1:
			m.compare(outs[0], c.result, at+" result")
		default:
			m.errf("%s: the Go method returns %d values; a bound method returns one (and an error)", at, len(outs))
		}
	}

	subscribed := map[string]bool{}
	for _, e := range subs {
		at := fmt.Sprintf("api.ts:%d event %q", e.line, e.name)
		subscribed[e.name] = true
		g, ok := events[e.name]
		if !ok {
			m.errf("%s: the services emit no such event (they emit %v)", at, slices.Sorted(maps.Keys(events)))
			continue
		}
		m.compare(g, e.typ, at)
	}
	for _, name := range slices.Sorted(maps.Keys(events)) {
		if !subscribed[name] {
			m.errf("api.ts does not subscribe to %q (payload %s)", name, events[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(decls.interfaces)) {
		if !m.seen[name] {
			m.errf("types.ts declares interface %s, which no call or event in api.ts carries: remove it, or use it in api.ts", name)
		}
	}
	return m.errs, nil
}

// mirror compares Go types with TypeScript ones and collects the differences.
type mirror struct {
	decls tsDecls
	root  string                     // the repository's root
	seen  map[string]bool            // interfaces compared
	done  map[string]bool            // Go type | interface pairs compared
	enums map[reflect.Type][]goConst // the constants of Go string types, read once
	errs  []string
}

func (m *mirror) errf(format string, a ...any) { m.errs = append(m.errs, fmt.Sprintf(format, a...)) }

// resolve follows type alias names to what they stand for.
func (m *mirror) resolve(t *tsType) *tsType {
	for i := 0; i < 10 && t.kind == "name" && len(t.args) == 0; i++ {
		a, ok := m.decls.aliases[t.name]
		if !ok {
			break
		}
		t = a
	}
	return t
}

func isName(t *tsType, names ...string) bool {
	return t.kind == "name" && len(t.args) == 0 && slices.Contains(names, t.name)
}

// compare checks that TypeScript type ts describes the JSON of Go type g.
func (m *mirror) compare(g reflect.Type, ts *tsType, where string) {
	if alias, ok := ownJSON[g]; ok {
		if !isName(ts, alias) {
			m.errf("%s: Go %s writes its own JSON, which types.ts calls %s; found %s", where, g, alias, ts)
		} else if _, ok := m.decls.aliases[alias]; !ok {
			m.errf("%s: types.ts does not declare type %s (the JSON of Go %s)", where, alias, g)
		}
		return
	}
	switch g {
	case reflect.TypeFor[time.Time]():
		if !isName(m.resolve(ts), "string") {
			m.errf("%s: Go time.Time is an RFC 3339 string in JSON; types.ts says %s", where, ts)
		}
		return
	case reflect.TypeFor[json.RawMessage]():
		return // free-form JSON: any shape TypeScript gives it
	}
	marshaler := reflect.TypeFor[json.Marshaler]()
	if g.Implements(marshaler) || reflect.PointerTo(g).Implements(marshaler) {
		m.errf("%s: Go %s has a MarshalJSON: add it with its TypeScript type to ownJSON in app/frontend_types_test.go", where, g)
		return
	}
	named := ts
	ts = m.resolve(ts)
	switch g.Kind() {
	case reflect.Pointer:
		var rest []*tsType
		null := false
		if ts.kind == "union" {
			for _, a := range ts.args {
				if isName(a, "null") {
					null = true
				} else {
					rest = append(rest, a)
				}
			}
		}
		if !null {
			m.errf("%s: Go %s is null when nil; want %s | null in types.ts, found %s", where, g, g.Elem().Name(), ts)
			return
		}
		elem := rest[0]
		if len(rest) > 1 {
			elem = &tsType{kind: "union", args: rest}
		}
		m.compare(g.Elem(), elem, where)
	case reflect.Struct:
		switch {
		case named.kind == "name":
			fs, ok := m.decls.interfaces[named.name]
			if !ok {
				m.errf("%s: types.ts has no interface %s (for Go %s)", where, named.name, g)
				return
			}
			if named.name != g.Name() {
				m.errf("%s: Go %s is types.ts %s: name the interface %s", where, g, named.name, g.Name())
			}
			m.seen[named.name] = true
			key := g.String() + "|" + named.name
			if m.done[key] {
				return
			}
			m.done[key] = true
			m.fields(g, fs, "types.ts "+named.name)
		case ts.kind == "object":
			m.fields(g, ts.fields, where+" "+ts.String())
		default:
			m.errf("%s: Go %s is an object in JSON; types.ts says %s", where, g, ts)
		}
	case reflect.Slice, reflect.Array:
		if g.Kind() == reflect.Slice && g.Elem().Kind() == reflect.Uint8 {
			if !isName(ts, "string") {
				m.errf("%s: Go %s is a base64 string in JSON; types.ts says %s", where, g, ts)
			}
			return
		}
		switch {
		case ts.kind == "array":
			m.compare(g.Elem(), ts.args[0], where+"[]")
		case ts.kind == "tuple" && g.Kind() == reflect.Array && len(ts.args) == g.Len():
			for j, a := range ts.args {
				m.compare(g.Elem(), a, fmt.Sprintf("%s[%d]", where, j))
			}
		default:
			m.errf("%s: Go %s is an array in JSON; types.ts says %s", where, g, ts)
		}
	case reflect.Map:
		if g.Key().Kind() != reflect.String || ts.kind != "name" || ts.name != "Record" || len(ts.args) != 2 || !isName(ts.args[0], "string") {
			m.errf("%s: Go %s is an object keyed by strings; want Record<string, ...> in types.ts, found %s", where, g, ts)
			return
		}
		m.compare(g.Elem(), ts.args[1], where+"[key]")
	case reflect.String:
		if consts := m.enum(g, where); len(consts) > 0 {
			m.literals(g, consts, named, ts, where)
		} else if !isName(ts, "string") && !allLiterals(ts) {
			m.errf("%s: Go %s is a string; types.ts says %s", where, g, ts)
		}
	case reflect.Bool:
		if !isName(ts, "boolean") {
			m.errf("%s: Go %s is a boolean; types.ts says %s", where, g, ts)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if !isName(ts, "number") {
			m.errf("%s: Go %s is a number; types.ts says %s", where, g, ts)
		}
	case reflect.Interface:
		if !isName(ts, "unknown") {
			m.errf("%s: Go %s can hold any JSON; want unknown in types.ts, found %s", where, g, ts)
		}
	default:
		m.errf("%s: Go %s has no JSON form this test knows", where, g)
	}
}

// goConst is a constant of a Go string type: its name and value.
type goConst struct{ name, value string }

// enum returns the constants of Go string type g, read from the source of
// its package (nil for string itself, or a type without constants).
func (m *mirror) enum(g reflect.Type, where string) []goConst {
	if g.Name() == "" || g.PkgPath() == "" {
		return nil
	}
	if c, ok := m.enums[g]; ok {
		return c
	}
	consts, err := goStringConsts(m.root, g)
	if err != nil {
		m.errf("%s: reading the constants of Go %s: %v", where, g, err)
	}
	m.enums[g] = consts
	return consts
}

// goStringConsts parses the non-test files of g's package (a package of
// this module, under root) and returns the constants declared with type g
// and a string literal value, in the order of the source.
func goStringConsts(root string, g reflect.Type) ([]goConst, error) {
	module, _, _ := strings.Cut(reflect.TypeFor[mirror]().PkgPath(), "/")
	rel, ok := strings.CutPrefix(g.PkgPath(), module+"/")
	if !ok {
		return nil, nil // not this module's: its constants are not ours to check
	}
	dir := filepath.Join(root, filepath.FromSlash(rel))
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []goConst
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != g.Name() || len(vs.Values) != len(vs.Names) {
					continue
				}
				for i, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						return nil, fmt.Errorf("%s: constant %s is not a string literal", fset.Position(v.Pos()), vs.Names[i].Name)
					}
					val, err := strconv.Unquote(lit.Value)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", fset.Position(v.Pos()), err)
					}
					out = append(out, goConst{name: vs.Names[i].Name, value: val})
				}
			}
		}
	}
	return out, nil
}

// literals checks that ts (named as written) is the union of exactly the
// values of consts, the constants of Go string type g.
func (m *mirror) literals(g reflect.Type, consts []goConst, named, ts *tsType, where string) {
	key := g.String() + "|" + named.String()
	if m.done[key] {
		return
	}
	m.done[key] = true
	if !allLiterals(ts) {
		var vals []string
		for _, c := range consts {
			vals = append(vals, strconv.Quote(c.value))
		}
		m.errf("%s: Go %s takes only its constants: want the union of its constants (%s) in types.ts, found %s",
			where, g, strings.Join(vals, " | "), named)
		return
	}
	lits := map[string]bool{}
	for _, a := range append([]*tsType{ts}, ts.args...) {
		if a.kind == "lit" {
			lits[a.name] = true
		}
	}
	pkg := g.PkgPath()[strings.LastIndex(g.PkgPath(), "/")+1:]
	for _, c := range consts {
		if !lits[c.value] {
			m.errf("%s: types.ts %s lacks %q (Go %s.%s): add it", where, named, c.value, pkg, c.name)
		}
		delete(lits, c.value)
	}
	for _, v := range slices.Sorted(maps.Keys(lits)) {
		m.errf("%s: types.ts %s has %q, which Go %s has no constant for: remove it, or add the constant in Go", where, named, v, g)
	}
}

// allLiterals reports whether t is a string literal or a union of them.
func allLiterals(t *tsType) bool {
	if t.kind == "lit" {
		return true
	}
	if t.kind != "union" {
		return false
	}
	for _, a := range t.args {
		if a.kind != "lit" {
			return false
		}
	}
	return true
}

// goField is a field of a Go struct as encoding/json writes it.
type goField struct {
	name      string // the JSON name
	goName    string
	typ       reflect.Type
	omitempty bool
}

// jsonFields lists the fields encoding/json writes for struct type g
// (embedded structs without a tag flattened into it).
func jsonFields(g reflect.Type) []goField {
	var out []goField
	for i := range g.NumField() {
		f := g.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		out = append(out, goField{name: name, goName: f.Name, typ: f.Type, omitempty: omit})
	}
	return out
}

// fields compares a Go struct's JSON fields with TypeScript members.
func (m *mirror) fields(g reflect.Type, ts []tsField, label string) {
	byName := map[string]tsField{}
	for _, f := range ts {
		byName[f.name] = f
	}
	for _, f := range jsonFields(g) {
		goWhere := fmt.Sprintf("Go %s.%s (json %q)", g, f.goName, f.name)
		t, ok := byName[f.name]
		if !ok {
			m.errf("%s lacks %s: add `%s%s: ...`", label, goWhere, f.name, map[bool]string{true: "?"}[f.omitempty])
			continue
		}
		delete(byName, f.name)
		where := fmt.Sprintf("%s.%s (%s)", label, f.name, goWhere)
		switch {
		case t.optional && !f.omitempty:
			m.errf("%s: optional in TypeScript, but Go always sends it (no omitempty)", where)
		case !t.optional && f.omitempty:
			m.errf("%s: Go leaves it out when empty (omitempty): make it optional (%s?)", where, f.name)
		}
		typ := f.typ
		if as, ok := jsonAs[g.Name()+"."+f.name]; ok && typ == reflect.TypeFor[json.RawMessage]() {
			typ = as
		}
		tt := t.typ
		if typ.Kind() == reflect.Pointer && f.omitempty {
			// Left out when nil, so never null: T, optional.
			typ = typ.Elem()
		}
		m.compare(typ, tt, where)
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		m.errf("%s.%s: Go %s has no such JSON field: remove it or add it in Go", label, name, g)
	}
}
