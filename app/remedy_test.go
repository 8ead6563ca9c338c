package app

import (
	"strings"
	"testing"
)

// TestRemedyWordsPerSurface: each way a download pauses by itself says what
// to do in the window's words (its buttons) and in the command line's (the
// same command again, --cancel), from the one table; the command's words
// never name a button.
func TestRemedyWordsPerSurface(t *testing.T) {
	for _, r := range []Remedy{RemedyResume, RemedyFreeSpace, RemedyRetry} {
		w, c := r.Words(Window), r.Words(Command)
		if !strings.Contains(w, "press Resume") || strings.Contains(w, "command") {
			t.Errorf("%s in the window: %q", r, w)
		}
		if !strings.Contains(c, "run the same command again") || !strings.Contains(c, "--cancel") || strings.Contains(c, "Resume") || strings.Contains(c, "Cancel") {
			t.Errorf("%s on the command line: %q", r, c)
		}
		d := Download{Cause: "the server could not be reached", Remedy: r, Error: "the server could not be reached: " + w}
		if d.Advice(Window) != d.Error || d.Advice(Command) != "the server could not be reached: "+c {
			t.Errorf("%s: Advice %q / %q", r, d.Advice(Window), d.Advice(Command))
		}
	}
	if (Download{Error: "failed"}).Advice(Command) != "failed" {
		t.Error("a download that did not pause by itself: Advice must be its Error")
	}
}
