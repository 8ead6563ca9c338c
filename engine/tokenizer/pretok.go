package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normOp is one step of a Hugging Face normalizer we support.
type normOp struct {
	kind     int // normReplace, normPrepend, normNFC
	from, to string
}

const (
	normReplace = iota
	normPrepend
	// normNFC is Unicode canonical composition (Qwen 2 and 3's
	// tokenizer.json), by golang.org/x/text's tables.
	normNFC
)

func applyNorm(ops []normOp, s string) string {
	for _, op := range ops {
		switch op.kind {
		case normReplace:
			s = strings.ReplaceAll(s, op.from, op.to)
		case normPrepend:
			// HF's Prepend leaves an empty string empty.
			if s != "" {
				s = op.to + s
			}
		case normNFC:
			s = norm.NFC.String(s)
		}
	}
	return s
}

// preStep is one step of a Hugging Face pre-tokenizer we support.
type preStep struct {
	kind     int    // preSplit, preByteLevel, preDigits, preMetaspace
	pattern  string // preSplit: the literal pattern; preMetaspace: the replacement
	behavior int    // preSplit: a split behaviour
	flag     bool   // preByteLevel: add_prefix_space; preDigits: individual_digits; preMetaspace: split
	scheme   int    // preMetaspace: prepend scheme
	regex    bool   // preByteLevel: use_regex
}

const (
	preSplit = iota
	preByteLevel
	preDigits
	preMetaspace
	preLlama3 // behavior holds the digit run length (3 Llama 3, 1 Qwen 2)
)

// Split behaviours, as Hugging Face names them.
const (
	splitRemoved = iota
	splitIsolated
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

// Metaspace prepend schemes.
const (
	prependAlways = iota
	prependFirst
	prependNever
)

// apply runs the step over every word; first marks the first segment of the
// input (Metaspace's "first" scheme).
func (p preStep) apply(words []string, first bool) []string {
	out := words[:0:0]
	for wi, w := range words {
		switch p.kind {
		case preSplit:
			out = splitLiteral(out, w, p.pattern, p.behavior)
		case preDigits:
			out = splitDigits(out, w, p.flag)
		case preLlama3:
			out = llama3Split(out, w, p.behavior)
		case preByteLevel:
			if p.flag && !strings.HasPrefix(w, " ") {
				w = " " + w
			}
			if p.regex {
				out = gpt2Split(out, w)
			} else if w != "" {
				out = append(out, w)
			}
		case preMetaspace:
			w = strings.ReplaceAll(w, " ", p.pattern)
			if (p.scheme == prependAlways || (p.scheme == prependFirst && first && wi == 0)) && !strings.HasPrefix(w, p.pattern) {
				w = p.pattern + w
			}
			if p.flag {
				out = splitLiteral(out, w, p.pattern, splitMergedWithNext)
			} else if w != "" {
				out = append(out, w)
			}
		}
	}
	return out
}

// splitLiteral splits s at every occurrence of pat with HF's behaviours
// (the same folds as tokenizers' NormalizedString::split); empty pieces are
// dropped, as HF does.
func splitLiteral(out []string, s, pat string, behavior int) []string {
	if s == "" {
		return out
	}
	if pat == "" || !strings.Contains(s, pat) {
		return append(out, s)
	}
	type piece struct {
		start, end int
		match      bool
	}
	var ps []piece
	prev := 0
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], pat)
		if j < 0 {
			break
		}
		ms, me := i+j, i+j+len(pat)
		if prev < ms {
			ps = append(ps, piece{prev, ms, false})
		}
		ps = append(ps, piece{ms, me, true})
		prev, i = me, me
	}
	if prev < len(s) {
		ps = append(ps, piece{prev, len(s), false})
	}
	var res []piece
	switch behavior {
	case splitRemoved:
		for _, p := range ps {
			if !p.match {
				res = append(res, p)
			}
		}
	case splitIsolated:
		res = ps
	case splitMergedWithPrevious:
		prevMatch := false
		for _, p := range ps {
			if p.match && !prevMatch && len(res) > 0 {
				res[len(res)-1].end = p.end
			} else {
				res = append(res, p)
			}
			prevMatch = p.match
		}
	case splitMergedWithNext:
		prevMatch := false
		for k := len(ps) - 1; k >= 0; k-- {
			p := ps[k]
			if p.match && !prevMatch && len(res) > 0 {
				res[len(res)-1].start = p.start
			} else {
				res = append(res, p)
			}
			prevMatch = p.match
		}
		for a, b := 0, len(res)-1; a < b; a, b = a+1, b-1 {
			res[a], res[b] = res[b], res[a]
		}
	case splitContiguous:
		prevMatch := false
		for _, p := range ps {
			if p.match == prevMatch && len(res) > 0 {
				res[len(res)-1].end = p.end
			} else {
				res = append(res, p)
			}
			prevMatch = p.match
		}
	}
	for _, p := range res {
		if p.start < p.end {
			out = append(out, s[p.start:p.end])
		}
	}
	return out
}

