package app

import (
	"encoding/base64"
	"os"
	"strings"
	"testing"

	"anechat/internal/documents"
	"anechat/internal/sessions"
	"anechat/internal/testres"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// A document attached to a message is sized in the model's tokens, refused
// past the context, and, being part of the stored message, its KV snapshot
// makes the second question about it resume instead of prefilling it again.
func TestChatAttachDocumentThenSecondQuestionResumesIt(t *testing.T) {
	path := testres.Stories(t)
	g := NewEngineGenerator(nil)
	defer g.Close()
	a, rec, _ := start(t, g)
	m, err := a.Models.Register(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Settings.Update(Preferences{SpeculationWidth: 1, KVQuotaBytes: 1 << 30, DefaultModelID: m.ID, MaxTokens: 4}); err != nil {
		t.Fatal(err)
	}
	c, _ := a.Chat.CreateConversation(NewConversation{})
	doc := strings.Repeat("Lily went to the park with her mom and they played with a big red ball. ", 6)
	att, err := a.Chat.AttachDocument(c.ID, "story.md", b64(doc))
	if err != nil {
		t.Fatal(err)
	}
	if att.Block != documents.Format("story.md", doc, "") || att.ContextTokens <= 0 {
		t.Fatalf("attachment %+v", att)
	}
	var want int
	if err := g.Sessions().Do(t.Context(), path, func(sm *sessions.Model) error {
		want = len(sm.Tokenizer().Encode(att.Block))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if att.Tokens != want || want < 64 {
		t.Fatalf("tokens = %d, want %d (the model's tokenizer, over one block)", att.Tokens, want)
	}

	// One format: the block, then the question, as documents.Format puts it.
	q1 := att.Block + "\nWho went to the park?"
	if q1 != documents.Format("story.md", doc, "Who went to the park?") {
		t.Fatalf("message %q is not documents.Format's", q1)
	}
	if _, err := a.Chat.Send(c.ID, q1); err != nil {
		t.Fatal(err)
	}
	first := rec.waitFor(t, EventDone).(DoneEvent)
	if _, err := a.Chat.Send(c.ID, "What color was the ball?"); err != nil {
		t.Fatal(err)
	}
	second := rec.waitCount(t, EventDone, 2)[1].(DoneEvent)
	if first.Stats.ResumedTokens != 0 || first.Stats.PrefillTokens < att.Tokens {
		t.Fatalf("first question %+v: want the document prefilled", first.Stats)
	}
	if second.Message == nil || second.Stats.ResumedTokens < att.Tokens {
		t.Fatalf("second question %+v: want the document's %d tokens resumed", second.Stats, att.Tokens)
	}
	th, err := a.Chat.Thread(c.ID)
	if err != nil || len(th.Messages) != 4 || th.Messages[0].Content != q1 {
		t.Fatalf("thread %+v (%v): want the document stored in the first message", th, err)
	}

	// Past the context: refused with the size, nothing sent.
	_, err = a.Chat.AttachDocument(c.ID, "huge.txt", b64(strings.Repeat(doc, 40)))
	if err == nil || !strings.Contains(err.Error(), "huge.txt: ") || !strings.Contains(err.Error(), "context") {
		t.Fatalf("huge document: err = %v, want a refusal naming the file and the context", err)
	}
	for _, tc := range []struct{ name, data, want string }{
		{"bin.png", "\x89PNG\x00", "not UTF-8"},
		{"bad.pdf", "%PDF-1.4\n", "damaged"},
	} {
		if _, err := a.Chat.AttachDocument(c.ID, tc.name, b64(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	// A real PDF (internal/documents/testdata, a committed fixture): its text.
	pdfBytes, err := os.ReadFile("../internal/documents/testdata/two-pages.pdf")
	if err != nil {
		t.Fatal(err)
	}
	pa, err := a.Chat.AttachDocument(c.ID, "two-pages.pdf", base64.StdEncoding.EncodeToString(pdfBytes))
	if err != nil || pa.Block != "```two-pages.pdf\nHello from page one\n\nSecond page text\n```\n" || pa.Tokens <= 0 {
		t.Fatalf("PDF attachment %+v, %v", pa, err)
	}
	if _, err := a.Chat.AttachDocument(c.ID, "x.txt", "%%%"); err == nil || !strings.Contains(err.Error(), "x.txt") {
		t.Errorf("bad base64: err = %v", err)
	}
}
