package constrain

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Limits on what a grammar may hold. Each bounds the work and memory of a
// request whatever its schema: a schema past one is refused with an Error,
// never compiled into something slow.
const (
	// MaxSchemaBytes is the largest schema text.
	MaxSchemaBytes = 1 << 20
	// MaxSchemaDepth is the deepest nesting of JSON in a schema document.
	MaxSchemaDepth = 64
	// MaxProperties is the most object properties a grammar may declare
	// (OpenAI's limit for strict schemas is 5000).
	MaxProperties = 5000
	// MaxEnumValues is the most enum and const values a grammar may list
	// in total (OpenAI allows 1000).
	MaxEnumValues = 1000
	// MaxEnumBytes is the most bytes those values may spell in total.
	MaxEnumBytes = 64 << 10
	// MaxNodes is the most automaton states a compiled grammar may have.
	MaxNodes = 1 << 18
	// MaxIndent is the most spaces or tabs after a newline between JSON
	// tokens: whitespace there is one space, or a newline and an indent,
	// enough for pretty-printed JSON, too little for a model to loop on
	// blank space until its token limit.
	MaxIndent = 20
	// MaxIntDigits and MaxFracDigits bound a number's integer and fraction
	// digits, and MaxExpDigits its exponent's: a model cannot write
	// digits forever.
	MaxIntDigits  = 20
	MaxFracDigits = 20
	MaxExpDigits  = 3
)

// Error is a schema or grammar the compiler refuses: Path says where (a
// dotted JSON path inside the schema, "properties.x.pattern"; "" for the
// schema itself) and Msg what is wrong.
type Error struct {
	Path string
	Msg  string
}

// Error joins the path and the message.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Prefixed returns the error with prefix put before its path (the server
// names a schema field "response_format.json_schema.schema").
func (e *Error) Prefixed(prefix string) *Error {
	p := prefix
	if e.Path != "" {
		p = joinPath(prefix, e.Path)
	}
	return &Error{Path: p, Msg: e.Msg}
}

func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case strings.HasPrefix(b, "["):
		return a + b
	}
	return a + "." + b
}

// An Element is a piece of a grammar: literal text, a JSON value under a
// schema, a vocabulary token, or a sequence of or a choice between
// elements. Elements are values: build them with Literal, Token, Schema,
// AnyObject, Sequence and Choice, then Compile the whole.
type Element struct {
	kind   elemKind
	text   string
	schema *schema
	parts  []Element
	gemma  bool // a schema element written in Gemma 4's notation (Gemma)
}

type elemKind uint8

const (
	elemLiteral elemKind = iota + 1
	elemToken
	elemSchema
	elemSeq
	elemChoice
)

// Literal matches text exactly, byte for byte (whatever tokens spell it).
func Literal(text string) Element { return Element{kind: elemLiteral, text: text} }

// Token matches one vocabulary token by its piece as the vocabulary spells
// it ("<start_function_call>"): for control tokens a model family writes
// around its tool calls, which no text spells. The piece is looked up when a
// Matcher binds the grammar to a Vocab; a piece the vocabulary lacks is an
// error there.
func Token(piece string) Element { return Element{kind: elemToken, text: piece} }

// Sequence matches its parts one after the other.
func Sequence(parts ...Element) Element { return Element{kind: elemSeq, parts: parts} }

// Choice matches any one of its alternatives (at least one).
func Choice(alts ...Element) Element { return Element{kind: elemChoice, parts: alts} }

// AnyObject matches any JSON object (response_format "json_object").
func AnyObject() Element {
	return Element{kind: elemSchema, schema: &schema{kind: kindAnyObject}}
}

// Compile turns an element into a grammar, refusing one that cannot be
// matched in bounded work: a $ref cycle that consumes nothing or never ends,
// more than MaxNodes states, an empty Choice.
func Compile(e Element) (*Grammar, error) {
	b := &builder{rules: map[*schema]int32{}}
	root := b.newRule("")
	end, err := b.element(b.rule(root).start, e, "")
	if err != nil {
		return nil, err
	}
	b.eps(end, b.rule(root).end)
	if err := b.check(); err != nil {
		return nil, err
	}
	return b.finish(root)
}

// CompileSchema compiles a JSON schema (the strict subset Schema accepts)
// into a grammar for a JSON value under it.
func CompileSchema(schemaJSON []byte) (*Grammar, error) {
	e, err := Schema(schemaJSON)
	if err != nil {
		return nil, err
	}
	return Compile(e)
}

// A Grammar is a compiled element: an automaton over bytes with calls (a
// recursive transition network), checked so that every state it can reach
// can still complete. It is immutable and safe for concurrent use; bind it
// to a vocabulary with NewMatcher.
type Grammar struct {
	nodes  []node
	starts []int32 // rule -> start node
	root   int32
	tokens []string // pieces the edgeToken edges name (index in tok)
}

// Nodes is the number of automaton states (for tests and limits).
func (g *Grammar) Nodes() int { return len(g.nodes) }

type node struct {
	edges []edge
	final bool // the end of its rule: return to the caller
}

type edgeKind uint8

const (
	edgeByte  edgeKind = iota + 1 // consume a byte in [lo, hi]
	edgeEps                       // move without consuming
	edgeCall                      // push to, enter rule arg
	edgeToken                     // consume the vocabulary token tokens[arg]
)

