package constrain

import (
	"fmt"
	"strconv"
	"strings"
)

type schemaKind uint8

const (
	kindAny       schemaKind = iota + 1 // any JSON value
	kindAnyObject                       // any JSON object
	kindObject                          // declared properties only
	kindArray
	kindString
	kindNumber
	kindInteger
	kindBool
	kindNull
	kindEnum // one of listed values (enum, const)
	kindAnyOf
	kindRef
)

// schema is one schema object of the strict subset, checked and resolved.
type schema struct {
	kind  schemaKind
	path  string
	props []property // kindObject, in the schema's order
	items *schema    // kindArray; nil: any value
	enum  [][]byte   // kindEnum: the canonical JSON of each value
	alts  []*schema  // kindAnyOf
	ref   *schema    // kindRef: the target, once resolved
}

type property struct {
	name     string
	s        *schema
	required bool
}

// Schema returns the element for a JSON value valid under a JSON schema in
// OpenAI's strict subset: type (object, array, string, number, integer,
// boolean, null, or a list of them), properties, required,
// additionalProperties (false or true: only declared properties are
// generated either way), items, enum, const, anyOf, $ref (to "#" or inside
// the document: $defs, definitions) and $defs; title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly and writeOnly are
// ignored. Any other keyword is refused with an *Error naming it and its
// path ("properties.x.pattern"), as is a document that is not JSON, a $ref
// that does not resolve or a schema past a limit (MaxSchemaBytes,
// MaxSchemaDepth, MaxProperties, MaxEnumValues, MaxEnumBytes).
//
// Properties come out in the order the schema lists them, each optional one
// (not in required) possibly left out; whitespace between JSON tokens is
// one space or a newline and up to MaxIndent spaces or tabs, also before the value; enum and const
// values are written in their compact JSON spelling.
func Schema(schemaJSON []byte) (Element, error) {
	if len(schemaJSON) > MaxSchemaBytes {
		return Element{}, &Error{Msg: fmt.Sprintf("the schema is %d bytes, more than the %d allowed", len(schemaJSON), MaxSchemaBytes)}
	}
	v, err := parseJSON(schemaJSON)
	if err != nil {
		return Element{}, &Error{Msg: "the schema is " + err.Error()}
	}
	c := &schemaCompiler{root: v, done: map[*value]*schema{}}
	s, err := c.parse(v, "")
	if err != nil {
		return Element{}, err
	}
	if err := c.resolve(); err != nil {
		return Element{}, err
	}
	return Element{kind: elemSchema, schema: s}, nil
}

type schemaCompiler struct {
	root      *value
	done      map[*value]*schema
	refs      []*pendingRef
	props     int
	enumVals  int
	enumBytes int
}

type pendingRef struct {
	s    *schema
	ref  string
	path string
}

// ignored are annotation keywords: they do not constrain the value.
var ignored = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true,
	"$schema": true, "$id": true, "$comment": true, "deprecated": true,
	"readOnly": true, "writeOnly": true,
}

// known are the keywords of the subset.
var known = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "anyOf": true, "$ref": true,
	"$defs": true, "definitions": true,
}

const subset = "the strict subset supports type, properties, required, additionalProperties, items, enum, const, anyOf, $ref and $defs"

