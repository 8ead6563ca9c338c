package app

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"anechat/internal/testres"
)

// timedRecorder is a recorder that notes when each reply's first token came.
type timedRecorder struct {
	*recorder
	mu    sync.Mutex
	first map[int64]time.Time // parent (user message) id -> first token
}

func (r *timedRecorder) Emit(name string, data any) {
	if te, ok := data.(TokenEvent); ok && name == EventToken {
		r.mu.Lock()
		if _, seen := r.first[te.ParentID]; !seen {
			r.first[te.ParentID] = time.Now()
		}
		r.mu.Unlock()
	}
	r.recorder.Emit(name, data)
}

// TestDocumentTTFT measures the time to first token of a first and a second
// question about a ~3,000-token document on SmolLM2 (BENCHMARKS.md, issue
// 23 section 4). It is a measurement, not a timed assertion: it runs only
// with ANECHAT_BENCH_DOC=1 and asserts only that the second question
// resumed the document.
//
//	ANECHAT_BENCH_DOC=1 go test -count=1 -run TestDocumentTTFT -v ./app/
func TestDocumentTTFT(t *testing.T) {
	if os.Getenv("ANECHAT_BENCH_DOC") == "" {
		t.Skip("a benchmark: set ANECHAT_BENCH_DOC=1")
	}
	path := testres.SmolLM2GGUF(t)
	g := NewEngineGenerator(nil)
	defer g.Close()
	rec := &timedRecorder{recorder: newRecorder(), first: map[int64]time.Time{}}
	a := New(Options{DataDir: t.TempDir(), Version: "test", Generator: g})
	a.Startup(t.Context(), rec)
	defer a.Shutdown()
	m, err := a.Models.Register(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Settings.Update(Preferences{SpeculationWidth: 1, KVQuotaBytes: 1 << 30, DefaultModelID: m.ID, MaxTokens: 8}); err != nil {
		t.Fatal(err)
	}
	c, _ := a.Chat.CreateConversation(NewConversation{})
	var doc strings.Builder
	for i := 1; i <= 118; i++ {
		fmt.Fprintf(&doc, "Entry %d: the lighthouse keeper counted %d gulls on the rocks and wrote it in the log.\n", i, i*7%97)
	}
	att, err := a.Chat.AttachDocument(c.ID, "log.txt", b64(doc.String()))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(n int, text string) (time.Duration, DoneEvent) {
		t.Helper()
		t0 := time.Now()
		turn, err := a.Chat.Send(c.ID, text)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Minute)
		for len(rec.named(EventDone)) < n {
			if time.Now().After(deadline) {
				t.Fatal("no reply within 10 minutes")
			}
			time.Sleep(10 * time.Millisecond)
		}
		rec.mu.Lock()
		ft := rec.first[turn.User.ID]
		rec.mu.Unlock()
		return ft.Sub(t0), rec.named(EventDone)[n-1].(DoneEvent)
	}
	ttft1, d1 := ask(1, att.Block+"\nHow many gulls did the keeper count in entry 12?")
	ttft2, d2 := ask(2, "And in entry 40?")
	t.Logf("document %d tokens (context %d)", att.Tokens, att.ContextTokens)
	t.Logf("first question:  TTFT %v (prefilled %d, resumed %d)", ttft1.Round(time.Millisecond), d1.Stats.PrefillTokens, d1.Stats.ResumedTokens)
	t.Logf("second question: TTFT %v (prefilled %d, resumed %d)", ttft2.Round(time.Millisecond), d2.Stats.PrefillTokens, d2.Stats.ResumedTokens)
	if d2.Stats.ResumedTokens < att.Tokens {
		t.Fatalf("second question resumed %d tokens, want the document's %d", d2.Stats.ResumedTokens, att.Tokens)
	}
}