type edge struct {
	kind   edgeKind
	lo, hi byte
	arg    int32
	to     int32
}

type ruleInfo struct {
	start, end int32
	path       string
}

type builder struct {
	nodes      []node
	ruleList   []ruleInfo
	rules      map[*schema]int32 // compiled schemas, so $ref and recursion call one rule
	gemmaRules map[*schema]int32 // the same in Gemma 4's notation
	shared     map[string]int32  // ws, string, number, ... built once
	tokens     []string
	tokIndex   map[string]int32
	err        error
	props      int
	enumVals   int
	enumBytes  int
}

func (b *builder) newNode() int32 {
	if len(b.nodes) >= MaxNodes {
		if b.err == nil {
			b.err = &Error{Msg: fmt.Sprintf("the grammar needs more than %d states: simplify the schema", MaxNodes)}
		}
		return 0
	}
	b.nodes = append(b.nodes, node{})
	return int32(len(b.nodes) - 1)
}

func (b *builder) add(from int32, e edge) {
	if b.err != nil {
		return
	}
	b.nodes[from].edges = append(b.nodes[from].edges, e)
}

func (b *builder) eps(from, to int32) { b.add(from, edge{kind: edgeEps, to: to}) }

func (b *builder) byteRange(from int32, lo, hi byte, to int32) {
	b.add(from, edge{kind: edgeByte, lo: lo, hi: hi, to: to})
}

func (b *builder) call(from int32, rule int32, to int32) {
	b.add(from, edge{kind: edgeCall, arg: rule, to: to})
}

func (b *builder) newRule(path string) int32 {
	s, e := b.newNode(), b.newNode()
	if b.err == nil {
		b.nodes[e].final = true
	}
	b.ruleList = append(b.ruleList, ruleInfo{start: s, end: e, path: path})
	return int32(len(b.ruleList) - 1)
}

func (b *builder) rule(r int32) ruleInfo { return b.ruleList[r] }

// literal adds the bytes of s from `from` and returns the node after them.
func (b *builder) literal(from int32, s string) int32 {
	for i := 0; i < len(s); i++ {
		n := b.newNode()
		b.byteRange(from, s[i], s[i], n)
		from = n
	}
	return from
}

// token adds the vocabulary token piece after from and returns the node
// after it.
func (b *builder) token(from int32, piece string) int32 {
	idx, ok := b.tokIndex[piece]
	if !ok {
		if b.tokIndex == nil {
			b.tokIndex = map[string]int32{}
		}
		idx = int32(len(b.tokens))
		b.tokens = append(b.tokens, piece)
		b.tokIndex[piece] = idx
	}
	to := b.newNode()
	b.add(from, edge{kind: edgeToken, arg: idx, to: to})
	return to
}

// element adds e from `from` and returns its end node.
func (b *builder) element(from int32, e Element, path string) (int32, error) {
	switch e.kind {
	case elemLiteral:
		return b.literal(from, e.text), b.err
	case elemToken:
		return b.token(from, e.text), b.err
	case elemSchema:
		if e.gemma {
			return b.gemmaElement(from, e.schema)
		}
		r, err := b.schemaRule(e.schema)
		if err != nil {
			return 0, err
		}
		to := b.newNode()
		b.call(b.ws(from), r, to)
		return to, b.err
	case elemSeq:
		for i, p := range e.parts {
			var err error
			if from, err = b.element(from, p, joinPath(path, fmt.Sprintf("[%d]", i))); err != nil {
				return 0, err
			}
		}
		return from, b.err
	case elemChoice:
		if len(e.parts) == 0 {
			return 0, &Error{Path: path, Msg: "a Choice needs at least one alternative"}
		}
		to := b.newNode()
		for i, p := range e.parts {
			start := b.newNode()
			b.eps(from, start)
			end, err := b.element(start, p, joinPath(path, fmt.Sprintf("[%d]", i)))
			if err != nil {
				return 0, err
			}
			b.eps(end, to)
		}
		return to, b.err
	}
	return 0, errors.New("constrain: the zero Element matches nothing (build one with Literal, Schema, ...)")
}

// finish copies the builder's automaton into a Grammar.
func (b *builder) finish(root int32) (*Grammar, error) {
	g := &Grammar{nodes: b.nodes, root: b.rule(root).start, tokens: b.tokens}
	g.starts = make([]int32, len(b.ruleList))
	for i, r := range b.ruleList {
		g.starts[i] = r.start
	}
	return g, nil
}

// Match reports whether text is a whole match of g, read as bytes (Token
// elements match nothing here): a check of a finished text, such as a
// reply parsed back into a tool call.
func (g *Grammar) Match(text []byte) bool {
	m := &Matcher{g: g, v: &Vocab{}}
	cur := m.Start().cfgs
	var buf [2][]config
	for i, c := range text {
		var ok bool
		if buf[i&1], _, ok = m.step(buf[i&1][:0], cur, c, nil); !ok {
			return false
		}
		if cur = buf[i&1]; len(cur) == 0 {
			return false
		}
	}
	return slices.ContainsFunc(cur, func(c config) bool { return c.n == accept })
}
