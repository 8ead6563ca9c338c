package constrain

import "fmt"

// schemaRule returns the rule of a JSON value under s, building it once.
// Leading whitespace is the caller's (element adds it).
func (b *builder) schemaRule(s *schema) (int32, error) {
	s, err := s.target()
	if err != nil {
		return 0, err
	}
	if r, ok := b.rules[s]; ok {
		return r, nil
	}
	switch s.kind {
	case kindAny:
		return b.sharedRule("any", b.anyValue), b.err
	case kindAnyObject:
		return b.sharedRule("anyobject", b.anyObject), b.err
	case kindString:
		return b.sharedRule("string", b.stringBody), b.err
	case kindNumber:
		return b.sharedRule("number", func(st, end int32) { b.number(st, end, true) }), b.err
	case kindInteger:
		return b.sharedRule("integer", func(st, end int32) { b.number(st, end, false) }), b.err
	case kindBool:
		return b.sharedRule("boolean", func(st, end int32) {
			b.eps(b.literal(st, "true"), end)
			b.eps(b.literal(st, "false"), end)
		}), b.err
	case kindNull:
		return b.sharedRule("null", func(st, end int32) { b.eps(b.literal(st, "null"), end) }), b.err
	}
	r := b.newRule(s.path)
	b.rules[s] = r
	st, end := b.rule(r).start, b.rule(r).end
	switch s.kind {
	case kindEnum:
		b.enum(st, end, s.enum)
	case kindAnyOf:
		for _, a := range s.alts {
			ar, err := b.schemaRule(a)
			if err != nil {
				return 0, err
			}
			b.call(st, ar, end)
		}
	case kindArray:
		item := int32(-1)
		if s.items != nil {
			var err error
			if item, err = b.schemaRule(s.items); err != nil {
				return 0, err
			}
		} else {
			item = b.sharedRule("any", b.anyValue)
		}
		b.array(st, end, item)
	case kindObject:
		if err := b.object(st, end, s); err != nil {
			return 0, err
		}
	}
	return r, b.err
}

// target follows a chain of references to the schema they name; a chain
// that loops never reaches one.
func (s *schema) target() (*schema, error) {
	seen := map[*schema]bool{}
	for s.kind == kindRef {
		if seen[s] || s.ref == nil {
			return nil, &Error{Path: joinPath(s.path, "$ref"), Msg: "$ref cycle: the references never reach a schema"}
		}
		seen[s] = true
		s = s.ref
	}
	return s, nil
}

// sharedRule returns the rule named name, building it with body the first
// time.
func (b *builder) sharedRule(name string, body func(start, end int32)) int32 {
	if r, ok := b.shared[name]; ok {
		return r
	}
	if b.shared == nil {
		b.shared = map[string]int32{}
	}
	r := b.newRule("")
	b.shared[name] = r
	body(b.rule(r).start, b.rule(r).end)
	return r
}

// ws adds optional whitespace (a call to the shared whitespace rule) after
// from and returns the node after it. Whitespace is one space, or a newline
// and up to MaxIndent spaces or tabs: enough for compact and for
// pretty-printed JSON, never a run of blank lines a model could loop on.
func (b *builder) ws(from int32) int32 {
	r := b.sharedRule("ws", func(st, end int32) {
		b.eps(st, end)
		b.byteRange(st, ' ', ' ', end)
		n := b.newNode()
		b.byteRange(st, '\n', '\n', n)
		b.eps(n, end)
		for i := 0; i < MaxIndent; i++ {
			next := b.newNode()
			b.byteRange(n, ' ', ' ', next)
			b.byteRange(n, '\t', '\t', next)
			b.eps(next, end)
			n = next
		}
	})
	to := b.newNode()
	b.call(from, r, to)
	return to
}

// value adds optional whitespace and a JSON value under s after from.
func (b *builder) value(from int32, s *schema) (int32, error) {
	r, err := b.schemaRule(s)
	if err != nil {
		return 0, err
	}
	to := b.newNode()
	b.call(from, r, to)
	return to, b.err
}

