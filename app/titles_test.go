package app

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTitleFromText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Hello there", "Hello there"},
		{"  \n\n  # How do   tides\twork?\nmore text", "How do tides work?"},
		{"> quoted question", "quoted question"},
		{"- a list item", "a list item"},
		{"```\ncode\n```", "code"},
		{"", ""},
		{"   \n\t", ""},
		{"Explain the difference between a lighthouse keeper and a harbour master in the nineteenth century",
			"Explain the difference between a lighthouse keeper and a…"},
		{strings.Repeat("x", 80), strings.Repeat("x", MaxTitleRunes-1) + "…"},
		{"Ünïcödé " + strings.Repeat("é", 70), "Ünïcödé " + strings.Repeat("é", MaxTitleRunes-1-len([]rune("Ünïcödé "))) + "…"},
	} {
		got := TitleFromText(c.in)
		if got != c.want {
			t.Errorf("TitleFromText(%q) = %q, want %q", c.in, got, c.want)
		}
		if n := utf8.RuneCountInString(got); n > MaxTitleRunes {
			t.Errorf("TitleFromText(%q) has %d characters, more than %d", c.in, n, MaxTitleRunes)
		}
	}
}

func TestCleanModelTitle(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Tides Explained", "Tides Explained"},
		{"  \"Tides Explained\".\nThe moon pulls…", "Tides Explained"},
		{"Title: **How Tides Work**", "How Tides Work"},
		{"title - no label here", "title - no label here"},
		{"\n\n", ""},
		{"''", ""},
	} {
		if got := cleanModelTitle(c.in); got != c.want {
			t.Errorf("cleanModelTitle(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