func (c *schemaCompiler) parse(v *value, path string) (*schema, error) {
	if s, ok := c.done[v]; ok {
		return s, nil
	}
	s := &schema{path: path}
	c.done[v] = s
	switch v.kind {
	case 'b':
		if !v.boolean {
			return nil, &Error{Path: path, Msg: "the schema false admits no value"}
		}
		s.kind = kindAny
		return s, nil
	case 'o':
	default:
		return nil, &Error{Path: path, Msg: "a schema must be an object (or true), not " + v.kindName()}
	}
	for _, k := range v.keys {
		if !known[k] && !ignored[k] {
			return nil, &Error{Path: joinPath(path, k), Msg: fmt.Sprintf("keyword %q is not supported (%s)", k, subset)}
		}
	}
	for _, defs := range []string{"$defs", "definitions"} {
		d := v.member(defs)
		if d == nil {
			continue
		}
		if d.kind != 'o' {
			return nil, &Error{Path: joinPath(path, defs), Msg: "must be an object of schemas"}
		}
		for i, name := range d.keys {
			if _, err := c.parse(d.vals[i], joinPath(joinPath(path, defs), name)); err != nil {
				return nil, err
			}
		}
	}
	has := func(k string) bool { return v.member(k) != nil }
	constraining := func(except ...string) string {
		for _, k := range v.keys {
			if known[k] && k != "$defs" && k != "definitions" && !contains(except, k) {
				return k
			}
		}
		return ""
	}
	switch {
	case has("$ref"):
		if k := constraining("$ref"); k != "" {
			return nil, &Error{Path: joinPath(path, k), Msg: "keywords beside $ref are not supported: put them in the referenced schema"}
		}
		r := v.member("$ref")
		if r.kind != 's' {
			return nil, &Error{Path: joinPath(path, "$ref"), Msg: "must be a string"}
		}
		s.kind = kindRef
		c.refs = append(c.refs, &pendingRef{s: s, ref: r.str, path: joinPath(path, "$ref")})
		return s, nil
	case has("anyOf"):
		if k := constraining("anyOf"); k != "" {
			return nil, &Error{Path: joinPath(path, k), Msg: "keywords beside anyOf are not supported: put them in each alternative"}
		}
		a := v.member("anyOf")
		if a.kind != 'a' || len(a.vals) == 0 {
			return nil, &Error{Path: joinPath(path, "anyOf"), Msg: "must be a non-empty array of schemas"}
		}
		s.kind = kindAnyOf
		for i, e := range a.vals {
			alt, err := c.parse(e, fmt.Sprintf("%s[%d]", joinPath(path, "anyOf"), i))
			if err != nil {
				return nil, err
			}
			s.alts = append(s.alts, alt)
		}
		return s, nil
	case has("enum") || has("const"):
		if has("enum") && has("const") {
			return nil, &Error{Path: joinPath(path, "const"), Msg: "enum and const together are not supported"}
		}
		s.kind = kindEnum
		var vals []*value
		if e := v.member("enum"); e != nil {
			if e.kind != 'a' || len(e.vals) == 0 {
				return nil, &Error{Path: joinPath(path, "enum"), Msg: "must be a non-empty array"}
			}
			vals = e.vals
		} else {
			vals = []*value{v.member("const")}
		}
		key := "enum"
		if has("const") {
			key = "const"
		}
		if c.enumVals+len(vals) > MaxEnumValues {
			return nil, &Error{Path: joinPath(path, key), Msg: fmt.Sprintf("more than %d enum and const values in the schema", MaxEnumValues)}
		}
		c.enumVals += len(vals)
		for _, e := range vals {
			b := e.canonical(nil)
			c.enumBytes += len(b)
			if c.enumBytes > MaxEnumBytes {
				return nil, &Error{Path: joinPath(path, key), Msg: fmt.Sprintf("the enum and const values spell more than %d bytes in total", MaxEnumBytes)}
			}
			s.enum = append(s.enum, b)
		}
		return s, s.checkEnumType(v)
	}
	t := v.member("type")
	if t == nil {
		switch {
		case has("properties") || has("required") || has("additionalProperties"):
			return s, c.object(s, v, path)
		case has("items"):
			return s, c.array(s, v, path)
		}
		s.kind = kindAny
		return s, nil
	}
	if t.kind == 'a' {
		if len(t.vals) == 0 {
			return nil, &Error{Path: joinPath(path, "type"), Msg: "must name at least one type"}
		}
		s.kind = kindAnyOf
		for i, e := range t.vals {
			if e.kind != 's' {
				return nil, &Error{Path: fmt.Sprintf("%s[%d]", joinPath(path, "type"), i), Msg: "must be a type name"}
			}
			alt := &schema{path: path}
			if err := c.typed(alt, v, e.str, fmt.Sprintf("%s[%d]", joinPath(path, "type"), i)); err != nil {
				return nil, err
			}
			s.alts = append(s.alts, alt)
		}
		return s, nil
	}
	if t.kind != 's' {
		return nil, &Error{Path: joinPath(path, "type"), Msg: "must be a type name or a list of them"}
	}
	return s, c.typed(s, v, t.str, joinPath(path, "type"))
}

