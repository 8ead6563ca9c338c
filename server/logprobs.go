package server

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"anechat/engine"
	"anechat/engine/sample"
	"anechat/engine/tokenizer"
)

// maxTextLogprobs is the most alternatives /v1/completions' logprobs asks
// for (OpenAI's limit for the legacy endpoint; chat's top_logprobs goes to
// sample.MaxTopLogprobs).
const maxTextLogprobs = 5

// noLogprob stands for a log-probability of -Inf (a token the model gives no
// probability), which JSON cannot carry: OpenAI's own stand-in.
const noLogprob = -9999.0

// chatLogprobs reads chat's logprobs (true or false) and top_logprobs
// (0..20, only with logprobs true).
func (r *chatRequest) chatLogprobs() (on bool, top int, e *apiError) {
	if v := strings.TrimSpace(string(r.Logprobs)); v != "" && v != "null" {
		if err := json.Unmarshal(r.Logprobs, &on); err != nil {
			return false, 0, badField("logprobs", "want true or false (the number of alternatives is top_logprobs)")
		}
	}
	if r.TopLogprobs == nil {
		return on, 0, nil
	}
	top = *r.TopLogprobs
	switch {
	case top < 0 || top > sample.MaxTopLogprobs:
		return on, top, badField("top_logprobs", "%d: want 0 to %d alternatives per token", top, sample.MaxTopLogprobs)
	case !on && top > 0:
		return on, top, badField("top_logprobs", "only allowed with \"logprobs\": true")
	}
	return on, top, nil
}

// completionLogprobs reads /v1/completions' logprobs: an integer 0..5, the
// alternatives per token (0: the chosen token's only); null or absent is
// off. top_logprobs is chat's field and is refused here when set.
func (r *completionRequest) completionLogprobs() (on bool, top int, e *apiError) {
	if r.TopLogprobs != nil {
		return false, 0, badField("top_logprobs", "a chat completions field: /v1/completions takes \"logprobs\": N (0 to %d alternatives)", maxTextLogprobs)
	}
	v := strings.TrimSpace(string(r.Logprobs))
	if v == "" || v == "null" {
		return false, 0, nil
	}
	if err := json.Unmarshal(r.Logprobs, &top); err != nil || top < 0 || top > maxTextLogprobs {
		return false, 0, badField("logprobs", "%s: want an integer, 0 to %d alternatives per token", v, maxTextLogprobs)
	}
	return true, top, nil
}

// tokenLogprob is one generated token's log-probability and alternatives,
// held until the text it starts is sent.
type tokenLogprob struct {
	id      int32
	logprob float64
	top     []sample.TokenLogprob
	// start is where the token's text begins in the generated text (bytes),
	// offset the same in characters (text_offset).
	start, offset int
}

// logprobQueue keeps the logprobs of the tokens whose text the stop filter
// has not let through yet, so that each goes out with the text it starts
// (a token whose text is still held back, or a part of a character that
// has no text yet, waits) and the tokens of a stop string never go out.
type logprobQueue struct {
	f       *stopFilter
	pending []tokenLogprob
	// bytes and chars measure the generated text up to the last token
	// added, for its character offset.
	bytes, chars int
}

// add queues the logprobs of t, a model token about to be pushed to the
// filter.
func (q *logprobQueue) add(t engine.Token) {
	text := q.f.text.String()
	q.chars += utf8.RuneCountInString(text[q.bytes:])
	q.bytes = len(text)
	q.pending = append(q.pending, tokenLogprob{id: t.ID, logprob: t.Logprob, top: t.Top, start: q.bytes, offset: q.chars})
}

// release returns the queued tokens whose text has begun to go out (all of
// them when all is set: the reply ended without a stop string).
func (q *logprobQueue) release(all bool) []tokenLogprob {
	if q == nil {
		return nil
	}
	n := len(q.pending)
	if !all {
		n = 0
		for n < len(q.pending) && q.pending[n].start < q.f.sent {
			n++
		}
	}
	out := q.pending[:n:n]
	q.pending = q.pending[n:]
	return out
}

// logprob is a log-probability as JSON carries it.
func logprob(v float64) float64 {
	if math.IsInf(v, -1) || math.IsNaN(v) {
		return noLogprob
	}
	return v
}

// byteList is a token's bytes as OpenAI's "bytes" field: an array of
// integers (not base64).
type byteList []byte

func (b byteList) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 2+4*len(b))
	out = append(out, '[')
	for i, c := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(c), 10)
	}
	return append(out, ']'), nil
}

// chatLogprobs is a chat choice's "logprobs".
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

// chatTokenLogprob is one token of chatLogprobs.Content.
type chatTokenLogprob struct {
	Token   string   `json:"token"`
	Logprob float64  `json:"logprob"`
	Bytes   byteList `json:"bytes"`
	// TopLogprobs are the most likely tokens at its position.
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

// chatTopLogprob is one alternative of chatTokenLogprob.TopLogprobs.
type chatTopLogprob struct {
	Token   string   `json:"token"`
	Logprob float64  `json:"logprob"`
	Bytes   byteList `json:"bytes"`
}

// textLogprobs is a text completion choice's "logprobs" (the legacy
// shape): parallel lists, one entry per token.
type textLogprobs struct {
	Tokens        []string   `json:"tokens"`
	TokenLogprobs []float64  `json:"token_logprobs"`
	TopLogprobs   []topByKey `json:"top_logprobs"`
	TextOffset    []int      `json:"text_offset"`
}

// topByKey is one token's alternatives in the legacy shape: an object from
// token text to log-probability, most likely first. Two alternatives of
// the same text (parts of characters both shown as U+FFFD) keep the more
// likely one, as an object has each key once.
type topByKey []struct {
	key string
	lp  float64
}

func (t topByKey) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	seen := map[string]bool{}
	for _, e := range t {
		k, _ := json.Marshal(e.key) // a string: invalid UTF-8 becomes U+FFFD
		if seen[string(k)] {
			continue
		}
		if len(seen) > 0 {
			b.WriteByte(',')
		}
		seen[string(k)] = true
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(logprob(e.lp))
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// logprobsJSON turns tokens into a choice's "logprobs" in the shape of the
// endpoint (chat or text), their text and bytes from tok.
func logprobsJSON(tok *tokenizer.Tokenizer, chat bool, tokens []tokenLogprob) any {
	if chat {
		out := &chatLogprobs{Content: make([]chatTokenLogprob, 0, len(tokens))}
		for _, t := range tokens {
			b := tok.TokenBytes(t.id)
			e := chatTokenLogprob{Token: string(b), Logprob: logprob(t.logprob), Bytes: b, TopLogprobs: []chatTopLogprob{}}
			for _, a := range t.top {
				ab := tok.TokenBytes(a.ID)
				e.TopLogprobs = append(e.TopLogprobs, chatTopLogprob{Token: string(ab), Logprob: logprob(a.Logprob), Bytes: ab})
			}
			out.Content = append(out.Content, e)
		}
		return out
	}
	out := &textLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []topByKey{}, TextOffset: []int{}}
	for _, t := range tokens {
		out.Tokens = append(out.Tokens, string(tok.TokenBytes(t.id)))
		out.TokenLogprobs = append(out.TokenLogprobs, logprob(t.logprob))
		top := topByKey{}
		for _, a := range t.top {
			top = append(top, struct {
				key string
				lp  float64
			}{string(tok.TokenBytes(a.ID)), a.Logprob})
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, t.offset)
	}
	return out
}
