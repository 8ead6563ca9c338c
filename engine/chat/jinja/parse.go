package jinja

import (
	"math"
	"strconv"
	"strings"
)

// --- the syntax tree ---

type node interface{ nodeLine() int }

type expr interface{ exprLine() int }

type pos struct{ line int }

func (p pos) nodeLine() int { return p.line }
func (p pos) exprLine() int { return p.line }

type (
	textNode struct {
		pos
		s string
	}
	outputNode struct {
		pos
		x expr
	}
	ifNode struct {
		pos
		conds  []expr
		bodies [][]node
		orelse []node
	}
	forNode struct {
		pos
		target target
		iter   expr
		cond   expr // the loop filter "for x in y if cond", or nil
		body   []node
		orelse []node
	}
	setNode struct {
		pos
		target target
		x      expr
	}
	setBlockNode struct {
		pos
		target  target
		body    []node
		filters []*filterExpr // applied in order; input nil
	}
	macroNode struct {
		pos
		m *macroDef
	}
	callBlockNode struct {
		pos
		call   *callExpr
		caller *macroDef
	}
	filterBlockNode struct {
		pos
		body    []node
		filters []*filterExpr
	}
	withNode struct {
		pos
		targets []target
		values  []expr
		body    []node
	}
	breakNode    struct{ pos }
	continueNode struct{ pos }
)

type macroDef struct {
	name     string
	params   []string
	defaults []expr // per param, nil when required
	body     []node
	line     int
}

// target is an assignment target: a name, ns.attr, or a tuple of names.
type target struct {
	names []string // one name, or the names of a tuple
	tuple bool
	attr  string // for ns.attr: names[0] is the namespace, attr the attribute
}

type (
	constExpr struct {
		pos
		v Value
	}
	nameExpr struct {
		pos
		name string
	}
	listExpr struct {
		pos
		items []expr
		tuple bool
	}
	dictExpr struct {
		pos
		keys, vals []expr
	}
	attrExpr struct {
		pos
		x    expr
		name string
	}
	itemExpr struct {
		pos
		x, index expr
	}
	sliceExpr struct {
		pos
		x, lo, hi, step expr // nil when omitted
	}
	callExpr struct {
		pos
		fn     expr
		args   []expr
		kwargs []kwarg
	}
	filterExpr struct {
		pos
		x      expr // nil inside {% filter %} and {% set %} blocks
		name   string
		args   []expr
		kwargs []kwarg
	}
	testExpr struct {
		pos
		x      expr
		name   string
		args   []expr
		kwargs []kwarg
		negate bool
	}
	binExpr struct {
		pos
		op   string
		l, r expr
	}
	unaryExpr struct {
		pos
		op string // "-", "+", "not"
		x  expr
	}
	logicExpr struct {
		pos
		and  bool
		l, r expr
	}
	compareExpr struct {
		pos
		first expr
		ops   []string // "==", "!=", "<", ">", "<=", ">=", "in", "notin"
		rest  []expr
	}
	condExpr struct {
		pos
		cond, a, b expr // b nil: undefined when cond is false
	}
	concatExpr struct {
		pos
		parts []expr
	}
)

type kwarg struct {
	name string
	x    expr
}

// --- the parser ---

type parser struct {
	toks  []token
	i     int
	depth int
	max   int
}

const maxNesting = 100

func parse(toks []token) ([]node, error) {
	p := &parser{toks: toks, max: maxNesting}
	body, end, err := p.body()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, errorf(p.line(), "unexpected '%s'", end)
	}
	return body, nil
}

func (p *parser) cur() token {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	line := 1
	if len(p.toks) > 0 {
		line = p.toks[len(p.toks)-1].line
	}
	return token{kind: tEOF, line: line}
}

func (p *parser) peek(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return token{kind: tEOF, line: p.cur().line}
}

func (p *parser) line() int { return p.cur().line }

