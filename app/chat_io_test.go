package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"anechat/storage"
)

// branched makes a conversation with an edit and a regeneration.
func branched(t *testing.T) (*App, storage.Conversation, *scripted) {
	t.Helper()
	gen := &scripted{pieces: []string{"an answer"}}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	c, _ := a.Chat.CreateConversation(NewConversation{Title: "Branches", PromptID: 0})
	a.Chat.SetSystemPrompt(c.ID, "Be brief.")
	first := sendAndWait(t, a, rec, c.ID, "first question")
	sendAndWait(t, a, rec, c.ID, "follow-up")
	before := len(rec.named(EventDone))
	if _, err := a.Chat.Regenerate(first.Message.ID); err != nil {
		t.Fatal(err)
	}
	rec.waitCount(t, EventDone, before+1)
	before++
	if _, err := a.Chat.Edit(first.Message.ParentID, "first question, edited"); err != nil {
		t.Fatal(err)
	}
	rec.waitCount(t, EventDone, before+1)
	c, _ = a.Chat.SetPinned(c.ID, true)
	return a, c, gen
}

func TestConversationExportMarkdown(t *testing.T) {
	a, c, _ := branched(t)
	md, err := a.Chat.Export(c.ID, ExportMarkdown)
	if err != nil {
		t.Fatal(err)
	}
	if md.FileName != "Branches.md" || md.MimeType != "text/markdown" {
		t.Fatalf("export %+v", md)
	}
	for _, want := range []string{"# Branches\n", "; model m._", "## System\n\nBe brief.", "## You\n\nfirst question, edited", "## Assistant (m)\n\nan answer"} {
		if !strings.Contains(md.Text, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.Text)
		}
	}
	// The branch on screen only.
	if strings.Contains(md.Text, "follow-up") || strings.Contains(md.Text, "first question\n") {
		t.Errorf("markdown holds other branches:\n%s", md.Text)
	}
	if _, err := a.Chat.Export(c.ID, "pdf"); err == nil {
		t.Fatal("export as pdf succeeded")
	}
}

func TestConversationJSONRoundTripKeepsTheTree(t *testing.T) {
	a, c, _ := branched(t)
	js, err := a.Chat.Export(c.ID, ExportJSON)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := a.Chat.Thread(c.ID)
	res, err := a.Chat.Import(js.Text)
	if err != nil || len(res.Warnings) != 0 {
		t.Fatalf("import: %v, warnings %q", err, res.Warnings)
	}
	imp := res.Conversation
	got, _ := a.Chat.Thread(imp.ID)
	if imp.ID == c.ID || imp.Title != "Branches" || imp.TitleSource != storage.TitleImport || !imp.Pinned ||
		imp.SystemPrompt != "Be brief." || imp.ModelID != c.ModelID || !imp.CreatedAt.Equal(want.Conversation.CreatedAt) {
		t.Fatalf("imported conversation %+v", imp)
	}
	if len(got.Messages) != len(want.Messages) || len(got.Path) != len(want.Path) {
		t.Fatalf("imported %d messages, path %v; want %d, %v", len(got.Messages), got.Path, len(want.Messages), want.Path)
	}
	// Same tree: each message has the same role, text, stats, time and
	// parent (mapped to the new ids), and the same branch is on screen.
	idMap := map[int64]int64{0: 0}
	for i, w := range want.Messages {
		g := got.Messages[i]
		idMap[w.ID] = g.ID
		if g.Role != w.Role || g.Content != w.Content || g.ParentID != idMap[w.ParentID] || !g.CreatedAt.Equal(w.CreatedAt) ||
			string(g.Stats) != string(w.Stats) {
			t.Fatalf("message %d: %+v, want %+v", i, g, w)
		}
	}
	for i := range want.Path {
		if got.Path[i] != idMap[want.Path[i]] {
			t.Fatalf("path %v, want %v mapped", got.Path, want.Path)
		}
	}
	// A second export of the copy is the same file (but for its time).
	js2, _ := a.Chat.Export(imp.ID, ExportJSON)
	strip := func(s string) string {
		var f conversationFile
		json.Unmarshal([]byte(s), &f)
		f.ExportedAt = f.ExportedAt.Truncate(1e18)
		b, _ := json.Marshal(f)
		return string(b)
	}
	if strip(js.Text) != strip(js2.Text) {
		t.Fatalf("re-export differs:\n%s\n%s", js.Text, js2.Text)
	}
}

