// Package documents turns a file the user attaches to a chat message into
// the text that goes into the message's prompt: plain text, Markdown and
// source files as they are (UTF-8 checked), PDFs through a text extractor.
// Every step is bounded (input bytes, pages, extracted bytes, time through
// the context) and every refusal names the file and what to do.
package documents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// Limits bound the work of Extract.
type Limits struct {
	// MaxInputBytes is the largest file accepted.
	MaxInputBytes int
	// MaxPages is the most PDF pages read.
	MaxPages int
	// MaxTextBytes is the most extracted text kept; past it Extract fails
	// rather than cut the document silently.
	MaxTextBytes int
}

// DefaultLimits are the bounds the app uses: far above what fits in a
// small model's context, far below what would stall the machine.
var DefaultLimits = Limits{MaxInputBytes: 32 << 20, MaxPages: 500, MaxTextBytes: 4 << 20}

// ErrUnsupported is returned for a file whose kind is not text or PDF.
var ErrUnsupported = errors.New("unsupported file")

// Extract returns the text of the file named name with contents data. The
// kind comes from the contents (a PDF starts with "%PDF-"), the name only
// words the errors.
func Extract(ctx context.Context, name string, data []byte, lim Limits) (string, error) {
	if len(data) > lim.MaxInputBytes {
		return "", fmt.Errorf("%s: %d bytes is over the %d-byte limit for an attachment; attach a smaller file or an excerpt", name, len(data), lim.MaxInputBytes)
	}
	if bytes.HasPrefix(data, []byte("%PDF-")) {
		return extractPDF(ctx, name, data, lim)
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return "", fmt.Errorf("%s: %w: not UTF-8 text and not a PDF; attach text, Markdown, source code or a PDF", name, ErrUnsupported)
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	text = strings.TrimPrefix(text, "\ufeff") // a BOM is not content
	if len(text) > lim.MaxTextBytes {
		return "", fmt.Errorf("%s: %d bytes of text is over the %d-byte limit; attach an excerpt", name, len(text), lim.MaxTextBytes)
	}
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("%s: the file is empty", name)
	}
	return text, nil
}

// extractPDF runs the extractor on its own goroutine so the caller returns
// at the context's deadline; the extractor checks the context between
// pages, so an abandoned run stops at the next page.
func extractPDF(ctx context.Context, name string, data []byte, lim Limits) (string, error) {
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		t, err := pdfText(ctx, name, data, lim)
		done <- result{t, err}
	}()
	select {
	case r := <-done:
		return r.text, r.err
	case <-ctx.Done():
		return "", fmt.Errorf("%s: reading the PDF took too long (%w); attach a smaller PDF or its text", name, ctx.Err())
	}
}

func pdfText(ctx context.Context, name string, data []byte, lim Limits) (text string, err error) {
	// The extractor panics on some malformed files: a damaged PDF is an
	// error for the user, never a crash of the app.
	defer func() {
		if x := recover(); x != nil {
			text, err = "", fmt.Errorf("%s: the PDF is damaged (%v); re-save it from its original program or attach its text", name, x)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		if errors.Is(err, pdf.ErrInvalidPassword) || strings.Contains(err.Error(), "encrypt") {
			return "", fmt.Errorf("%s: the PDF is encrypted; remove its password and attach it again", name)
		}
		return "", fmt.Errorf("%s: the PDF is damaged (%v); re-save it from its original program or attach its text", name, err)
	}
	n := r.NumPage()
	if n == 0 {
		return "", fmt.Errorf("%s: the PDF has no pages (it may be damaged)", name)
	}
	if n > lim.MaxPages {
		return "", fmt.Errorf("%s: %d pages is over the %d-page limit; attach the pages you need", name, n, lim.MaxPages)
	}
	var b strings.Builder
	fonts := map[string]*pdf.Font{}
	for i := 1; i <= n; i++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		for _, f := range p.Fonts() {
			if _, ok := fonts[f]; !ok {
				ft := p.Font(f)
				fonts[f] = &ft
			}
		}
		t, err := p.GetPlainText(fonts)
		if err != nil {
			return "", fmt.Errorf("%s: page %d: the PDF is damaged (%v)", name, i, err)
		}
		if b.Len() > 0 && t != "" {
			b.WriteString("\n\n")
		}
		b.WriteString(strings.TrimSpace(t))
		if b.Len() > lim.MaxTextBytes {
			return "", fmt.Errorf("%s: the PDF's text is over the %d-byte limit by page %d; attach the pages you need", name, lim.MaxTextBytes, i)
		}
	}
	out := strings.ToValidUTF8(b.String(), "\uFFFD")
	if strings.TrimSpace(out) == "" {
		return "", fmt.Errorf("%s: the PDF has no text layer (a scan or images only); attach a PDF with text, or its text", name)
	}
	return out, nil
}

// Format is the one shape a document takes in a user message: a fenced
// block headed by the file's base name, then the user's question. The fence
// is longer than any backtick run in the text, so the text cannot close it.
// The message stores this text, so branches, export and resume all see the
// same prompt, and its KV snapshot covers the document.
func Format(name, text, question string) string {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	// A name is one line without backticks: it sits in the fence's info string.
	base := strings.Map(func(r rune) rune {
		if r == '`' || r < ' ' {
			return '_'
		}
		return r
	}, filepath.Base(strings.ReplaceAll(name, "\\", "/")))
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s\n%s\n%s\n", fence, base, strings.TrimRight(text, "\n"), fence)
	if q := strings.TrimSpace(question); q != "" {
		b.WriteString("\n")
		b.WriteString(q)
	}
	return b.String()
}
