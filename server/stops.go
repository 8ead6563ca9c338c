package server

import "strings"

// stopFilter ends a reply at the first stop string: the text it lets
// through ends before the stop, and it holds back only what may yet become
// one (the longest end of the text that begins a stop string), so no part
// of a stop string is ever sent, whatever the tokens it is split across.
type stopFilter struct {
	stops []string
	text  strings.Builder
	sent  int // bytes of text let through
	// stopped: a stop string was found; nothing more passes.
	stopped bool
}

// push adds a piece of generated text and returns the text that may be sent
// now, and whether the reply has reached a stop string.
func (f *stopFilter) push(piece string) (out string, stopped bool) {
	if f.stopped {
		return "", true
	}
	f.text.WriteString(piece)
	if len(f.stops) == 0 {
		out = f.text.String()[f.sent:]
		f.sent += len(out)
		return out, false
	}
	rest := f.text.String()[f.sent:]
	// A stop string never starts in text already sent: what could have
	// started one was held back.
	at := -1
	for _, s := range f.stops {
		if i := strings.Index(rest, s); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at >= 0 {
		f.stopped = true
		f.sent += at
		return rest[:at], true
	}
	held := 0
	for _, s := range f.stops {
		for k := min(len(s)-1, len(rest)); k > held; k-- {
			if strings.HasPrefix(s, rest[len(rest)-k:]) {
				held = k
				break
			}
		}
	}
	out = rest[:len(rest)-held]
	f.sent += len(out)
	return out, false
}

// flush returns the text held back at the end of a reply that reached no
// stop string.
func (f *stopFilter) flush() string {
	if f.stopped {
		return ""
	}
	out := f.text.String()[f.sent:]
	f.sent += len(out)
	return out
}
