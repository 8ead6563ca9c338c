package app

import (
	"slices"
	"strings"
	"testing"
)

func TestPromptVariablesAndFill(t *testing.T) {
	values := map[string]string{"topic": "tides", "n": "3", "lang-code": "fr", "x": "{{topic}}"}
	for _, c := range []struct {
		text string
		vars []string
		want string // "" with err set: Fill fails
		err  string
	}{
		{"no variables here", []string{}, "no variables here", ""},
		{"Explain {{topic}} in {{n}} sentences.", []string{"topic", "n"}, "Explain tides in 3 sentences.", ""},
		{"{{ topic }} and {{topic}} again", []string{"topic"}, "tides and tides again", ""},
		{"answer in {{lang-code}}", []string{"lang-code"}, "answer in fr", ""},
		// Not placeholders: left as written.
		{"{{}} {{ }} {{a b}} {{1x}} {{-x}} {{", []string{}, "{{}} {{ }} {{a b}} {{1x}} {{-x}} {{", ""},
		{"set {x} and }}", []string{}, "set {x} and }}", ""},
		// Escapes: one backslash makes the braces literal (and goes), two
		// are one literal backslash before a placeholder.
		{`literal \{{topic}} here`, []string{}, "literal {{topic}} here", ""},
		{`path C:\\{{topic}}`, []string{"topic"}, `path C:\tides`, ""},
		{`three \\\{{topic}}`, []string{}, `three \{{topic}}`, ""},
		{`a \ backslash elsewhere \n stays`, []string{}, `a \ backslash elsewhere \n stays`, ""},
		// Values are inserted as they are, not filled again.
		{"nested {{x}}", []string{"x"}, "nested {{topic}}", ""},
		// An invalid name inside does not hide a later placeholder.
		{"{{ {{topic}}", []string{"topic"}, "{{ tides", ""},
		{"needs {{missing}}", []string{"missing"}, "", "no value for {{missing}}"},
		{"Case {{Topic}}", []string{"Topic"}, "", "no value for {{Topic}}"},
	} {
		if got := PromptVariables(c.text); !slices.Equal(got, c.vars) {
			t.Errorf("PromptVariables(%q) = %q, want %q", c.text, got, c.vars)
		}
		got, err := FillVariables(c.text, values)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("FillVariables(%q) = %q, %v; want an error containing %q", c.text, got, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("FillVariables(%q) = %q, %v; want %q", c.text, got, err, c.want)
		}
	}
	if got := PromptVariables("{{b}} {{a}}", "{{a}} {{c}}"); !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Errorf("variables of two texts = %q, want b a c (first appearance, once)", got)
	}
	long := strings.Repeat("v", maxVarName+1)
	if got := PromptVariables("{{" + long + "}}"); len(got) != 0 {
		t.Errorf("a %d-character name is a placeholder: %q", len(long), got)
	}
}

// FuzzFillVariables: filling never fails when every variable has a value,
// and text without "{{" comes back unchanged.
func FuzzFillVariables(f *testing.F) {
	for _, s := range []string{"a {{b}} c", `\{{x}}`, `\\{{x}}`, "{{ {{y}} }}", "}}{{", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		vals := map[string]string{}
		for _, v := range PromptVariables(s) {
			vals[v] = "<" + v + ">"
		}
		out, err := FillVariables(s, vals)
		if err != nil {
			t.Fatalf("FillVariables(%q) with every value: %v", s, err)
		}
		if !strings.Contains(s, "{{") && out != s {
			t.Fatalf("FillVariables(%q) = %q: text without braces changed", s, out)
		}
	})
}