func (p *parser) next() token {
	t := p.cur()
	if p.i < len(p.toks) {
		p.i++
	}
	return t
}

func (p *parser) isOp(op string) bool {
	t := p.cur()
	return t.kind == tOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.cur()
	return t.kind == tName && t.val == name
}

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		return errorf(p.line(), "expected '%s', got %s", op, describe(p.cur()))
	}
	p.next()
	return nil
}

func (p *parser) expectName() (string, error) {
	t := p.cur()
	if t.kind != tName {
		return "", errorf(t.line, "expected a name, got %s", describe(t))
	}
	p.next()
	return t.val, nil
}

func (p *parser) expectBlockEnd() error {
	if p.cur().kind != tBlockEnd {
		return errorf(p.line(), "expected end of statement block, got %s", describe(p.cur()))
	}
	p.next()
	return nil
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tData:
		return "template data"
	case tVarBegin:
		return "'{{'"
	case tVarEnd:
		return "'}}'"
	case tBlockBegin:
		return "'{%'"
	case tBlockEnd:
		return "end of statement block"
	case tString:
		return "string " + strconv.Quote(truncateStr(t.val, 20))
	}
	return "'" + truncateStr(t.val, 20) + "'"
}

func truncateStr(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.max {
		return errorf(p.line(), "template nested too deeply (more than %d levels)", p.max)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// body parses nodes up to an end tag; it returns the end tag's name
// ("endif", "else", …) with the parser just after the tag name, or "" at EOF.
func (p *parser) body() ([]node, string, error) {
	if err := p.enter(); err != nil {
		return nil, "", err
	}
	defer p.leave()
	var out []node
	for {
		t := p.cur()
		switch t.kind {
		case tEOF:
			return out, "", nil
		case tData:
			p.next()
			out = append(out, &textNode{pos{t.line}, t.val})
		case tVarBegin:
			p.next()
			x, err := p.tupleExpr(false)
			if err != nil {
				return nil, "", err
			}
			if p.cur().kind != tVarEnd {
				return nil, "", errorf(p.line(), "expected end of print statement, got %s", describe(p.cur()))
			}
			p.next()
			out = append(out, &outputNode{pos{t.line}, x})
		case tBlockBegin:
			p.next()
			name := p.cur()
			if name.kind != tName {
				return nil, "", errorf(name.line, "expected a statement name, got %s", describe(name))
			}
			switch name.val {
			case "endif", "else", "elif", "endfor", "endmacro", "endset", "endfilter", "endwith", "endcall", "endgeneration":
				p.next()
				return out, name.val, nil
			}
			n, err := p.statement()
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				out = append(out, n...)
			}
		default:
			return nil, "", errorf(t.line, "unexpected %s", describe(t))
		}
	}
}

// endBody parses a body that must end with one of the tags in ends.
func (p *parser) endBody(start int, ends ...string) ([]node, string, error) {
	body, end, err := p.body()
	if err != nil {
		return nil, "", err
	}
	for _, e := range ends {
		if end == e {
			return body, end, nil
		}
	}
	if end == "" {
		return nil, "", errorf(p.line(), "unexpected end of template: the block opened on line %d needs '%s'", start, strings.Join(ends, "' or '"))
	}
	return nil, "", errorf(p.line(), "unexpected '%s' (expected '%s')", end, strings.Join(ends, "' or '"))
}

func (p *parser) statement() ([]node, error) {
	t := p.next()
	line := t.line
	switch t.val {
	case "if":
		n, err := p.ifStmt(line)
		return []node{n}, err
	case "for":
		n, err := p.forStmt(line)
		return []node{n}, err
	case "set":
		n, err := p.setStmt(line)
		return []node{n}, err
	case "macro":
		n, err := p.macroStmt(line)
		return []node{n}, err
	case "call":
		n, err := p.callStmt(line)
		return []node{n}, err
	case "filter":
		filters, err := p.filterChain(nil)
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, _, err := p.endBody(line, "endfilter")
		if err != nil {
			return nil, err
		}
		return []node{&filterBlockNode{pos{line}, body, filters}}, p.expectBlockEnd()
	case "with":
		n, err := p.withStmt(line)
		return []node{n}, err
	case "generation":
		// transformers' AssistantTracker: the body renders as is.
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, _, err := p.endBody(line, "endgeneration")
		if err != nil {
			return nil, err
		}
		return body, p.expectBlockEnd()
	case "break":
		return []node{&breakNode{pos{line}}}, p.expectBlockEnd()
	case "continue":
		return []node{&continueNode{pos{line}}}, p.expectBlockEnd()
	case "include", "import", "from", "extends", "block", "do", "autoescape", "trans":
		return nil, errorf(line, "the '%s' statement is not supported in chat templates", t.val)
	}
	return nil, errorf(line, "unknown statement '%s'", t.val)
}

func (p *parser) ifStmt(line int) (node, error) {
	n := &ifNode{pos: pos{line}}
	for {
		c, err := p.tupleExpr(false)
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, end, err := p.endBody(line, "elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, c)
		n.bodies = append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.expectBlockEnd(); err != nil {
				return nil, err
			}
			body, _, err := p.endBody(line, "endif")
			if err != nil {
				return nil, err
			}
			n.orelse = body
		}
		return n, p.expectBlockEnd()
	}
}

func (p *parser) forStmt(line int) (node, error) {
	tg, err := p.assignTarget(false)
	if err != nil {
		return nil, err
	}
	if !p.isName("in") {
		return nil, errorf(p.line(), "expected 'in', got %s", describe(p.cur()))
	}
	p.next()
	iter, err := p.tupleExpr(true)
	if err != nil {
		return nil, err
	}
	n := &forNode{pos: pos{line}, target: tg, iter: iter}
	if p.isName("if") {
		p.next()
		if n.cond, err = p.expression(false); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, errorf(p.line(), "recursive loops are not supported")
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	body, end, err := p.endBody(line, "endfor", "else")
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		if n.orelse, _, err = p.endBody(line, "endfor"); err != nil {
			return nil, err
		}
	}
	return n, p.expectBlockEnd()
}

// assignTarget parses "name", "a, b" or (with attr) "ns.attr".
func (p *parser) assignTarget(attr bool) (target, error) {
	var tg target
	paren := p.isOp("(")
	if paren {
		p.next()
	}
	for {
		name, err := p.expectName()
		if err != nil {
			return tg, err
		}
		if attr && len(tg.names) == 0 && p.isOp(".") {
			p.next()
			a, err := p.expectName()
			if err != nil {
				return tg, err
			}
			return target{names: []string{name}, attr: a}, nil
		}
		if isReserved(name) {
			return tg, errorf(p.line(), "cannot assign to '%s'", name)
		}
		tg.names = append(tg.names, name)
		if !p.isOp(",") {
			break
		}
		p.next()
		tg.tuple = true
		if p.cur().kind != tName {
			break
		}
	}
	if paren {
		tg.tuple = true
		if err := p.expectOp(")"); err != nil {
			return tg, err
		}
	}
	return tg, nil
}

func isReserved(name string) bool {
	switch name {
	case "true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "else":
		return true
	}
	return false
}

func (p *parser) setStmt(line int) (node, error) {
	tg, err := p.assignTarget(true)
	if err != nil {
		return nil, err
	}
	if p.isOp("=") {
		p.next()
		x, err := p.tupleExpr(false)
		if err != nil {
			return nil, err
		}
		return &setNode{pos{line}, tg, x}, p.expectBlockEnd()
	}
	var filters []*filterExpr
	if p.isOp("|") {
		if filters, err = p.filterChain(nil); err != nil {
			return nil, err
		}
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	body, _, err := p.endBody(line, "endset")
	if err != nil {
		return nil, err
	}
	return &setBlockNode{pos{line}, tg, body, filters}, p.expectBlockEnd()
}

func (p *parser) macroSignature() ([]string, []expr, error) {
	if err := p.expectOp("("); err != nil {
		return nil, nil, err
	}
	var params []string
	var defaults []expr
	for !p.isOp(")") {
		if len(params) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		name, err := p.expectName()
		if err != nil {
			return nil, nil, err
		}
		var def expr
		if p.isOp("=") {
			p.next()
			if def, err = p.expression(true); err != nil {
				return nil, nil, err
			}
		} else if len(defaults) > 0 && defaults[len(defaults)-1] != nil {
			return nil, nil, errorf(p.line(), "non-default argument follows default argument")
		}
		params = append(params, name)
		defaults = append(defaults, def)
	}
	p.next()
	return params, defaults, nil
}

func (p *parser) macroStmt(line int) (node, error) {
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	params, defaults, err := p.macroSignature()
	if err != nil {
		return nil, err
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	body, _, err := p.endBody(line, "endmacro")
	if err != nil {
		return nil, err
	}
	if p.cur().kind == tName {
		p.next() // {% endmacro name %}
	}
	m := &macroDef{name: name, params: params, defaults: defaults, body: body, line: line}
	return &macroNode{pos{line}, m}, p.expectBlockEnd()
}

func (p *parser) callStmt(line int) (node, error) {
	caller := &macroDef{name: "caller", line: line}
	if p.isOp("(") {
		var err error
		if caller.params, caller.defaults, err = p.macroSignature(); err != nil {
			return nil, err
		}
	}
	x, err := p.expression(true)
	if err != nil {
		return nil, err
	}
	call, ok := x.(*callExpr)
	if !ok {
		return nil, errorf(line, "expected a call after 'call'")
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	if caller.body, _, err = p.endBody(line, "endcall"); err != nil {
		return nil, err
	}
	return &callBlockNode{pos{line}, call, caller}, p.expectBlockEnd()
}

func (p *parser) withStmt(line int) (node, error) {
	n := &withNode{pos: pos{line}}
	for p.cur().kind != tBlockEnd {
		if len(n.targets) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		tg, err := p.assignTarget(false)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		x, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, tg)
		n.values = append(n.values, x)
	}
	p.next()
	body, _, err := p.endBody(line, "endwith")
	if err != nil {
		return nil, err
	}
	n.body = body
	return n, p.expectBlockEnd()
}

// --- expressions ---

// tupleExpr parses an expression, or several separated by commas as a
// tuple (as Jinja allows in {{ }}, for … in and set).
func (p *parser) tupleExpr(noCond bool) (expr, error) {
	line := p.line()
	first, err := p.expression(!noCond)
	if err != nil {
		return nil, err
	}
	if !p.isOp(",") {
		return first, nil
	}
	items := []expr{first}
	for p.isOp(",") {
		p.next()
		if !p.startsExpr() {
			break
		}
		x, err := p.expression(!noCond)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
	}
	return &listExpr{pos{line}, items, true}, nil
}

func (p *parser) startsExpr() bool {
	t := p.cur()
	switch t.kind {
	case tName:
		return t.val != "in" && t.val != "if" && t.val != "else" && t.val != "and" && t.val != "or"
	case tString, tInt, tFloat:
		return true
	case tOp:
		return t.val == "(" || t.val == "[" || t.val == "{" || t.val == "-" || t.val == "+"
	}
	return false
}

// expression: a conditional expression ("a if c else b") when withCond.
func (p *parser) expression(withCond bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	line := p.line()
	x, err := p.orExpr()
	if err != nil {
		return nil, err
	}
	for withCond && p.isName("if") {
		p.next()
		c, err := p.orExpr()
		if err != nil {
			return nil, err
		}
		var b expr
		if p.isName("else") {
			p.next()
			if b, err = p.expression(true); err != nil {
				return nil, err
			}
		}
		x = &condExpr{pos{line}, c, x, b}
	}
	return x, nil
}

func (p *parser) orExpr() (expr, error) {
	x, err := p.andExpr()
	if err != nil {
		return nil, err
	}
	for p.isName("or") {
		line := p.next().line
		r, err := p.andExpr()
		if err != nil {
			return nil, err
		}
		x = &logicExpr{pos{line}, false, x, r}
	}
	return x, nil
}

func (p *parser) andExpr() (expr, error) {
	x, err := p.notExpr()
	if err != nil {
		return nil, err
	}
	for p.isName("and") {
		line := p.next().line
		r, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		x = &logicExpr{pos{line}, true, x, r}
	}
	return x, nil
}

func (p *parser) notExpr() (expr, error) {
	if p.isName("not") {
		line := p.next().line
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos{line}, "not", x}, nil
	}
	return p.compareExpr()
}

func (p *parser) compareExpr() (expr, error) {
	line := p.line()
	x, err := p.math1()
	if err != nil {
		return nil, err
	}
	var ops []string
	var rest []expr
	for {
		t := p.cur()
		op := ""
		switch {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">="):
			op = t.val
			p.next()
		case t.kind == tName && t.val == "in":
			op = "in"
			p.next()
		case t.kind == tName && t.val == "not" && p.peek(1).kind == tName && p.peek(1).val == "in":
			op = "notin"
			p.next()
			p.next()
		}
		if op == "" {
			break
		}
		r, err := p.math1()
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
		rest = append(rest, r)
	}
	if len(ops) == 0 {
		return x, nil
	}
	return &compareExpr{pos{line}, x, ops, rest}, nil
}

func (p *parser) math1() (expr, error) {
	x, err := p.concat()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		t := p.next()
		r, err := p.concat()
		if err != nil {
			return nil, err
		}
		x = &binExpr{pos{t.line}, t.val, x, r}
	}
	return x, nil
}

