package app

import (
	"fmt"
	"strings"
)

// Prompt variables: a library prompt's system prompt and body may hold
// placeholders, {{name}}, that the window asks for when a chat starts from
// it (Chat.StartFromPrompt fills them).
//
// The rules:
//   - A placeholder is "{{", a name, "}}". A name is a letter or "_"
//     followed by letters, digits, "_" or "-" (at most 64 characters); spaces
//     just inside the braces are allowed: "{{ topic }}" is "{{topic}}".
//     Names are case-sensitive.
//   - Anything else between double braces ("{{ }}", "{{a b}}", "{{1x}}") is
//     not a placeholder and stays as written.
//   - A backslash right before "{{" makes it literal: "\{{name}}" stays
//     "{{name}}" (without the backslash) and is not a placeholder. Two
//     backslashes before "{{" are one literal backslash followed by a
//     placeholder. Backslashes anywhere else are plain text.
//   - Filling inserts each value as it is: a value holding "{{x}}" is not
//     filled again.

// maxVarName bounds a placeholder's name.
const maxVarName = 64

// varToken is one piece of a template: literal text, or a placeholder.
type varToken struct {
	text string // the literal text, or the placeholder's name
	name bool   // a placeholder
}

// scanVars splits text into literal pieces and placeholders.
func scanVars(text string) []varToken {
	var out []varToken
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, varToken{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], "{{")
		if j < 0 {
			lit.WriteString(text[i:])
			break
		}
		j += i
		// Backslashes just before the braces: pairs are literal backslashes,
		// an odd one escapes the braces.
		k := j
		for k > i && text[k-1] == '\\' {
			k--
		}
		slashes := j - k
		lit.WriteString(text[i:k])
		lit.WriteString(strings.Repeat(`\`, slashes/2))
		if slashes%2 == 1 {
			lit.WriteString("{{")
			i = j + 2
			continue
		}
		end := strings.Index(text[j+2:], "}}")
		if end < 0 {
			lit.WriteString(text[j:])
			break
		}
		name := strings.TrimSpace(text[j+2 : j+2+end])
		if !validVarName(name) {
			lit.WriteString("{{")
			i = j + 2
			continue
		}
		flush()
		out = append(out, varToken{text: name, name: true})
		i = j + 2 + end + 2
	}
	flush()
	return out
}

func validVarName(s string) bool {
	if s == "" || len(s) > maxVarName {
		return false
	}
	for i, r := range s {
		letter := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if i == 0 && !letter {
			return false
		}
		if !letter && !(r >= '0' && r <= '9') && r != '-' {
			return false
		}
	}
	return true
}

// PromptVariables lists the placeholders of texts in order of first
// appearance, each once.
func PromptVariables(texts ...string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, t := range texts {
		for _, tok := range scanVars(t) {
			if tok.name && !seen[tok.text] {
				seen[tok.text] = true
				out = append(out, tok.text)
			}
		}
	}
	return out
}

// FillVariables replaces each placeholder of text with its value and turns
// escaped braces into plain ones. A placeholder without a value is an error
// naming it.
func FillVariables(text string, values map[string]string) (string, error) {
	var b strings.Builder
	for _, tok := range scanVars(text) {
		if !tok.name {
			b.WriteString(tok.text)
			continue
		}
		v, ok := values[tok.text]
		if !ok {
			return "", fmt.Errorf("library: no value for {{%s}}: fill in every variable", tok.text)
		}
		b.WriteString(v)
	}
	return b.String(), nil
}