// stringBody builds a JSON string: valid UTF-8, no raw control characters,
// the escapes JSON defines.
func (b *builder) stringBody(st, end int32) {
	body, esc := b.newNode(), b.newNode()
	b.byteRange(st, '"', '"', body)
	b.byteRange(body, '"', '"', end)
	b.byteRange(body, 0x20, 0x21, body)
	b.byteRange(body, 0x23, 0x5B, body)
	b.byteRange(body, 0x5D, 0x7F, body)
	b.byteRange(body, '\\', '\\', esc)
	for _, c := range []byte(`"\/bfnrt`) {
		b.byteRange(esc, c, c, body)
	}
	h := b.newNode()
	b.byteRange(esc, 'u', 'u', h)
	for i := 0; i < 4; i++ {
		next := body
		if i < 3 {
			next = b.newNode()
		}
		b.byteRange(h, '0', '9', next)
		b.byteRange(h, 'a', 'f', next)
		b.byteRange(h, 'A', 'F', next)
		h = next
	}
	// UTF-8: cont[k] needs k more continuation bytes.
	c1, c2, c3 := b.newNode(), b.newNode(), b.newNode()
	b.byteRange(c1, 0x80, 0xBF, body)
	b.byteRange(c2, 0x80, 0xBF, c1)
	b.byteRange(c3, 0x80, 0xBF, c2)
	b.byteRange(body, 0xC2, 0xDF, c1)
	e0, ed, f0, f4 := b.newNode(), b.newNode(), b.newNode(), b.newNode()
	b.byteRange(body, 0xE0, 0xE0, e0)
	b.byteRange(e0, 0xA0, 0xBF, c1)
	b.byteRange(body, 0xE1, 0xEC, c2)
	b.byteRange(body, 0xEE, 0xEF, c2)
	b.byteRange(body, 0xED, 0xED, ed)
	b.byteRange(ed, 0x80, 0x9F, c1)
	b.byteRange(body, 0xF0, 0xF0, f0)
	b.byteRange(f0, 0x90, 0xBF, c2)
	b.byteRange(body, 0xF1, 0xF3, c3)
	b.byteRange(body, 0xF4, 0xF4, f4)
	b.byteRange(f4, 0x80, 0x8F, c2)
}

// digits adds 1..max digits after from, each count reaching to.
func (b *builder) digits(from int32, first byte, max int, to int32) {
	n := b.newNode()
	b.byteRange(from, first, '9', n)
	b.eps(n, to)
	for i := 1; i < max; i++ {
		next := b.newNode()
		b.byteRange(n, '0', '9', next)
		b.eps(next, to)
		n = next
	}
}

// number builds a JSON number (an integer when !real), its parts bounded by
// MaxIntDigits, MaxFracDigits and MaxExpDigits.
func (b *builder) number(st, end int32, real bool) {
	sign, in := b.newNode(), b.newNode()
	b.byteRange(st, '-', '-', sign)
	b.eps(st, sign)
	b.byteRange(sign, '0', '0', in)
	b.digits(sign, '1', MaxIntDigits, in)
	b.eps(in, end)
	if !real {
		return
	}
	dot, frac := b.newNode(), b.newNode()
	b.byteRange(in, '.', '.', dot)
	b.digits(dot, '0', MaxFracDigits, frac)
	b.eps(frac, end)
	e, es := b.newNode(), b.newNode()
	b.byteRange(in, 'e', 'e', e)
	b.byteRange(in, 'E', 'E', e)
	b.byteRange(frac, 'e', 'e', e)
	b.byteRange(frac, 'E', 'E', e)
	b.byteRange(e, '+', '+', es)
	b.byteRange(e, '-', '-', es)
	b.eps(e, es)
	b.digits(es, '0', MaxExpDigits, end)
}

// enum builds a trie of the values' canonical spellings.
func (b *builder) enum(st, end int32, vals [][]byte) {
	type key struct {
		n int32
		c byte
	}
	next := map[key]int32{}
	for _, v := range vals {
		n := st
		for _, c := range v {
			k := key{n, c}
			m, ok := next[k]
			if !ok {
				m = b.newNode()
				b.byteRange(n, c, c, m)
				next[k] = m
			}
			n = m
		}
		b.eps(n, end)
	}
}

