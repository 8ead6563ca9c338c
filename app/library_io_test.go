package app

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPromptLibraryExportImport(t *testing.T) {
	a, _, _ := start(t, nil)
	p1, _ := a.Library.Create(PromptInput{Title: "Pirate", SystemPrompt: "Talk like a pirate.", Body: "Tell me about {{topic}}.", Tags: []string{"Fun", "roleplay"}})
	a.Library.Create(PromptInput{Title: "Plain", Body: "Just a body <b>&</b>"})
	exp, err := a.Library.Export(nil)
	if err != nil {
		t.Fatal(err)
	}
	if exp.FileName != "anechat-prompts.json" || exp.MimeType != "application/json" || !strings.Contains(exp.Text, `"Just a body <b>&</b>"`) {
		t.Fatalf("export %+v", exp)
	}
	var f map[string]any
	if err := json.Unmarshal([]byte(exp.Text), &f); err != nil || f["format"] != "anechat.prompts" || f["version"] != 1.0 {
		t.Fatalf("export JSON %v (%v)", f, err)
	}
	one, err := a.Library.Export([]int64{p1.ID})
	if err != nil || strings.Count(one.Text, `"title"`) != 1 {
		t.Fatalf("export of one prompt: %s, %v", one.Text, err)
	}

	// Into an empty library: the same prompts, tags and variables.
	b, _, _ := start(t, nil)
	res, err := b.Library.Import(exp.Text)
	if err != nil || len(res.Created) != 2 || len(res.Skipped) != 0 {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	got, _ := b.Library.List("", "pirate")
	if len(got) != 1 || got[0].SystemPrompt != "Talk like a pirate." || strings.Join(got[0].Tags, ",") != "fun,roleplay" ||
		strings.Join(got[0].Variables, ",") != "topic" || got[0].Snapshot != nil {
		t.Fatalf("imported %+v", got)
	}
	// Importing again adds nothing.
	if res, err := b.Library.Import(exp.Text); err != nil || len(res.Created) != 0 || len(res.Skipped) != 2 {
		t.Fatalf("second import = %+v, %v", res, err)
	}

	for _, c := range []struct{ text, want string }{
		{``, "the file is empty"},
		{`{"format": "anechat.prompts", "version": 1, "prompts": [`, "not valid JSON"},
		{`[1, 2]`, "found a JSON array where an object belongs"},
		{`{"format": "other", "version": 1, "prompts": []}`, `format "other": this is not an anechat prompt library file`},
		{`{"format": "anechat.prompts", "version": 9, "prompts": []}`, "version 9 is newer than this anechat reads (1)"},
		{`{"format": "anechat.prompts", "version": 1}`, `no "prompts" list`},
		{`{"format": "anechat.prompts", "version": 1, "prompts": [{"title": "ok", "body": "b"}, {"title": " ", "body": "x"}]}`, "prompts[1].title: a prompt needs a title"},
		{`{"format": "anechat.prompts", "version": 1, "prompts": [{"title": "Empty"}]}`, `prompts[0] ("Empty"): neither a systemPrompt nor a body`},
		{`{"format": "anechat.prompts", "version": 1, "prompts": [{"title": "T", "body": "b", "tags": ["x", " "]}]}`, `prompts[0] ("T").tags[1]: an empty tag`},
		{`{"format": "anechat.prompts", "version": 1, "prompts": [{"title": "T", "bodyy": "b"}]}`, `unknown field "bodyy"`},
		{`{"format": "anechat.prompts", "version": 1, "prompts": [{"title": 5}]}`, "prompts[0]: title: want a string, found a JSON number"},
		{`{"format": "anechat.prompts", "version": 1, "prompts": []} {}`, "more than one JSON value"},
	} {
		c2, _, _ := start(t, nil)
		_, err := c2.Library.Import(c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Import(%.60q) = %v, want %q", c.text, err, c.want)
		}
		if ps, _ := c2.Library.List("", ""); len(ps) != 0 {
			t.Errorf("a rejected import added %d prompts", len(ps))
		}
	}
}
