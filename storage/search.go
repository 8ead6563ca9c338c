package storage

import (
	"context"
	"database/sql"
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
}

// Segment is a run of snippet text; Match is true for a matched term.
type Segment struct {
	Text  string `json:"text"`
	Match bool   `json:"match"`
}

// SearchMessages finds messages containing every word of query (the last
// word also as a prefix), best match first, at most limit (default 50). The
// query is plain text, not FTS5 syntax: quotes, operators and punctuation are
// taken literally, so no user input is a syntax error.
func (d *DB) SearchMessages(ctx context.Context, query string, limit int) ([]SearchHit, error) {
	match := ftsQuery(query)
	if match == "" {
		return []SearchHit{}, nil
	}
	if limit <= 0 {
		limit = 50
	}
	rows, err := d.q.SearchMessages(ctx, db.SearchMessagesParams{MarkStart: markStart, MarkEnd: markEnd, Ellipsis: "…",
		Query: sql.NullString{String: match, Valid: true}, MaxResults: int64(limit)})
	if err != nil {
		return nil, d.fail("search messages", err)
	}
	out := make([]SearchHit, len(rows))
	for i, r := range rows {
		segs := splitSnippet(r.Snippet)
		var plain strings.Builder
		for _, s := range segs {
			plain.WriteString(s.Text)
		}
		out[i] = SearchHit{MessageID: r.ID, ConversationID: r.ConversationID, ParentID: idOut(r.ParentID), Role: r.Role,
			CreatedAt: fromMillis(r.CreatedAt), ConversationTitle: r.ConversationTitle, Snippet: plain.String(), Segments: segs}
	}
	return out, nil
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