func (p *parser) concat() (expr, error) {
	line := p.line()
	x, err := p.math2()
	if err != nil {
		return nil, err
	}
	if !p.isOp("~") {
		return x, nil
	}
	parts := []expr{x}
	for p.isOp("~") {
		p.next()
		r, err := p.math2()
		if err != nil {
			return nil, err
		}
		parts = append(parts, r)
	}
	return &concatExpr{pos{line}, parts}, nil
}

func (p *parser) math2() (expr, error) {
	x, err := p.pow()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
		t := p.next()
		r, err := p.pow()
		if err != nil {
			return nil, err
		}
		x = &binExpr{pos{t.line}, t.val, x, r}
	}
	return x, nil
}

func (p *parser) pow() (expr, error) {
	x, err := p.unary(true)
	if err != nil {
		return nil, err
	}
	for p.isOp("**") {
		t := p.next()
		r, err := p.unary(true)
		if err != nil {
			return nil, err
		}
		x = &binExpr{pos{t.line}, "**", x, r}
	}
	return x, nil
}

func (p *parser) unary(withFilter bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.cur()
	var x expr
	var err error
	if t.kind == tOp && (t.val == "-" || t.val == "+") {
		p.next()
		inner, err := p.unary(false)
		if err != nil {
			return nil, err
		}
		x = &unaryExpr{pos{t.line}, t.val, inner}
	} else {
		if x, err = p.primary(); err != nil {
			return nil, err
		}
	}
	if x, err = p.postfix(x); err != nil {
		return nil, err
	}
	if withFilter {
		return p.filterTail(x)
	}
	return x, nil
}

