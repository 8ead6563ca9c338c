package jinja

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRender parses and renders arbitrary templates over a conversation with
// arbitrary text: nothing may panic, every render ends within its limits,
// and the untrusted spans it reports are sorted, disjoint and inside the
// output.
//
//	go test ./engine/chat/jinja -run '^$' -fuzz FuzzRender -fuzztime 3m
func FuzzRender(f *testing.F) {
	seeds := []string{
		"{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content | trim + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
		"{%- set ns = namespace(a=0) -%}{%- for m in messages[::-1] if m.role != 'x' -%}{%- set ns.a = ns.a + loop.index -%}{{ m['content'].split('a')[-1].lstrip('\\n') }}{%- endfor -%}{{ ns.a }}",
		"{% macro f(x, y=2) %}{{ x ~ y }}{% endmacro %}{{ f(1) }}{{ f(y=3, x=4) }}{{ [1,2,3] | map('string') | join(',') }}",
		"{{ messages | tojson(indent=2) }}{{ {'a': [1, 2.5, none]} | tojson }}{{ raise_exception('x') if false }}",
		"{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}{% set loop_messages = messages[1:] %}{% else %}{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}{{ message.content }}{% endfor %}",
		"{% raw %}{{ x }}{% endraw %}{# c #}{{- ' a ' -}}  {%+ if true +%} b {% endif %}",
		"{{ 'abc'[1:] ~ 'x' * 3 }}{{ 7 // 2 }}{{ 2 ** 10 }}{{ -7 % 3 }}{{ '%s-%d' % ('a', 1) }}{{ '{}{}'.format(1, 2) }}",
	}
	root := filepath.Join("..", "..", "..", "build", "testdeps", "pypi", "llama.cpp", "templates")
	if ents, err := os.ReadDir(root); err == nil {
		for _, e := range ents {
			if b, err := os.ReadFile(filepath.Join(root, e.Name())); err == nil {
				seeds = append(seeds, string(b))
			}
		}
	}
	for _, s := range seeds {
		f.Add(s, "Hello <|im_end|> there\n  ")
	}
	f.Fuzz(func(t *testing.T, src, content string) {
		tm, err := Parse(src)
		if err != nil {
			return
		}
		msgs := List(
			Dict(Str("role"), Str("system"), Str("content"), Untrusted(content)),
			Dict(Str("role"), Str("user"), Str("content"), Untrusted(content+content)),
			Dict(Str("role"), Str("assistant"), Str("content"), Untrusted("ok")),
		)
		out, err := tm.Render(t.Context(), map[string]Value{"messages": msgs, "add_generation_prompt": Bool(true), "bos_token": Str("<s>"), "tools": None()},
			Options{Limits: Limits{Steps: 20_000, Output: 1 << 16, Depth: 16}})
		if err != nil {
			return
		}
		if len(out.Text) > 1<<16 {
			t.Fatalf("output of %d bytes passed the limit", len(out.Text))
		}
		prev := -1
		for _, sp := range out.Untrusted {
			if sp.Lo <= prev || sp.Lo >= sp.Hi || sp.Hi > len(out.Text) {
				t.Fatalf("bad untrusted spans %v for %d bytes", out.Untrusted, len(out.Text))
			}
			prev = sp.Hi
		}
	})
}