func TestConversationImportErrorsNameTheField(t *testing.T) {
	a, _, _ := start(t, nil)
	head := `{"format": "anechat.conversation", "version": 1, "conversation": {"title": "T"}, `
	for _, c := range []struct{ text, want string }{
		{`{"format": "anechat.prompts", "version": 1}`, `format "anechat.prompts": this is not an anechat conversation file`},
		{`{"format": "anechat.conversation", "version": 2, "conversation": {"title": "T"}, "messages": []}`, "version 2 is newer"},
		{`{"format": "anechat.conversation", "version": 1, "conversation": {"title": ""}, "messages": []}`, "conversation.title: a conversation needs a title"},
		{head + `"activeLeaf": null}`, `no "messages" list`},
		{head + `"messages": [{"id": 1, "parent": 2, "role": "user", "content": "a"}, {"id": 2, "parent": null, "role": "user", "content": "b"}], "activeLeaf": 1}`,
			"messages[0].parent: 2 is not the id of an earlier message"},
		{head + `"messages": [{"id": 1, "parent": null, "role": "robot", "content": "a"}], "activeLeaf": 1}`, `messages[0].role: "robot"`},
		{head + `"messages": [{"id": 1, "parent": null, "role": "user", "content": "a"}, {"id": 1, "parent": null, "role": "user", "content": "b"}], "activeLeaf": 1}`,
			"messages[1].id: 1 is used twice"},
		{head + `"messages": [{"id": 0, "parent": null, "role": "user", "content": "a"}], "activeLeaf": 0}`, "messages[0].id: 0: want a positive whole number"},
		{head + `"messages": [{"id": 1, "parent": null, "role": "user", "content": "a"}], "activeLeaf": 5}`, "activeLeaf: 5 is not the id of a message"},
		{head + `"messages": [{"id": 1, "parent": null, "role": "user", "content": "a"}]}`, "activeLeaf: missing"},
		{head + `"messages": [{"id": 1, "parent": null, "role": "user", "content": 7}], "activeLeaf": 1}`, "messages[0]: content: want a string"},
		{head + `"messages": [{"id": 1, "parent": null, "role": "user", "content": "a", "stats": {"tokens": "x"}}], "activeLeaf": 1}`, "messages[0].stats"},
		{head + `"messages": [], "extra": 1}`, `unknown field "extra"`},
		{`{"format": "anechat.conversation", "version": 1, "conversation": {"title": "T", "options": {"temperature": 9}}, "messages": []}`, "conversation.options: chat: temperature 9"},
	} {
		_, err := a.Chat.Import(c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Import(%.70q) = %v, want %q", c.text, err, c.want)
		}
	}
	if list, _ := a.Chat.ListConversations(); len(list) != 0 {
		t.Fatalf("rejected imports stored %d conversations", len(list))
	}
	// A minimal valid file.
	c, err := a.Chat.Import(head + `"messages": [{"id": 7, "parent": null, "role": "user", "content": "hi"}, {"id": 9, "parent": 7, "role": "assistant", "content": "hello"}], "activeLeaf": 9}`)
	if err != nil {
		t.Fatal(err)
	}
	th, _ := a.Chat.Thread(c.Conversation.ID)
	if len(th.Path) != 2 || th.Messages[1].Content != "hello" || th.Messages[1].ParentID != th.Messages[0].ID {
		t.Fatalf("imported thread %+v", th)
	}
}