func (p *parser) primary() (expr, error) {
	t := p.cur()
	line := t.line
	switch t.kind {
	case tName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{pos{line}, Bool(true)}, nil
		case "false", "False":
			return &constExpr{pos{line}, Bool(false)}, nil
		case "none", "None":
			return &constExpr{pos{line}, None()}, nil
		}
		return &nameExpr{pos{line}, t.val}, nil
	case tString:
		s := p.next().val
		for p.cur().kind == tString {
			s += p.next().val
		}
		return &constExpr{pos{line}, Str(s)}, nil
	case tInt:
		p.next()
		n, err := parseInt(t.val)
		if err != nil {
			return nil, errorf(line, "%v", err)
		}
		return &constExpr{pos{line}, Int(n)}, nil
	case tFloat:
		p.next()
		f, err := strconv.ParseFloat(strings.ReplaceAll(t.val, "_", ""), 64)
		if err != nil && !math.IsInf(f, 0) {
			return nil, errorf(line, "bad float %q", t.val)
		}
		return &constExpr{pos{line}, Float(f)}, nil
	case tOp:
		switch t.val {
		case "(":
			p.next()
			if p.isOp(")") {
				p.next()
				return &listExpr{pos{line}, nil, true}, nil
			}
			x, err := p.expression(true)
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				items := []expr{x}
				for p.isOp(",") {
					p.next()
					if p.isOp(")") {
						break
					}
					y, err := p.expression(true)
					if err != nil {
						return nil, err
					}
					items = append(items, y)
				}
				x = &listExpr{pos{line}, items, true}
			}
			return x, p.expectOp(")")
		case "[":
			p.next()
			var items []expr
			for !p.isOp("]") {
				if len(items) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("]") {
						break
					}
				}
				x, err := p.expression(true)
				if err != nil {
					return nil, err
				}
				items = append(items, x)
			}
			p.next()
			return &listExpr{pos{line}, items, false}, nil
		case "{":
			p.next()
			d := &dictExpr{pos: pos{line}}
			for !p.isOp("}") {
				if len(d.keys) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("}") {
						break
					}
				}
				k, err := p.expression(true)
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.expression(true)
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
			}
			p.next()
			return d, nil
		}
	}
	return nil, errorf(line, "unexpected %s", describe(t))
}