// checkEnumType refuses an enum value that its schema's type excludes.
func (s *schema) checkEnumType(v *value) error {
	t := v.member("type")
	if t == nil {
		return nil
	}
	var types []string
	switch t.kind {
	case 's':
		types = []string{t.str}
	case 'a':
		for _, e := range t.vals {
			types = append(types, e.str)
		}
	}
	vals := []*value{v.member("const")}
	key := "const"
	if e := v.member("enum"); e != nil {
		vals, key = e.vals, "enum"
	}
	for i, e := range vals {
		ok := false
		for _, tn := range types {
			switch tn {
			case "object":
				ok = ok || e.kind == 'o'
			case "array":
				ok = ok || e.kind == 'a'
			case "string":
				ok = ok || e.kind == 's'
			case "number":
				ok = ok || e.kind == 'n'
			case "integer":
				ok = ok || (e.kind == 'n' && !strings.ContainsAny(e.num, ".eE"))
			case "boolean":
				ok = ok || e.kind == 'b'
			case "null":
				ok = ok || e.kind == 'z'
			}
		}
		if !ok {
			p := joinPath(s.path, key)
			if key == "enum" {
				p = fmt.Sprintf("%s[%d]", p, i)
			}
			return &Error{Path: p, Msg: fmt.Sprintf("%s is not of the schema's type", e.kindName())}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// typed fills s as the schema v restricted to one type name.
func (c *schemaCompiler) typed(s *schema, v *value, name, typePath string) error {
	switch name {
	case "object":
		return c.object(s, v, s.path)
	case "array":
		return c.array(s, v, s.path)
	case "string":
		s.kind = kindString
	case "number":
		s.kind = kindNumber
	case "integer":
		s.kind = kindInteger
	case "boolean":
		s.kind = kindBool
	case "null":
		s.kind = kindNull
	default:
		return &Error{Path: typePath, Msg: fmt.Sprintf("unknown type %q (want object, array, string, number, integer, boolean or null)", name)}
	}
	return nil
}

func (c *schemaCompiler) object(s *schema, v *value, path string) error {
	s.kind = kindObject
	props := v.member("properties")
	if props != nil && props.kind != 'o' {
		return &Error{Path: joinPath(path, "properties"), Msg: "must be an object of schemas"}
	}
	if ap := v.member("additionalProperties"); ap != nil {
		if ap.kind != 'b' {
			return &Error{Path: joinPath(path, "additionalProperties"), Msg: "only false or true is supported (the strict subset wants false)"}
		}
		if ap.boolean && props == nil {
			s.kind = kindAnyObject
		}
	} else if props == nil {
		s.kind = kindAnyObject
	}
	required := map[string]bool{}
	if r := v.member("required"); r != nil {
		if r.kind != 'a' {
			return &Error{Path: joinPath(path, "required"), Msg: "must be an array of property names"}
		}
		for i, e := range r.vals {
			if e.kind != 's' || props == nil || props.member(e.str) == nil {
				return &Error{Path: fmt.Sprintf("%s[%d]", joinPath(path, "required"), i), Msg: "must name a property listed in properties"}
			}
			required[e.str] = true
		}
	}
	if props == nil {
		return nil
	}
	c.props += len(props.keys)
	if c.props > MaxProperties {
		return &Error{Path: joinPath(path, "properties"), Msg: fmt.Sprintf("more than %d properties in the schema", MaxProperties)}
	}
	seen := map[string]bool{}
	for i, name := range props.keys {
		if seen[name] {
			return &Error{Path: joinPath(joinPath(path, "properties"), name), Msg: "property listed twice"}
		}
		seen[name] = true
		ps, err := c.parse(props.vals[i], joinPath(joinPath(path, "properties"), name))
		if err != nil {
			return err
		}
		s.props = append(s.props, property{name: name, s: ps, required: required[name]})
	}
	return nil
}

func (c *schemaCompiler) array(s *schema, v *value, path string) error {
	s.kind = kindArray
	if it := v.member("items"); it != nil {
		if it.kind == 'a' {
			return &Error{Path: joinPath(path, "items"), Msg: "tuple items (an array) are not supported: give one schema"}
		}
		is, err := c.parse(it, joinPath(path, "items"))
		if err != nil {
			return err
		}
		s.items = is
	}
	return nil
}

// resolve points every $ref at its target (a JSON pointer into the
// document), parsing targets not parsed yet.
func (c *schemaCompiler) resolve() error {
	for len(c.refs) > 0 {
		r := c.refs[0]
		c.refs = c.refs[1:]
		if !strings.HasPrefix(r.ref, "#") {
			return &Error{Path: r.path, Msg: fmt.Sprintf("%q: only references inside the schema (#/$defs/...) are supported", r.ref)}
		}
		target := c.root
		tpath := ""
		ptr := r.ref[1:]
		if ptr != "" {
			if !strings.HasPrefix(ptr, "/") {
				return &Error{Path: r.path, Msg: fmt.Sprintf("%q is not a JSON pointer (#/$defs/name)", r.ref)}
			}
			for _, tok := range strings.Split(ptr[1:], "/") {
				tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
				var next *value
				switch target.kind {
				case 'o':
					next = target.member(tok)
				case 'a':
					if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(target.vals) {
						next = target.vals[i]
					}
				}
				if next == nil {
					return &Error{Path: r.path, Msg: fmt.Sprintf("%q does not resolve: no %q", r.ref, tok)}
				}
				target, tpath = next, joinPath(tpath, tok)
			}
		}
		t, err := c.parse(target, tpath)
		if err != nil {
			return err
		}
		r.s.ref = t
	}
	return nil
}
