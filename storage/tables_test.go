package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestModelsRoundTrip(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	m, err := d.RegisterModel(ctx, ModelInput{Path: "/m/stories260K.gguf", Kind: "gguf", Name: "stories", Fingerprint: "fp1", SizeBytes: 1234,
		Meta: json.RawMessage(`{"arch":"llama","ctx":512}`)})
	if err != nil {
		t.Fatal(err)
	}
	noMeta, err := d.RegisterModel(ctx, ModelInput{Path: "/m/gemma", Kind: "safetensors", Fingerprint: "fp2"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.GetModel(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Path != m.Path || got.Kind != "gguf" || got.Name != "stories" || got.Fingerprint != "fp1" || got.SizeBytes != 1234 ||
		string(got.Meta) != `{"arch":"llama","ctx":512}` || !got.LastUsedAt.IsZero() || got.AddedAt.IsZero() {
		t.Errorf("model round trip: %+v", got)
	}
	if g, _ := d.GetModel(ctx, noMeta.ID); g.Meta != nil {
		t.Errorf("model without meta reads back meta %q, want nil (SQL NULL)", g.Meta)
	}
	// Re-registering the same path updates it in place.
	up, err := d.RegisterModel(ctx, ModelInput{Path: "/m/stories260K.gguf", Kind: "gguf", Fingerprint: "fp1b", SizeBytes: 99})
	if err != nil || up.ID != m.ID || up.Fingerprint != "fp1b" || up.Meta != nil || !up.AddedAt.Equal(got.AddedAt) {
		t.Errorf("re-register: %+v, %v", up, err)
	}
	if err := d.TouchModel(ctx, noMeta.ID); err != nil {
		t.Fatal(err)
	}
	list, err := d.ListModels(ctx)
	if err != nil || len(list) != 2 || list[0].ID != noMeta.ID || list[0].LastUsedAt.IsZero() {
		t.Errorf("ListModels: %+v, %v (want the touched model first)", list, err)
	}
	if byPath, err := d.ModelByPath(ctx, "/m/gemma"); err != nil || byPath.ID != noMeta.ID {
		t.Errorf("ModelByPath: %+v, %v", byPath, err)
	}
	if _, err := d.ModelByPath(ctx, "/nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown path: %v, want ErrNotFound", err)
	}
	if _, err := d.RegisterModel(ctx, ModelInput{Path: "/x", Kind: "gguf", Meta: json.RawMessage(`{bad`)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid meta JSON: %v, want ErrInvalid", err)
	}
	if err := d.DeleteModel(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteModel(ctx, m.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
}

// TestJSONColumnsAreBlobs checks the pqtype.NullRawMessage contract: JSON is
// stored as a BLOB (not TEXT), SQL NULL reads back as nil, the JSON literal
// null reads back as "null", and a TEXT value is rejected by the schema
// (NullRawMessage could not scan it).
func TestJSONColumnsAreBlobs(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	c, err := d.CreateConversation(ctx, ConversationInput{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		stats json.RawMessage
		typ   string
	}{
		{"object", json.RawMessage(`{"tokens":12,"tok_s":34.5,"drafted":[1,2]}`), "blob"},
		{"json null", json.RawMessage(`null`), "blob"},
		{"sql null", nil, "null"},
		{"unicode", json.RawMessage(`{"text":"héllo ✓ \u0000"}`), "blob"},
	}
	for _, tc := range cases {
		m, err := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleAssistant, Content: tc.name, Stats: tc.stats})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := d.GetMessage(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Stats, tc.stats) || (tc.stats == nil) != (got.Stats == nil) {
			t.Errorf("%s: stats read back %q, want %q", tc.name, got.Stats, tc.stats)
		}
		var typ string
		if err := d.SQL().QueryRow("SELECT typeof(stats) FROM messages WHERE id = ?", m.ID).Scan(&typ); err != nil || typ != tc.typ {
			t.Errorf("%s: typeof(stats) = %q, %v; want %q", tc.name, typ, err, tc.typ)
		}
	}
	// JSON written as TEXT by hand would not scan into NullRawMessage: the CHECK refuses it.
	if _, err := d.SQL().Exec("INSERT INTO messages (conversation_id, role, content, stats, created_at) VALUES (?, 'user', 'x', '{\"a\":1}', 0)", c.ID); err == nil {
		t.Error("a TEXT JSON value was accepted")
	}
	if _, err := d.SQL().Exec("INSERT INTO messages (conversation_id, role, content, stats, created_at) VALUES (?, 'user', 'x', CAST('{nope' AS BLOB), 0)", c.ID); err == nil {
		t.Error("an invalid JSON blob was accepted")
	}
	if _, err := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleUser, Content: "x", Stats: json.RawMessage(`{"a":`)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid stats JSON: %v, want ErrInvalid", err)
	}
	// SQL reads the BLOB JSON through CAST, as the schema comment says.
	var tokens int
	if err := d.SQL().QueryRow("SELECT json_extract(CAST(stats AS TEXT), '$.tokens') FROM messages WHERE content = 'object'").Scan(&tokens); err != nil || tokens != 12 {
		t.Errorf("json_extract over the blob: %d, %v", tokens, err)
	}
}

func TestConversationsRoundTrip(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	model, _ := d.RegisterModel(ctx, ModelInput{Path: "/m", Kind: "gguf", Fingerprint: "f"})
	p, _ := d.CreatePrompt(ctx, PromptInput{Title: "p"})
	c, err := d.CreateConversation(ctx, ConversationInput{Title: "First", ModelID: model.ID, PromptID: p.ID, SystemPrompt: "Be brief.",
		Options: json.RawMessage(`{"temperature":0.7,"width":4}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.GetConversation(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "First" || got.ModelID != model.ID || got.PromptID != p.ID || got.SystemPrompt != "Be brief." ||
		string(got.Options) != `{"temperature":0.7,"width":4}` || got.ActiveLeafID != 0 || got.CreatedAt.IsZero() {
		t.Errorf("conversation round trip: %+v", got)
	}
	bare, _ := d.CreateConversation(ctx, ConversationInput{})
	if g, _ := d.GetConversation(ctx, bare.ID); g.Options != nil || g.ModelID != 0 || g.PromptID != 0 {
		t.Errorf("bare conversation: %+v", g)
	}
	d.now = func() time.Time { return time.Now().Add(time.Hour) }
	up, err := d.UpdateConversation(ctx, c.ID, ConversationInput{Title: "Renamed", Options: json.RawMessage(`null`)})
	if err != nil || up.Title != "Renamed" || up.ModelID != 0 || string(up.Options) != "null" || up.PromptID != p.ID {
		t.Errorf("update: %+v, %v", up, err)
	}
	list, err := d.ListConversations(ctx, 0, 0)
	if err != nil || len(list) != 2 || list[0].ID != c.ID {
		t.Errorf("list (updated first): %+v, %v", list, err)
	}
	if page, _ := d.ListConversations(ctx, 1, 1); len(page) != 1 || page[0].ID != bare.ID {
		t.Errorf("page 2 of size 1: %+v", page)
	}
	// Deleting the model unlinks it; deleting the prompt too.
	d.DeleteModel(ctx, model.ID)
	d.DeletePrompt(ctx, p.ID)
	if g, _ := d.GetConversation(ctx, c.ID); g.ModelID != 0 || g.PromptID != 0 {
		t.Errorf("after deleting model and prompt: %+v", g)
	}
	if err := d.DeleteConversation(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.GetConversation(ctx, c.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted conversation: %v", err)
	}
	if _, err := d.UpdateConversation(ctx, c.ID, ConversationInput{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of a deleted conversation: %v", err)
	}
}

// TestMessageBranches builds
//
//	u1 ─ a1 ─ u2 ─ a2
//	   └ a1' (regenerate) ─ u2' (edit) ─ a3
//
// and checks branches, the tree, children and the active leaf.
func TestMessageBranches(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	c, _ := d.CreateConversation(ctx, ConversationInput{Title: "tree"})
	add := func(parent int64, role, content string) Message {
		t.Helper()
		m, err := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, ParentID: parent, Role: role, Content: content})
		if err != nil {
			t.Fatal(err)
		}
		if g, _ := d.GetConversation(ctx, c.ID); g.ActiveLeafID != m.ID {
			t.Fatalf("active leaf %d after appending %d", g.ActiveLeafID, m.ID)
		}
		return m
	}
	u1 := add(0, RoleUser, "hello")
	a1 := add(u1.ID, RoleAssistant, "hi")
	u2 := add(a1.ID, RoleUser, "how are you")
	a2 := add(u2.ID, RoleAssistant, "fine")
	a1b := add(u1.ID, RoleAssistant, "hello there")
	u2b := add(a1b.ID, RoleUser, "what is up")
	a3 := add(u2b.ID, RoleAssistant, "the sky")

	contents := func(ms []Message) string {
		var s []string
		for _, m := range ms {
			s = append(s, m.Content)
		}
		return strings.Join(s, "|")
	}
	if b, err := d.Branch(ctx, a2.ID); err != nil || contents(b) != "hello|hi|how are you|fine" {
		t.Errorf("branch to a2: %q, %v", contents(b), err)
	}
	if b, _ := d.ActiveBranch(ctx, c.ID); contents(b) != "hello|hello there|what is up|the sky" {
		t.Errorf("active branch: %q", contents(b))
	}
	if err := d.SetActiveLeaf(ctx, c.ID, a2.ID); err != nil {
		t.Fatal(err)
	}
	if b, _ := d.ActiveBranch(ctx, c.ID); contents(b) != "hello|hi|how are you|fine" {
		t.Errorf("active branch after SetActiveLeaf: %q", contents(b))
	}
	if kids, _ := d.Children(ctx, u1.ID); contents(kids) != "hi|hello there" {
		t.Errorf("children of u1: %q", contents(kids))
	}
	if sib, err := d.Siblings(ctx, a1b.ID); err != nil || contents(sib) != "hi|hello there" {
		t.Errorf("siblings of a1': %q, %v", contents(sib), err)
	}
	if sib, _ := d.Siblings(ctx, u1.ID); contents(sib) != "hello" {
		t.Errorf("siblings of the root: %q", contents(sib))
	}
	if _, err := d.Siblings(ctx, 99999); !errors.Is(err, ErrNotFound) {
		t.Errorf("siblings of a missing message: %v", err)
	}
	for from, want := range map[int64]int64{u1.ID: a3.ID, a1.ID: a2.ID, a2.ID: a2.ID, u2b.ID: a3.ID} {
		if leaf, err := d.LatestLeaf(ctx, from); err != nil || leaf != want {
			t.Errorf("latest leaf from %d: %d, %v; want %d", from, leaf, err, want)
		}
	}
	if _, err := d.LatestLeaf(ctx, 99999); !errors.Is(err, ErrNotFound) {
		t.Errorf("latest leaf of a missing message: %v", err)
	}
	tree, _ := d.Tree(ctx, c.ID)
	if len(tree) != 7 || tree[0].ID != u1.ID || tree[0].ParentID != 0 || tree[4].ParentID != u1.ID {
		t.Errorf("tree: %+v", tree)
	}

	// A parent from another conversation, an unknown parent, a bad role.
	other, _ := d.CreateConversation(ctx, ConversationInput{})
	if _, err := d.AppendMessage(ctx, MessageInput{ConversationID: other.ID, ParentID: a1.ID, Role: RoleUser, Content: "x"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("cross-conversation parent: %v, want ErrInvalid", err)
	}
	if _, err := d.SQL().Exec("INSERT INTO messages (conversation_id, parent_id, role, content, created_at) VALUES (?, ?, 'user', 'x', 0)", other.ID, a1.ID); err == nil {
		t.Error("the schema trigger let a cross-conversation parent in")
	}
	if _, err := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, ParentID: 99999, Role: RoleUser, Content: "x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown parent: %v, want ErrNotFound", err)
	}
	if _, err := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: "tool", Content: "x"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad role: %v, want ErrInvalid", err)
	}
	if err := d.SetActiveLeaf(ctx, other.ID, a1.ID); !errors.Is(err, ErrInvalid) {
		t.Errorf("active leaf from another conversation: %v", err)
	}
	if _, err := d.Branch(ctx, 99999); !errors.Is(err, ErrNotFound) {
		t.Errorf("branch of unknown message: %v", err)
	}

	// Deleting the regenerated answer drops its subtree; the active leaf
	// (a3, inside it) moves to its parent.
	if err := d.SetActiveLeaf(ctx, c.ID, a3.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteMessage(ctx, a1b.ID); err != nil {
		t.Fatal(err)
	}
	if tree, _ := d.Tree(ctx, c.ID); len(tree) != 4 {
		t.Errorf("tree after deleting a subtree: %d messages, want 4", len(tree))
	}
	if g, _ := d.GetConversation(ctx, c.ID); g.ActiveLeafID != u1.ID {
		t.Errorf("active leaf after deleting its subtree: %d, want %d", g.ActiveLeafID, u1.ID)
	}
	// Deleting a conversation deletes its messages.
	if err := d.DeleteConversation(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	var n int
	d.SQL().QueryRow("SELECT count(*) FROM messages").Scan(&n)
	if n != 0 {
		t.Errorf("%d messages left after deleting the conversation", n)
	}
}

func TestSearchMessages(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	c, _ := d.CreateConversation(ctx, ConversationInput{Title: "Cooking"})
	c2, _ := d.CreateConversation(ctx, ConversationInput{Title: "Travel"})
	m1, _ := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleUser, Content: "How long should I boil an egg for a soft yolk?"})
	m2, _ := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, ParentID: m1.ID, Role: RoleAssistant, Content: "Boil the egg for six minutes, then cool it in ice water."})
	d.AppendMessage(ctx, MessageInput{ConversationID: c2.ID, Role: RoleUser, Content: "Which café in Zürich serves the best breakfast?"})

	hits, err := d.SearchMessages(ctx, "egg boil", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 {
		t.Fatalf("egg boil: %d hits, want 2: %+v", len(hits), hits)
	}
	for _, h := range hits {
		if h.ConversationID != c.ID || h.ConversationTitle != "Cooking" || (h.MessageID != m1.ID && h.MessageID != m2.ID) {
			t.Errorf("hit: %+v", h)
		}
		var matched []string
		var plain strings.Builder
		for _, s := range h.Segments {
			plain.WriteString(s.Text)
			if s.Match {
				matched = append(matched, strings.ToLower(s.Text))
			}
		}
		if plain.String() != h.Snippet || strings.ContainsAny(h.Snippet, markStart+markEnd) {
			t.Errorf("snippet %q and segments %+v disagree", h.Snippet, h.Segments)
		}
		if strings.Join(matched, ",") != "boil,egg" && strings.Join(matched, ",") != "egg,boil" {
			t.Errorf("matched segments %v in %q", matched, h.Snippet)
		}
	}
	// Diacritics folded, prefix on the last word, case-insensitive.
	if hits, _ := d.SearchMessages(ctx, "CAFE zur", 10); len(hits) != 1 || hits[0].ConversationTitle != "Travel" {
		t.Errorf("CAFE zur: %+v", hits)
	}
	// Words are ANDed.
	if hits, _ := d.SearchMessages(ctx, "egg breakfast", 10); len(hits) != 0 {
		t.Errorf("egg breakfast: %+v", hits)
	}
	// The limit applies.
	if hits, _ := d.SearchMessages(ctx, "egg", 1); len(hits) != 1 {
		t.Errorf("limit 1: %d hits", len(hits))
	}
	// The index follows updates and deletes.
	if err := d.UpdateMessage(ctx, m2.ID, "Poach it instead.", json.RawMessage(`{"tokens":4}`)); err != nil {
		t.Fatal(err)
	}
	if hits, _ := d.SearchMessages(ctx, "poach", 10); len(hits) != 1 || hits[0].MessageID != m2.ID {
		t.Errorf("after update, poach: %+v", hits)
	}
	if hits, _ := d.SearchMessages(ctx, "minutes", 10); len(hits) != 0 {
		t.Errorf("after update, old text still found: %+v", hits)
	}
	d.DeleteConversation(ctx, c.ID)
	if hits, _ := d.SearchMessages(ctx, "egg", 10); len(hits) != 0 {
		t.Errorf("after delete: %+v", hits)
	}
	var n int
	if err := d.SQL().QueryRow("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')").Err(); err != nil {
		t.Errorf("FTS integrity check: %v", err)
	}
	d.SQL().QueryRow("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'egg'").Scan(&n)
	if n != 0 {
		t.Errorf("FTS still holds %d deleted rows", n)
	}
	// Text that is FTS5 syntax is taken literally, never an error.
	for _, q := range []string{`"`, `egg"`, `AND`, `OR NOT`, `NEAR(a b)`, `*`, `col:egg`, `(`, `^x`, `-`, "", "   ", "\uE000", `a"b"c`, `'; DROP TABLE messages; --`} {
		if _, err := d.SearchMessages(ctx, q, 5); err != nil {
			t.Errorf("query %q: %v", q, err)
		}
	}
}

func FuzzFTSQuery(f *testing.F) {
	for _, s := range []string{"egg", `"quoted"`, "a OR b", "NEAR(x y)", "zür*", "\uE000x\uE001", "-x", "日本語"} {
		f.Add(s)
	}
	d, err := Open(context.Background(), f.TempDir()+"/fuzz.db")
	if err != nil {
		f.Fatal(err)
	}
	defer d.Close()
	c, _ := d.CreateConversation(context.Background(), ConversationInput{})
	d.AppendMessage(context.Background(), MessageInput{ConversationID: c.ID, Role: RoleUser, Content: "egg zürich 日本語 quoted NEAR"})
	f.Fuzz(func(t *testing.T, q string) {
		if _, err := d.SearchMessages(context.Background(), q, 3); err != nil {
			t.Errorf("query %q (fts %q): %v", q, ftsQuery(q), err)
		}
	})
}

func TestSplitSnippet(t *testing.T) {
	got := splitSnippet("a " + markStart + "b" + markEnd + " c " + markStart + "d")
	want := []Segment{{"a ", false}, {"b", true}, {" c ", false}, {"d", true}}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("segment %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := splitSnippet(""); s == nil || len(s) != 0 {
		t.Errorf("empty: %+v", s)
	}
}

func TestPromptsRoundTrip(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	p, err := d.CreatePrompt(ctx, PromptInput{Title: "Translator", SystemPrompt: "You translate.", Body: "Translate to French:", Tags: []string{" Lang ", "work", "lang", ""}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Tags, ",") != "lang,work" {
		t.Errorf("tags %v, want [lang work]", p.Tags)
	}
	q, _ := d.CreatePrompt(ctx, PromptInput{Title: "Poet", Body: "Write a haiku", Tags: []string{"fun"}})
	got, err := d.GetPrompt(ctx, p.ID)
	if err != nil || got.Title != "Translator" || got.SystemPrompt != "You translate." || got.Body != "Translate to French:" ||
		strings.Join(got.Tags, ",") != "lang,work" || got.PinnedSnapshotID != 0 {
		t.Errorf("prompt round trip: %+v, %v", got, err)
	}
	if l, _ := d.ListPrompts(ctx, "LANG"); len(l) != 1 || l[0].ID != p.ID || len(l[0].Tags) != 2 {
		t.Errorf("by tag: %+v", l)
	}
	if l, _ := d.ListPrompts(ctx, ""); len(l) != 2 {
		t.Errorf("all prompts: %+v", l)
	}
	if tags, _ := d.ListTags(ctx); len(tags) != 3 || tags[0] != (TagCount{"fun", 1}) || tags[1] != (TagCount{"lang", 1}) {
		t.Errorf("tags: %+v", tags)
	}
	up, err := d.UpdatePrompt(ctx, p.ID, PromptInput{Title: "Translator FR", Body: "b", Tags: []string{"fun"}})
	if err != nil || up.Title != "Translator FR" || strings.Join(up.Tags, ",") != "fun" || up.SystemPrompt != "" {
		t.Errorf("update: %+v, %v", up, err)
	}
	if tags, _ := d.ListTags(ctx); len(tags) != 1 || tags[0] != (TagCount{"fun", 2}) {
		t.Errorf("tags after update: %+v", tags)
	}
	if _, err := d.CreatePrompt(ctx, PromptInput{Title: "  "}); !errors.Is(err, ErrInvalid) {
		t.Errorf("untitled prompt: %v", err)
	}
	// Pin a snapshot; deleting the snapshot row unpins.
	s, err := d.InsertSnapshot(ctx, SnapshotInput{FilePath: "a.kv", ModelFingerprint: "m", TokenizerFingerprint: "t", TokenCount: 10, Bytes: 5, PromptID: q.ID})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetPromptSnapshot(ctx, q.ID, s.ID); err != nil {
		t.Fatal(err)
	}
	if g, _ := d.GetPrompt(ctx, q.ID); g.PinnedSnapshotID != s.ID {
		t.Errorf("pinned snapshot %d, want %d", g.PinnedSnapshotID, s.ID)
	}
	if err := d.SetPromptSnapshot(ctx, q.ID, 12345); err == nil {
		t.Error("pinning a missing snapshot succeeded")
	}
	d.DeleteSnapshot(ctx, s.ID)
	if g, _ := d.GetPrompt(ctx, q.ID); g.PinnedSnapshotID != 0 {
		t.Errorf("pin survived the snapshot: %d", g.PinnedSnapshotID)
	}
	if err := d.DeletePrompt(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.GetPrompt(ctx, p.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted prompt: %v", err)
	}
	if tags, _ := d.ListTags(ctx); len(tags) != 1 || tags[0].Prompts != 1 {
		t.Errorf("tags after delete: %+v", tags)
	}
}

func TestSettingsRoundTrip(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	type opts struct {
		Width int     `json:"width"`
		Temp  float64 `json:"temp"`
	}
	if err := d.SetSetting(ctx, "generation", opts{Width: 4, Temp: 0.5}); err != nil {
		t.Fatal(err)
	}
	var o opts
	if found, err := d.GetSetting(ctx, "generation", &o); !found || err != nil || o != (opts{4, 0.5}) {
		t.Errorf("get: %+v %v %v", o, found, err)
	}
	// JSON null is a value, distinct from unset.
	if err := d.SetSettingRaw(ctx, "theme", json.RawMessage("null")); err != nil {
		t.Fatal(err)
	}
	if raw, found, err := d.SettingRaw(ctx, "theme"); !found || err != nil || string(raw) != "null" {
		t.Errorf("json null setting: %q %v %v", raw, found, err)
	}
	if raw, found, err := d.SettingRaw(ctx, "unset"); found || err != nil || raw != nil {
		t.Errorf("unset: %q %v %v", raw, found, err)
	}
	var typ string
	d.SQL().QueryRow("SELECT typeof(value) FROM settings WHERE key = 'theme'").Scan(&typ)
	if typ != "blob" {
		t.Errorf("setting stored as %s, want blob", typ)
	}
	if err := d.SetSetting(ctx, "generation", opts{Width: 8}); err != nil {
		t.Fatal(err)
	}
	all, err := d.Settings(ctx)
	if err != nil || len(all) != 2 || string(all["generation"]) != `{"width":8,"temp":0}` {
		t.Errorf("all settings: %q %v", all, err)
	}
	if err := d.SetSettingRaw(ctx, "x", json.RawMessage("{")); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid JSON: %v", err)
	}
	if err := d.SetSetting(ctx, "x", func() {}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unencodable value: %v", err)
	}
	if q, err := d.KVQuota(ctx); err != nil || q != DefaultKVQuotaBytes {
		t.Errorf("default quota: %d %v", q, err)
	}
	d.SetSetting(ctx, SettingKVQuotaBytes, 1<<20)
	if q, err := d.KVQuota(ctx); err != nil || q != 1<<20 {
		t.Errorf("quota: %d %v", q, err)
	}
	d.SetSetting(ctx, SettingKVQuotaBytes, "lots")
	if _, err := d.KVQuota(ctx); err == nil {
		t.Error("a string quota was accepted")
	}
	if err := d.DeleteSetting(ctx, "theme"); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := d.SettingRaw(ctx, "theme"); found {
		t.Error("deleted setting still found")
	}
}

func TestConstraintViolationsAreInvalid(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	in := SnapshotInput{FilePath: "dup.kv", ModelFingerprint: "m", TokenizerFingerprint: "t"}
	if _, err := d.InsertSnapshot(ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := d.InsertSnapshot(ctx, in); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "dup.kv") {
		t.Errorf("duplicate snapshot file: %v, want ErrInvalid naming the file", err)
	}
	if _, err := d.CreateConversation(ctx, ConversationInput{ModelID: 777}); !errors.Is(err, ErrInvalid) {
		t.Errorf("conversation with a missing model: %v, want ErrInvalid", err)
	}
}