func parseInt(s string) (int64, error) {
	s = strings.ReplaceAll(s, "_", "")
	base := 10
	if len(s) > 1 && s[0] == '0' {
		switch s[1] | 0x20 {
		case 'x':
			base, s = 16, s[2:]
		case 'o':
			base, s = 8, s[2:]
		case 'b':
			base, s = 2, s[2:]
		}
	}
	n, err := strconv.ParseInt(s, base, 64)
	if err != nil {
		return 0, errString("integer literal out of range: " + truncateStr(s, 30))
	}
	return n, nil
}

// postfix parses .attr, [index], [slice] and (call) after a primary.
func (p *parser) postfix(x expr) (expr, error) {
	for {
		t := p.cur()
		if t.kind != tOp {
			return x, nil
		}
		var err error
		switch t.val {
		case ".":
			p.next()
			a := p.next()
			switch a.kind {
			case tName:
				x = &attrExpr{pos{t.line}, x, a.val}
			case tInt:
				n, err := parseInt(a.val)
				if err != nil {
					return nil, errorf(t.line, "%v", err)
				}
				x = &itemExpr{pos{t.line}, x, &constExpr{pos{t.line}, Int(n)}}
			default:
				return nil, errorf(t.line, "expected an attribute name after '.', got %s", describe(a))
			}
		case "[":
			p.next()
			if x, err = p.subscript(x, t.line); err != nil {
				return nil, err
			}
		case "(":
			if x, err = p.call(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
	}
}

func (p *parser) subscript(x expr, line int) (expr, error) {
	var parts [3]expr
	n := 0
	isSlice := false
	for {
		if p.isOp(":") {
			isSlice = true
			p.next()
			n++
			if n > 2 {
				return nil, errorf(line, "invalid slice")
			}
			continue
		}
		if p.isOp("]") {
			p.next()
			break
		}
		if parts[n] != nil {
			return nil, errorf(p.line(), "expected ']' or ':', got %s", describe(p.cur()))
		}
		e, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		parts[n] = e
	}
	if !isSlice {
		if parts[0] == nil {
			return nil, errorf(line, "expected an index")
		}
		return &itemExpr{pos{line}, x, parts[0]}, nil
	}
	return &sliceExpr{pos{line}, x, parts[0], parts[1], parts[2]}, nil
}

func (p *parser) callArgs() ([]expr, []kwarg, error) {
	if err := p.expectOp("("); err != nil {
		return nil, nil, err
	}
	var args []expr
	var kwargs []kwarg
	for !p.isOp(")") {
		if len(args)+len(kwargs) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		if p.isOp("*") || p.isOp("**") {
			return nil, nil, errorf(p.line(), "*args and **kwargs in calls are not supported")
		}
		if p.cur().kind == tName && p.peek(1).kind == tOp && p.peek(1).val == "=" {
			name := p.next().val
			p.next()
			x, err := p.expression(true)
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{name, x})
			continue
		}
		if len(kwargs) > 0 {
			return nil, nil, errorf(p.line(), "positional argument follows keyword argument")
		}
		x, err := p.expression(true)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, x)
	}
	p.next()
	return args, kwargs, nil
}