// Drafted spans that do not fit their message (out of range, reversed,
// overlapping, not whole numbers, too many) are left out of that message's
// stats, with a warning naming the message, the span and why; everything
// else is imported as it was.
func TestConversationImportDropsSpansThatDoNotFit(t *testing.T) {
	a, _, _ := start(t, nil)
	many := make([][2]int, 100_000)
	for i := range many {
		many[i] = [2]int{i, i + 1}
	}
	manyJSON, _ := json.Marshal(many)
	const text = "héllo 😀 world" // 14 UTF-16 units (é is one, 😀 two), 17 bytes
	cases := []struct{ spans, want string }{
		{`[[0, 5], [9, 14]]`, ""}, // fits: kept
		{`[[0, 1099511627776]]`, "[0]: [0, 1099511627776]: ends past the text's 14 UTF-16 units"},
		{`[[0, 15]]`, "[0]: [0, 15]: ends past the text's 14 UTF-16 units"},
		{`[[5, 2]]`, "[0]: [5, 2]: ends before it starts"},
		{`[[3, 3]]`, "[0]: [3, 3]: ends before it starts (or where it starts)"},
		{`[[-1, 2]]`, "[0]: [-1, 2]: starts before the text"},
		{`[[0, 4], [3, 6]]`, "[1]: [3, 6]: starts before the span before it ends (4)"},
		{`[[6, 8], [0, 2]]`, "[1]: [0, 2]: starts before the span before it ends (8)"},
		{`[[0.5, 2]]`, "[0]: [0.5, 2]: want whole numbers"},
		{`[[1, 2, 3]]`, "[0]: [1, 2, 3]: want [start, end]"},
		{`[["a", 2]]`, `[0]: ["a", 2]: want [start, end]`},
		{`"x"`, ": want a list of [start, end] pairs"},
		{string(manyJSON), "[14]: [14, 15]: ends past the text's 14 UTF-16 units"},
	}
	var msgs []string
	msgs = append(msgs, `{"id": 1, "parent": null, "role": "user", "content": "hi"}`)
	for i, c := range cases {
		msgs = append(msgs, fmt.Sprintf(`{"id": %d, "parent": 1, "role": "assistant", "content": %q, "stats": {"tokens": 7, "future": "<kept>", "draftedSpans": %s}}`, i+2, text, c.spans))
	}
	file := `{"format": "anechat.conversation", "version": 1, "conversation": {"title": "T"}, "messages": [` +
		strings.Join(msgs, ", ") + fmt.Sprintf(`], "activeLeaf": %d}`, len(cases)+1)
	res, err := a.Chat.Import(file)
	if err != nil {
		t.Fatal(err)
	}
	// One warning per message at fault, at most maxImportWarnings: the last
	// counts the rest.
	bad := len(cases) - 1
	if len(res.Warnings) != maxImportWarnings || !strings.Contains(res.Warnings[maxImportWarnings-1], fmt.Sprintf("and %d more", bad-maxImportWarnings+1)) {
		t.Fatalf("%d warnings %q; want %d, the last counting the rest", len(res.Warnings), res.Warnings, maxImportWarnings)
	}
	for i, c := range cases[1:maxImportWarnings] {
		want := fmt.Sprintf("messages[%d].stats.draftedSpans%s", i+2, c.want)
		if w := res.Warnings[i]; !strings.HasPrefix(w, want) || !strings.HasSuffix(w, "the message was imported without its drafted highlighting") {
			t.Errorf("warning %d: %q, want it to start %q", i, w, want)
		}
	}
	th, err := a.Chat.Thread(res.Conversation.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		m := th.Messages[i+1]
		var st struct {
			GenerateStats
			Future string `json:"future"`
		}
		if err := json.Unmarshal(m.Stats, &st); err != nil || st.Tokens != 7 || st.Future != "<kept>" || m.Content != text {
			t.Fatalf("message %d: %s, %q (%v)", i+1, m.Stats, m.Content, err)
		}
		if c.want == "" {
			if !reflect.DeepEqual(st.DraftedSpans, [][2]int{{0, 5}, {9, 14}}) {
				t.Errorf("message %d: spans that fit became %v", i+1, st.DraftedSpans)
			}
		} else if bytes.Contains(m.Stats, []byte("draftedSpans")) {
			t.Errorf("message %d kept spans that do not fit: %s", i+1, m.Stats)
		}
	}
}
