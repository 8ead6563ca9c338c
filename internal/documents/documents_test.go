package documents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// makePDF writes a minimal PDF with one Helvetica text line per page, with
// a correct cross-reference table; extra is added to the trailer dict.
func makePDF(pages []string, extra string) []byte {
	var objs []string
	objs = append(objs, "<< /Type /Catalog /Pages 2 0 R >>")
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	objs = append(objs, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	for i, text := range pages {
		content := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", text)
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i))
		objs = append(objs, fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, extra, xref)
	return b.Bytes()
}

func TestExtractText(t *testing.T) {
	got, err := Extract(context.Background(), "notes.md", []byte("\ufeff# Title\r\nbody\r\n"), DefaultLimits)
	if err != nil || got != "# Title\nbody\n" {
		t.Fatalf("Extract = %q, %v", got, err)
	}
	for _, c := range []struct{ name, data, want string }{
		{"bin.dat", "a\x00b", "not UTF-8 text"},
		{"latin1.txt", "caf\xe9", "not UTF-8 text"},
		{"empty.txt", " \n", "empty"},
	} {
		_, err := Extract(context.Background(), c.name, []byte(c.data), DefaultLimits)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), c.name) {
			t.Errorf("%s: err = %v, want it to name the file and say %q", c.name, err, c.want)
		}
	}
	if _, err := Extract(context.Background(), "bin.dat", []byte{0}, DefaultLimits); !errors.Is(err, ErrUnsupported) {
		t.Errorf("binary: err = %v, want ErrUnsupported", err)
	}
	lim := Limits{MaxInputBytes: 10, MaxPages: 1, MaxTextBytes: 5}
	if _, err := Extract(context.Background(), "big.txt", []byte("0123456789a"), lim); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("over input limit: err = %v", err)
	}
	if _, err := Extract(context.Background(), "big.txt", []byte("012345"), lim); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("over text limit: err = %v", err)
	}
}

func TestExtractPDF(t *testing.T) {
	data := makePDF([]string{"Hello from page one", "Second page text"}, "")
	got, err := Extract(context.Background(), "doc.pdf", data, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got != "Hello from page one\n\nSecond page text" {
		t.Fatalf("Extract = %q", got)
	}
	lim := DefaultLimits
	lim.MaxPages = 1
	if _, err := Extract(context.Background(), "doc.pdf", data, lim); err == nil || !strings.Contains(err.Error(), "2 pages is over the 1-page limit") {
		t.Errorf("page limit: err = %v", err)
	}
	lim = DefaultLimits
	lim.MaxTextBytes = 10
	if _, err := Extract(context.Background(), "doc.pdf", data, lim); err == nil || !strings.Contains(err.Error(), "byte limit") {
		t.Errorf("text limit: err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Extract(ctx, "doc.pdf", data, DefaultLimits); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestExtractHostilePDFs(t *testing.T) {
	good := makePDF([]string{"Hello"}, "")
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"scan.pdf", makePDF([]string{""}, ""), "no text layer"},
		{"locked.pdf", makePDF([]string{"secret"}, "/Encrypt << /Filter /Standard /V 1 /R 2 /O (x) /U (y) /P -4 >> /ID [(a) (a)] "), "encrypted"},
		{"header.pdf", []byte("%PDF-1.4\n"), "damaged"},
		{"cut.pdf", good[:len(good)/2], "damaged"},
		{"garbage.pdf", append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte("<<[(/"), 2000)...), "damaged"},
		{"badxref.pdf", bytes.Replace(good, []byte("startxref\n"), []byte("startxref\n9"), 1), "damaged"},
	}
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := Extract(ctx, c.name, c.data, DefaultLimits)
		cancel()
		if err == nil || !strings.HasPrefix(err.Error(), c.name+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to name the file and say %q", c.name, err, c.want)
		}
	}
}

// FuzzExtract checks that no input makes Extract panic or hang past its
// deadline; `go test -fuzz FuzzExtract ./internal/documents` explores more.
func FuzzExtract(f *testing.F) {
	good := makePDF([]string{"Hello", "World"}, "")
	f.Add(good)
	f.Add(good[:200])
	f.Add([]byte("%PDF-1.4\n1 0 obj << >> endobj"))
	f.Add([]byte("plain text"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		text, err := Extract(ctx, "f.pdf", data, Limits{MaxInputBytes: 1 << 20, MaxPages: 50, MaxTextBytes: 1 << 16})
		if err == nil && len(text) > 1<<16 {
			t.Fatalf("text of %d bytes past the limit", len(text))
		}
	})
}

func TestFormat(t *testing.T) {
	got := Format("/home/u/My `doc`.md", "a\n```go\nx\n```\n", " What is x? ")
	want := "````My _doc_.md\na\n```go\nx\n```\n````\n\nWhat is x?"
	if got != want {
		t.Fatalf("Format = %q, want %q", got, want)
	}
	if got := Format("n.txt", "t", ""); got != "```n.txt\nt\n```\n" {
		t.Fatalf("Format without question = %q", got)
	}
}

// testdata/two-pages.pdf is makePDF's output, committed so other packages'
// tests and the e2e spec read a real file; this test keeps it current
// (ANECHAT_UPDATE_PDF=1 rewrites it).
func TestPDFFixtureIsCurrent(t *testing.T) {
	want := makePDF([]string{"Hello from page one", "Second page text"}, "")
	const path = "testdata/two-pages.pdf"
	if os.Getenv("ANECHAT_UPDATE_PDF") != "" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s is not makePDF's output (%v): run ANECHAT_UPDATE_PDF=1 go test -run TestPDFFixtureIsCurrent ./internal/documents", path, err)
	}
}