// array builds '[' ws (item ws (',' ws item ws)*)? ']'.
func (b *builder) array(st, end, item int32) {
	open := b.newNode()
	b.byteRange(st, '[', '[', open)
	first := b.ws(open)
	b.byteRange(first, ']', ']', end)
	after := b.newNode()
	b.call(first, item, after)
	sep := b.ws(after)
	b.byteRange(sep, ']', ']', end)
	comma := b.newNode()
	b.byteRange(sep, ',', ',', comma)
	b.call(b.ws(comma), item, after)
}

// object builds '{' then the properties in order (an optional one may be
// left out), separated by commas, then '}'.
func (b *builder) object(st, end int32, s *schema) error {
	open := b.newNode()
	b.byteRange(st, '{', '{', open)
	// at[f]: before the next property; f = 1 once one has been written.
	at := [2]int32{b.ws(open), b.newNode()}
	for _, p := range s.props {
		next := [2]int32{b.newNode(), b.newNode()}
		// The first property written, or a comma after an earlier one,
		// leads to one key: either way a property has been written after.
		key := b.newNode()
		b.eps(at[0], key)
		comma := b.newNode()
		b.byteRange(at[1], ',', ',', comma)
		b.eps(b.ws(comma), key)
		k := b.ws(b.literal(key, string(appendString(nil, p.name))))
		colon := b.newNode()
		b.byteRange(k, ':', ':', colon)
		v, err := b.value(b.ws(colon), p.s)
		if err != nil {
			return err
		}
		b.eps(b.ws(v), next[1])
		if !p.required {
			b.eps(at[0], next[0])
			b.eps(at[1], next[1])
		}
		at = next
	}
	b.byteRange(at[0], '}', '}', end)
	b.byteRange(at[1], '}', '}', end)
	return b.err
}

// anyValue builds any JSON value.
func (b *builder) anyValue(st, end int32) {
	for _, name := range []string{"anyobject", "anyarray", "string", "number"} {
		var r int32
		switch name {
		case "anyobject":
			r = b.sharedRule(name, b.anyObject)
		case "anyarray":
			r = b.sharedRule(name, func(st, end int32) { b.array(st, end, b.shared["any"]) })
		case "string":
			r = b.sharedRule(name, b.stringBody)
		case "number":
			r = b.sharedRule(name, func(st, end int32) { b.number(st, end, true) })
		}
		b.call(st, r, end)
	}
	for _, lit := range []string{"true", "false", "null"} {
		b.eps(b.literal(st, lit), end)
	}
}

// anyObject builds any JSON object.
func (b *builder) anyObject(st, end int32) {
	any := b.sharedRule("any", b.anyValue)
	str := b.sharedRule("string", b.stringBody)
	open := b.newNode()
	b.byteRange(st, '{', '{', open)
	first := b.ws(open)
	b.byteRange(first, '}', '}', end)
	key := b.newNode()
	b.call(first, str, key)
	colon := b.newNode()
	b.byteRange(b.ws(key), ':', ':', colon)
	after := b.newNode()
	b.call(b.ws(colon), any, after)
	sep := b.ws(after)
	b.byteRange(sep, '}', '}', end)
	comma := b.newNode()
	b.byteRange(sep, ',', ',', comma)
	b.call(b.ws(comma), str, key)
}

