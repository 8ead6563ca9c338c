package jinja

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Lexing follows Jinja's lexer as Hugging Face configures it for chat
// templates (trim_blocks and lstrip_blocks on, keep_trailing_newline off):
//
//   - line breaks (\r\n, \r, \n) become \n, and one final line break is
//     dropped;
//   - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}", "-}}",
//     "-#}" all whitespace after it;
//   - trim_blocks: one newline right after "%}" or "#}" is dropped;
//   - lstrip_blocks: spaces before "{%" or "{#" at the start of a line are
//     dropped ("{%+" keeps them, "+%}" keeps the newline).

type tokKind uint8

const (
	tEOF tokKind = iota
	tData
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	val  string // data, name, operator, decoded string literal, number text
	line int
}

// operators, longest first.
var operators = []string{"**", "//", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"}

type lexer struct {
	src    string
	pos    int
	line   int
	toks   []token
	maxTok int
}

// pySpace is Python's str.isspace (also what its regex \s matches).
func pySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

func rstripPy(s string) string { return strings.TrimRightFunc(s, pySpace) }

// skipSpacePy returns the index after the whitespace run starting at i.
func skipSpacePy(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !pySpace(r) {
			break
		}
		i += n
	}
	return i
}

func allSpacePy(s string) bool {
	for _, r := range s {
		if !pySpace(r) {
			return false
		}
	}
	return true
}

