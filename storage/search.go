package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"strings"
	"time"
	"unicode"

	"anechat/storage/db"
)

// Markers that SearchMessages puts around matched terms inside a raw snippet
// before splitting it into segments (Unicode private-use code points, which
// message text is not expected to contain).
const (
	markStart = "\uE000"
	markEnd   = "\uE001"
)

// SearchHit is one message matching a full-text search.
type SearchHit struct {
	MessageID         int64     `json:"messageId"`
	ConversationID    int64     `json:"conversationId"`
	ParentID          int64     `json:"parentId"`
	Role              string    `json:"role"`
	CreatedAt         time.Time `json:"createdAt"`
	ConversationTitle string    `json:"conversationTitle"`
	// Snippet is the matching excerpt as plain text ("…" marks cuts);
	// Segments is the same text split into matched and unmatched runs, so a
	// UI can highlight matches without interpreting markup.
	Snippet  string    `json:"snippet"`
	Segments []Segment `json:"segments"`
	// OnActiveBranch: the message is on the branch its conversation shows.
	// Otherwise opening the hit means selecting its branch first.
	OnActiveBranch bool `json:"onActiveBranch"`
	// Alternative is the message's place (1-based) among its alternatives
	// (its siblings: edits or regenerations of one turn), Alternatives how
	// many there are (1 when it has none).
	Alternative  int `json:"alternative"`
	Alternatives int `json:"alternatives"`
	// Duplicates counts the other matching messages folded into this hit:
	// copies of it on other branches (a regenerated answer that came out
	// the same, an edit that changed nothing), same text after the same
	// conversation.
	Duplicates int `json:"duplicates"`
}

// Segment is a run of snippet text; Match is true for a matched term.
type Segment struct {
	Text  string `json:"text"`
	Match bool   `json:"match"`
}

// SearchMessages finds messages containing every word of query (the last
// word also as a prefix), best match first, at most limit (default 50). The
// query is plain text, not FTS5 syntax: quotes, operators and punctuation are
// taken literally, so no user input is a syntax error. Deleted conversations
// are not searched.
//
// Branches repeat text: a regenerated answer may come out as before, and
// everything above a branch point is shared by design. Matches are grouped
// by message path (the conversation and the roles and texts from its root
// down to the message); each group is one hit, the message on the branch on
// screen when the group has one, else the best match (the newest among
// equals), with Duplicates counting the rest.
func (d *DB) SearchMessages(ctx context.Context, query string, limit int) ([]SearchHit, error) {
	match := ftsQuery(query)
	if match == "" {
		return []SearchHit{}, nil
	}
	if limit <= 0 {
		limit = 50
	}
	// Folding shrinks the list: read more rows than asked for.
	rows, err := d.q.SearchMessages(ctx, db.SearchMessagesParams{MarkStart: markStart, MarkEnd: markEnd, Ellipsis: "…",
		Query: sql.NullString{String: match, Valid: true}, MaxResults: int64(min(limit*4, limit+500))})
	if err != nil {
		return nil, d.fail("search messages", err)
	}
	type group struct {
		hit    SearchHit
		active bool
	}
	var groups []*group
	byPath := map[string]*group{}
	active := map[int64]map[int64]bool{} // conversation -> ids on its active branch
	for _, r := range rows {
		onActive, err := d.onActiveBranch(ctx, active, r.ConversationID, idOut(r.ActiveLeafID), r.ID)
		if err != nil {
			return nil, err
		}
		key, err := d.pathKey(ctx, r.ConversationID, r.ID)
		if err != nil {
			return nil, err
		}
		segs := splitSnippet(r.Snippet)
		var plain strings.Builder
		for _, s := range segs {
			plain.WriteString(s.Text)
		}
		h := SearchHit{MessageID: r.ID, ConversationID: r.ConversationID, ParentID: idOut(r.ParentID), Role: r.Role,
			CreatedAt: fromMillis(r.CreatedAt), ConversationTitle: r.ConversationTitle, Snippet: plain.String(), Segments: segs,
			OnActiveBranch: onActive}
		if g, ok := byPath[key]; ok {
			g.hit.Duplicates++
			if onActive && !g.active {
				h.Duplicates = g.hit.Duplicates
				g.hit, g.active = h, true
			}
			continue
		}
		g := &group{hit: h, active: onActive}
		byPath[key] = g
		groups = append(groups, g)
	}
	out := make([]SearchHit, 0, min(len(groups), limit))
	for _, g := range groups[:min(len(groups), limit)] {
		sib, err := d.q.ListSiblings(ctx, g.hit.MessageID)
		if err != nil {
			return nil, d.fail("search messages", err)
		}
		g.hit.Alternatives = max(len(sib), 1)
		g.hit.Alternative = 1
		for i, m := range sib {
			if m.ID == g.hit.MessageID {
				g.hit.Alternative = i + 1
			}
		}
		out = append(out, g.hit)
	}
	return out, nil
}

// onActiveBranch reports whether message id lies on the branch ending at
// leaf, caching each conversation's branch in cache.
func (d *DB) onActiveBranch(ctx context.Context, cache map[int64]map[int64]bool, conv, leaf, id int64) (bool, error) {
	ids, ok := cache[conv]
	if !ok {
		ids = map[int64]bool{}
		if leaf != 0 {
			ms, err := d.q.ListBranch(ctx, leaf)
			if err != nil {
				return false, d.fail("search messages", err)
			}
			for _, m := range ms {
				ids[m.ID] = true
			}
		}
		cache[conv] = ids
	}
	return ids[id], nil
}

// pathKey identifies message id by its path: the conversation and a hash of
// the roles and texts from the root down to it.
func (d *DB) pathKey(ctx context.Context, conv, id int64) (string, error) {
	ms, err := d.q.ListBranch(ctx, id)
	if err != nil {
		return "", d.fail("search messages", err)
	}
	h := sha256.New()
	for _, m := range ms {
		fmt.Fprintf(h, "%s %d\n%s\x00", m.Role, len(m.Content), m.Content)
	}
	return fmt.Sprintf("%d:%x", conv, h.Sum(nil)), nil
}

// ftsQuery turns plain text into an FTS5 query: each word becomes a quoted
// string (quotes doubled), words are ANDed, and the last word matches as a
// prefix. Words are split where the unicode61 tokenizer splits (anything but
// letters, digits and marks), so every phrase holds at least one token.
// Returns "" when the text has no word.
func ftsQuery(text string) string {
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)) || r == '\uE000' || r == '\uE001'
	})
	if len(words) == 0 {
		return ""
	}
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(w, `"`, `""`))
		b.WriteByte('"')
	}
	b.WriteString(" *")
	return b.String()
}

// splitSnippet splits a snippet with markers into segments.
func splitSnippet(s string) []Segment {
	var segs []Segment
	for s != "" {
		i := strings.Index(s, markStart)
		if i < 0 {
			segs = append(segs, Segment{Text: s})
			break
		}
		if i > 0 {
			segs = append(segs, Segment{Text: s[:i]})
		}
		s = s[i+len(markStart):]
		j := strings.Index(s, markEnd)
		if j < 0 {
			j = len(s)
		}
		if j > 0 {
			segs = append(segs, Segment{Text: s[:j], Match: true})
		}
		s = s[min(j+len(markEnd), len(s)):]
	}
	if segs == nil {
		segs = []Segment{}
	}
	return segs
}