// check refuses a grammar whose matching could not be bounded or could get
// stuck, and trims it so that every state it can reach can complete:
//   - a rule that can reach a call to itself without consuming a byte
//     (left recursion: a $ref cycle through anyOf alone) is refused;
//   - calls to rules that cannot complete (no finite value: a $ref cycle
//     through required properties) are removed, and the grammar is refused
//     if the root cannot complete without them;
//   - edges into states that cannot reach their rule's end are removed.
func (b *builder) check() error {
	if b.err != nil {
		return b.err
	}
	nr := len(b.ruleList)
	// reaches reports whether rule r's start reaches its end using the
	// edges pass allows.
	reaches := func(r int, pass func(e edge) bool) bool {
		seen := map[int32]bool{b.ruleList[r].start: true}
		stack := []int32{b.ruleList[r].start}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n == b.ruleList[r].end {
				return true
			}
			for _, e := range b.nodes[n].edges {
				if pass(e) && !seen[e.to] {
					seen[e.to] = true
					stack = append(stack, e.to)
				}
			}
		}
		return false
	}
	fixpoint := func(pass func(flags []bool) func(e edge) bool) []bool {
		flags := make([]bool, nr)
		for changed := true; changed; {
			changed = false
			// Callees are built after their callers: from the last rule
			// back, a tree of schemas settles in one pass.
			for r := nr - 1; r >= 0; r-- {
				if !flags[r] && reaches(r, pass(flags)) {
					flags[r], changed = true, true
				}
			}
		}
		return flags
	}
	nullable := fixpoint(func(f []bool) func(edge) bool {
		return func(e edge) bool { return e.kind == edgeEps || (e.kind == edgeCall && f[e.arg]) }
	})
	// Left recursion: calls reachable from a rule's start without consuming.
	first := make([][]int32, nr)
	for r := range b.ruleList {
		seen := map[int32]bool{b.ruleList[r].start: true}
		stack := []int32{b.ruleList[r].start}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, e := range b.nodes[n].edges {
				if e.kind == edgeCall {
					first[r] = append(first[r], e.arg)
				}
				if (e.kind == edgeEps || (e.kind == edgeCall && nullable[e.arg])) && !seen[e.to] {
					seen[e.to] = true
					stack = append(stack, e.to)
				}
			}
		}
	}
	state := make([]uint8, nr) // 0 new, 1 on the path, 2 done
	var visit func(r int32) error
	visit = func(r int32) error {
		state[r] = 1
		for _, c := range first[r] {
			switch state[c] {
			case 1:
				return &Error{Path: b.ruleList[c].path, Msg: "$ref cycle: the schema refers to itself before any text is written"}
			case 0:
				if err := visit(c); err != nil {
					return err
				}
			}
		}
		state[r] = 2
		return nil
	}
	for r := range b.ruleList {
		if state[r] == 0 {
			if err := visit(int32(r)); err != nil {
				return err
			}
		}
	}
	productive := fixpoint(func(f []bool) func(edge) bool {
		return func(e edge) bool { return e.kind != edgeCall || f[e.arg] }
	})
	if !productive[0] {
		path := ""
		for r := range productive {
			if !productive[r] && b.ruleList[r].path != "" {
				path = b.ruleList[r].path
				break
			}
		}
		return &Error{Path: path, Msg: "$ref cycle: no finite JSON value satisfies the schema (a required property or item refers back to it)"}
	}
	// Trim: drop calls to unproductive rules, then edges into nodes that
	// cannot reach their rule's end.
	live := make([]bool, len(b.nodes))
	rev := make([][]int32, len(b.nodes))
	for n := range b.nodes {
		for _, e := range b.nodes[n].edges {
			if e.kind != edgeCall || productive[e.arg] {
				rev[e.to] = append(rev[e.to], int32(n))
			}
		}
	}
	var queue []int32
	for r := range b.ruleList {
		live[b.ruleList[r].end] = true
		queue = append(queue, b.ruleList[r].end)
	}
	for len(queue) > 0 {
		n := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, m := range rev[n] {
			if !live[m] {
				live[m] = true
				queue = append(queue, m)
			}
		}
	}
	for n := range b.nodes {
		kept := b.nodes[n].edges[:0]
		for _, e := range b.nodes[n].edges {
			if live[e.to] && (e.kind != edgeCall || productive[e.arg]) {
				kept = append(kept, e)
			}
		}
		b.nodes[n].edges = kept
	}
	if len(b.nodes) > MaxNodes {
		return &Error{Msg: fmt.Sprintf("the grammar needs more than %d states", MaxNodes)}
	}
	return nil
}