// splitDigits isolates digits (HF's Digits pre-tokenizer: Rust's
// char::is_numeric, i.e. Unicode N*): each one alone when individual, else
// runs of them.
func splitDigits(out []string, s string, individual bool) []string {
	start := 0
	prevDigit := false
	for i, r := range s {
		d := unicode.IsNumber(r)
		if i > start && (d != prevDigit || (d && individual)) {
			out = append(out, s[start:i])
			start = i
		}
		prevDigit = d
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// gpt2Split applies the GPT-2 pre-tokenizer pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// by hand (Go's regexp has no lookahead). Each alternative is tried in order
// at the current position, as a backtracking regex engine does.
func gpt2Split(out []string, s string) []string {
	i := 0
	for i < len(s) {
		n := gpt2Match(s, i)
		out = append(out, s[i:i+n])
		i += n
	}
	return out
}

type runeClass int

const (
	clsLetter runeClass = iota
	clsNumber
	clsSpace
	clsOther
)

func classOf(r rune) runeClass {
	switch {
	case r < 0x80:
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			return clsLetter
		case r >= '0' && r <= '9':
			return clsNumber
		case r == ' ', r >= '\t' && r <= '\r':
			return clsSpace
		}
		return clsOther
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

// decodeAt decodes the rune at s[i:] (invalid bytes are one "other" byte).
func decodeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < 0x80 {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// gpt2Match returns the length of the match at s[i:] (always ≥ 1).
func gpt2Match(s string, i int) int {
	c := s[i]
	// Contractions: 's 't 're 've 'm 'll 'd (case-sensitive).
	if c == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return 2
		case 'r':
			if i+2 < len(s) && s[i+2] == 'e' {
				return 3
			}
		case 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return 3
			}
		}
	}
	// ` ?X+` for X = letters, numbers, others.
	j := i
	if c == ' ' {
		j++
	}
	if r, n := decodeAt(s, j); n > 0 {
		cls := classOf(r)
		if cls != clsSpace {
			k := j + n
			for k < len(s) {
				r2, n2 := decodeAt(s, k)
				if classOf(r2) != cls {
					break
				}
				k += n2
			}
			return k - i
		}
	}
	// Whitespace: `\s+(?!\S)` then `\s+`.
	r, n := decodeAt(s, i)
	if classOf(r) != clsSpace {
		return n // unreachable for valid input: every rune is in a class above
	}
	k := i + n
	lastStart := i
	for k < len(s) {
		r2, n2 := decodeAt(s, k)
		if classOf(r2) != clsSpace {
			break
		}
		lastStart = k
		k += n2
	}
	if k == len(s) {
		return k - i // the run ends the text: \s+(?!\S) takes it all
	}
	// Followed by a non-space: \s+(?!\S) backs off one rune (if that leaves
	// at least one), else \s+ takes the single rune.
	if lastStart > i {
		return lastStart - i
	}
	return k - i
}

// The pre-tokenizer regexes of Llama 3 and Qwen 2 (byte-level BPE; llama.cpp
// pre types "llama-bpe" and "qwen2"), exactly as their tokenizer.json files
// spell them. They differ only in how many digits make a piece (3 or 1).
const (
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// llama3Split applies llama3Pattern (maxDigits 3) or qwen2Pattern (1) by hand.
func llama3Split(out []string, s string, maxDigits int) []string {
	for i := 0; i < len(s); {
		n := llama3Match(s, i, maxDigits)
		out = append(out, s[i:i+n])
		i += n
	}
	return out
}

// foldS etc. report the case-insensitive matches of the contraction
// letters, including the Unicode characters that fold to them (ſ for s).
func contraction(s string, i int) int {
	if s[i] != '\'' {
		return 0
	}
	r1, n1 := decodeAt(s, i+1)
	switch r1 {
	case 's', 'S', 'ſ', 't', 'T', 'm', 'M', 'd', 'D':
		return 1 + n1
	case 'r', 'R', 'v', 'V':
		if r2, n2 := decodeAt(s, i+1+n1); r2 == 'e' || r2 == 'E' {
			return 1 + n1 + n2
		}
	case 'l', 'L':
		if r2, n2 := decodeAt(s, i+1+n1); r2 == 'l' || r2 == 'L' {
			return 1 + n1 + n2
		}
	}
	return 0
}

func isCRLF(r rune) bool { return r == '\r' || r == '\n' }

// runOf returns the end of the run of runes of class cls starting at k.
func runOf(s string, k int, cls runeClass) int {
	for k < len(s) {
		r, n := decodeAt(s, k)
		if classOf(r) != cls {
			break
		}
		k += n
	}
	return k
}

func llama3Match(s string, i, maxDigits int) int {
	if n := contraction(s, i); n > 0 {
		return n
	}
	r, n := decodeAt(s, i)
	cls := classOf(r)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if cls == clsLetter {
		return runOf(s, i, clsLetter) - i
	}
	if cls != clsNumber && !isCRLF(r) {
		if r2, _ := decodeAt(s, i+n); r2 >= 0 && classOf(r2) == clsLetter {
			return runOf(s, i+n, clsLetter) - i
		}
	}
	// \p{N}{1,maxDigits}
	if cls == clsNumber {
		k := i + n
		for d := 1; d < maxDigits && k < len(s); d++ {
			r2, n2 := decodeAt(s, k)
			if classOf(r2) != clsNumber {
				break
			}
			k += n2
		}
		return k - i
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	j := i
	if r == ' ' {
		j += n
	}
	if r2, _ := decodeAt(s, j); r2 >= 0 && classOf(r2) == clsOther {
		k := runOf(s, j, clsOther)
		for k < len(s) && (s[k] == '\r' || s[k] == '\n') {
			k++
		}
		return k - i
	}
	// Whitespace from here on (cls == clsSpace).
	end := runOf(s, i, clsSpace)
	// \s*[\r\n]+ : up to the last newline of the run.
	for k := end - 1; k >= i; k-- {
		if s[k] == '\r' || s[k] == '\n' {
			return k + 1 - i
		}
	}
	// \s+(?!\S) then \s+, as in GPT-2's pattern.
	if end == len(s) {
		return end - i
	}
	last := i
	for k := i; k < end; {
		_, n2 := decodeAt(s, k)
		last = k
		k += n2
	}
	if last > i {
		return last - i
	}
	return end - i
}