func (p *parser) call(fn expr) (expr, error) {
	line := p.line()
	args, kwargs, err := p.callArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{pos{line}, fn, args, kwargs}, nil
}

// filterTail parses "| filter", "is test" and calls after an expression.
func (p *parser) filterTail(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			fs, err := p.filterChain(x)
			if err != nil {
				return nil, err
			}
			x = fs[len(fs)-1]
		case p.isName("is"):
			var err error
			if x, err = p.test(x); err != nil {
				return nil, err
			}
		case p.isOp("("):
			var err error
			if x, err = p.call(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
	}
}

// filterChain parses one or more "| name(args)"; each filter's input is the
// previous one (the first's is x). A leading "|" is optional when x is nil
// ({% filter upper %}).
func (p *parser) filterChain(x expr) ([]*filterExpr, error) {
	var out []*filterExpr
	for len(out) == 0 || p.isOp("|") {
		if p.isOp("|") {
			p.next()
		}
		line := p.line()
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		for p.isOp(".") {
			p.next()
			part, err := p.expectName()
			if err != nil {
				return nil, err
			}
			name += "." + part
		}
		if _, ok := filters[name]; !ok {
			return nil, errorf(line, "no filter named '%s'", name)
		}
		f := &filterExpr{pos: pos{line}, x: x, name: name}
		if p.isOp("(") {
			if f.args, f.kwargs, err = p.callArgs(); err != nil {
				return nil, err
			}
		}
		out = append(out, f)
		x = f
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
	}
	return out, nil
}

func (p *parser) test(x expr) (expr, error) {
	line := p.next().line // "is"
	negate := false
	if p.isName("not") {
		p.next()
		negate = true
	}
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	for p.isOp(".") {
		p.next()
		part, err := p.expectName()
		if err != nil {
			return nil, err
		}
		name += "." + part
	}
	if _, ok := tests[name]; !ok {
		return nil, errorf(line, "no test named '%s'", name)
	}
	t := &testExpr{pos: pos{line}, x: x, name: name, negate: negate}
	switch c := p.cur(); {
	case c.kind == tOp && c.val == "(":
		if t.args, t.kwargs, err = p.callArgs(); err != nil {
			return nil, err
		}
	case c.kind == tString || c.kind == tInt || c.kind == tFloat || (c.kind == tOp && (c.val == "[" || c.val == "{")) ||
		(c.kind == tName && c.val != "else" && c.val != "or" && c.val != "and" && c.val != "if" && c.val != "in" && c.val != "is" && c.val != "not"):
		a, err := p.primary()
		if err != nil {
			return nil, err
		}
		if a, err = p.postfix(a); err != nil {
			return nil, err
		}
		t.args = []expr{a}
	}
	return t, nil
}