func normalizeNewlines(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

func lex(src string, maxTokens int) ([]token, error) {
	lx := &lexer{src: normalizeNewlines(src), line: 1, maxTok: maxTokens}
	if err := lx.run(); err != nil {
		return nil, err
	}
	return lx.toks, nil
}

func (lx *lexer) emit(k tokKind, val string, line int) error {
	if len(lx.toks) >= lx.maxTok {
		return errorf(line, "template too long (more than %d tokens)", lx.maxTok)
	}
	lx.toks = append(lx.toks, token{k, val, line})
	return nil
}

// nextOpener finds the next "{{", "{%" or "{#" at or after i.
func nextOpener(s string, i int) (int, byte) {
	for {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 || i+j+1 >= len(s) {
			return -1, 0
		}
		j += i
		switch c := s[j+1]; c {
		case '{', '%', '#':
			return j, c
		}
		i = j + 1
	}
}

func (lx *lexer) run() error {
	s := lx.src
	lineStarting := true
	for lx.pos < len(s) {
		at, kind := nextOpener(s, lx.pos)
		if at < 0 {
			if err := lx.emit(tData, s[lx.pos:], lx.line); err != nil {
				return err
			}
			lx.line += strings.Count(s[lx.pos:], "\n")
			lx.pos = len(s)
			break
		}
		text := s[lx.pos:at]
		textLine := lx.line
		lx.line += strings.Count(text, "\n")
		after := at + 2
		sign := byte(0)
		if after < len(s) && (s[after] == '-' || s[after] == '+') {
			sign = s[after]
			after++
		}
		// A raw block is data up to its {% endraw %}.
		rawEnd := -1
		if kind == '%' {
			rawEnd = matchWord(s, after, "raw")
		}
		switch {
		case sign == '-':
			text = rstripPy(text)
		case sign != '+' && kind != '{':
			lpos := strings.LastIndexByte(text, '\n') + 1
			if (lpos > 0 || lineStarting) && lpos < len(text) && allSpacePy(text[lpos:]) {
				text = text[:lpos]
			}
		}
		if text != "" {
			if err := lx.emit(tData, text, textLine); err != nil {
				return err
			}
		}
		var err error
		switch {
		case rawEnd >= 0:
			lineStarting, err = lx.raw(rawEnd)
		case kind == '#':
			lineStarting, err = lx.comment(after)
		default:
			lineStarting, err = lx.tag(kind, after)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// matchWord: after optional whitespace at i, the word w followed by
// whitespace and a block end; returns the index after the block end, or -1.
func matchWord(s string, i int, w string) int {
	j := skipSpacePy(s, i)
	if !strings.HasPrefix(s[j:], w) {
		return -1
	}
	j = skipSpacePy(s, j+len(w))
	switch {
	case strings.HasPrefix(s[j:], "-%}"):
		return skipSpacePy(s, j+3)
	case strings.HasPrefix(s[j:], "%}"):
		return j + 2
	}
	return -1
}

// blockEnd consumes a block or comment end at i ("+%}", "-%}\s*" or
// "%}\n?"), returning the index after it and whether it ended a line.
func blockEnd(s string, i int, closer string) (int, bool) {
	switch {
	case s[i] == '+':
		return i + 1 + len(closer), false
	case s[i] == '-':
		j := skipSpacePy(s, i+1+len(closer))
		return j, j > 0 && s[j-1] == '\n'
	}
	j := i + len(closer)
	if j < len(s) && s[j] == '\n' {
		return j + 1, true
	}
	return j, false
}

func (lx *lexer) comment(i int) (bool, error) {
	s := lx.src
	start := i
	for {
		j := strings.Index(s[i:], "#}")
		if j < 0 {
			return false, errorf(lx.line, "missing end of comment tag")
		}
		j += i
		e := j
		if j-1 >= start && (s[j-1] == '-' || s[j-1] == '+') {
			e = j - 1
		}
		lx.line += strings.Count(s[lx.pos:e], "\n")
		end, nl := blockEnd(s, e, "#}")
		lx.line += strings.Count(s[e:end], "\n")
		lx.pos = end
		return nl, nil
	}
}

func (lx *lexer) raw(bodyStart int) (bool, error) {
	s := lx.src
	lx.line += strings.Count(s[lx.pos:bodyStart], "\n")
	for i := bodyStart; ; {
		j := strings.Index(s[i:], "{%")
		if j < 0 {
			return false, errorf(lx.line, "missing end of raw directive")
		}
		j += i
		k := j + 2
		sign := byte(0)
		if k < len(s) && (s[k] == '-' || s[k] == '+') {
			sign = s[k]
			k++
		}
		w := skipSpacePy(s, k)
		if !strings.HasPrefix(s[w:], "endraw") {
			i = j + 2
			continue
		}
		w = skipSpacePy(s, w+6)
		if !strings.HasPrefix(s[w:], "%}") && !strings.HasPrefix(s[w:], "-%}") && !strings.HasPrefix(s[w:], "+%}") {
			i = j + 2
			continue
		}
		body := s[bodyStart:j]
		if sign == '-' {
			body = rstripPy(body)
		} else if sign != '+' {
			lpos := strings.LastIndexByte(body, '\n') + 1
			if lpos > 0 && lpos < len(body) && allSpacePy(body[lpos:]) {
				body = body[:lpos]
			}
		}
		if body != "" {
			if err := lx.emit(tData, body, lx.line); err != nil {
				return false, err
			}
		}
		end, nl := blockEnd(s, w, "%}")
		lx.line += strings.Count(s[bodyStart:end], "\n")
		lx.pos = end
		return nl, nil
	}
}

// tag lexes the inside of "{{ … }}" or "{% … %}" starting at i.
func (lx *lexer) tag(kind byte, i int) (bool, error) {
	s := lx.src
	begin, endK, closer := tVarBegin, tVarEnd, "}}"
	if kind == '%' {
		begin, endK, closer = tBlockBegin, tBlockEnd, "%}"
	}
	if err := lx.emit(begin, "", lx.line); err != nil {
		return false, err
	}
	var stack []byte // open brackets: "}}" inside a dict literal is not an end
	for {
		j := skipSpacePy(s, i)
		lx.line += strings.Count(s[i:j], "\n")
		i = j
		if i >= len(s) {
			return false, errorf(lx.line, "unexpected end of template, expected '%s'", closer)
		}
		if len(stack) == 0 {
			if kind == '{' {
				switch {
				case strings.HasPrefix(s[i:], "-}}"):
					end := skipSpacePy(s, i+3)
					lx.line += strings.Count(s[i:end], "\n")
					lx.pos = end
					return end > 0 && s[end-1] == '\n', lx.emit(endK, "", lx.line)
				case strings.HasPrefix(s[i:], "}}"):
					lx.pos = i + 2
					return false, lx.emit(endK, "", lx.line)
				}
			} else if strings.HasPrefix(s[i:], closer) || ((s[i] == '-' || s[i] == '+') && strings.HasPrefix(s[i+1:], closer)) {
				end, nl := blockEnd(s, i, closer)
				if err := lx.emit(endK, "", lx.line); err != nil {
					return false, err
				}
				lx.line += strings.Count(s[i:end], "\n")
				lx.pos = end
				return nl, nil
			}
		}
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			val, n, err := lexString(s[i:])
			if err != nil {
				return false, errorf(lx.line, "%v", err)
			}
			if err := lx.emit(tString, val, lx.line); err != nil {
				return false, err
			}
			lx.line += strings.Count(s[i:i+n], "\n")
			i += n
		case c >= '0' && c <= '9':
			n, isFloat := lexNumber(s[i:])
			k := tInt
			if isFloat {
				k = tFloat
			}
			if err := lx.emit(k, s[i:i+n], lx.line); err != nil {
				return false, err
			}
			i += n
		case c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z'):
			j := i + 1
			for j < len(s) && (s[j] == '_' || (s[j]|0x20 >= 'a' && s[j]|0x20 <= 'z') || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			if err := lx.emit(tName, s[i:j], lx.line); err != nil {
				return false, err
			}
			i = j
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(s[i:])
				return false, errorf(lx.line, "unexpected char %q", r)
			}
			switch op {
			case "(", "[", "{":
				if len(stack) >= 200 {
					return false, errorf(lx.line, "brackets nested too deeply")
				}
				stack = append(stack, map[string]byte{"(": ')', "[": ']', "{": '}'}[op])
			case ")", "]", "}":
				if len(stack) == 0 {
					return false, errorf(lx.line, "unexpected '%s'", op)
				}
				if want := stack[len(stack)-1]; want != op[0] {
					return false, errorf(lx.line, "unexpected '%s', expected '%c'", op, want)
				}
				stack = stack[:len(stack)-1]
			}
			if err := lx.emit(tOp, op, lx.line); err != nil {
				return false, err
			}
			i += len(op)
		}
	}
}

// lexNumber returns the length of the number at the start of s and whether
// it is a float (Jinja: digits with "_" separators, an optional fraction,
// an optional exponent; 0b/0o/0x integers).
func lexNumber(s string) (int, bool) {
	if len(s) > 1 && s[0] == '0' && (s[1]|0x20 == 'x' || s[1]|0x20 == 'o' || s[1]|0x20 == 'b') {
		j := 2
		for j < len(s) && (isHex(s[j]) || s[j] == '_') {
			j++
		}
		if j > 2 {
			return j, false
		}
	}
	digits := func(i int) int {
		j := i
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || (s[j] == '_' && j > i && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9')) {
			j++
		}
		return j
	}
	i := digits(0)
	isFloat := false
	if i+1 < len(s) && s[i] == '.' && s[i+1] >= '0' && s[i+1] <= '9' {
		i = digits(i + 1)
		isFloat = true
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			i = digits(j)
			isFloat = true
		}
	}
	return i, isFloat
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f'
}

// lexString decodes the quoted literal at the start of s as Jinja does
// (Python's unicode-escape rules; unknown escapes stay as they are) and
// returns its value and length in s.
func lexString(s string) (string, int, error) {
	q := s[0]
	end := -1
	for i := 1; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] == q {
			end = i
			break
		}
	}
	if end < 0 {
		return "", 0, errString("unterminated string")
	}
	body := s[1:end]
	if strings.IndexByte(body, '\\') < 0 {
		return body, end + 1, nil
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' || i+1 >= len(body) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := body[i]; e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			r := rune(0)
			for k := 1; k <= n; k++ {
				if i+k >= len(body) || !isHex(body[i+k]) {
					return "", 0, errString("truncated \\" + string(e) + " escape")
				}
				r = r<<4 | rune(hexDigit(body[i+k]))
			}
			if r > unicode.MaxRune {
				return "", 0, errString("illegal Unicode character")
			}
			b.WriteRune(r)
			i += n
		default:
			if e >= '0' && e <= '7' {
				r := rune(e - '0')
				k := 1
				for ; k < 3 && i+k < len(body) && body[i+k] >= '0' && body[i+k] <= '7'; k++ {
					r = r<<3 | rune(body[i+k]-'0')
				}
				b.WriteRune(r)
				i += k - 1
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), end + 1, nil
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return int(c-'A') + 10
}

type errString string

func (e errString) Error() string { return string(e) }
