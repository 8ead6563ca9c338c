package app

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"anechat/internal/documents"
	"anechat/internal/sessions"
	"anechat/storage"
)

// TokenCounter is a Generator that can size text in a model's tokens, so the
// window shows what an attachment costs before it is sent.
type TokenCounter interface {
	// CountTokens returns how many tokens text is in mdl's tokenizer and the
	// model's context length, loading the model if needed.
	CountTokens(ctx context.Context, mdl storage.Model, text string) (tokens, contextLen int, err error)
}

// CountTokens implements TokenCounter. It waits for a running reply: the
// loaded model is used by one request at a time.
func (g *EngineGenerator) CountTokens(ctx context.Context, mdl storage.Model, text string) (tokens, contextLen int, err error) {
	err = g.run.Do(ctx, mdl.Path, func(m *sessions.Model) error {
		tokens = len(m.Tokenizer().Encode(text))
		contextLen = m.Backend().Config().ContextLen
		return nil
	})
	return tokens, contextLen, err
}

// Attachment is a document read for a message. Block is the document as it
// goes into the message (documents.Format: a fenced block headed by the
// file name); the window puts it before the question, so the stored message
// holds the document and branches, export and resume see the same text.
type Attachment struct {
	Name          string `json:"name"`
	Block         string `json:"block"`
	Tokens        int    `json:"tokens"`        // Block's size in the conversation's model's tokens
	ContextTokens int    `json:"contextTokens"` // the model's context length
}

// attachTimeout bounds reading one document (PDF extraction and counting).
const attachTimeout = 30 * time.Second

// AttachDocument reads a file the user attached to conversationID's next
// message (dataBase64: its bytes, base64) and sizes it with the
// conversation's model. A document that does not fit the model's context is
// refused with its size, so the window never sends a prompt that cannot run.
func (ch *Chat) AttachDocument(conversationID int64, name, dataBase64 string) (Attachment, error) {
	data, err := base64.StdEncoding.DecodeString(dataBase64)
	if err != nil {
		return Attachment{}, fmt.Errorf("%s: the window sent the file badly encoded (%v); attach it again", name, err)
	}
	if ch.gen == nil {
		return Attachment{}, ErrNoEngine
	}
	tc, ok := ch.gen.(TokenCounter)
	if !ok {
		return Attachment{}, fmt.Errorf("%s: this engine cannot count tokens, so attachments are off", name)
	}
	d, err := ch.c.db()
	if err != nil {
		return Attachment{}, err
	}
	ctx, cancel := context.WithTimeout(ch.c.context(), attachTimeout)
	defer cancel()
	c, err := d.GetConversation(ctx, conversationID)
	if err != nil {
		return Attachment{}, err
	}
	mdl, err := ch.models.resolve(c.ModelID)
	if err != nil {
		return Attachment{}, err
	}
	text, err := documents.Extract(ctx, name, data, documents.DefaultLimits)
	if err != nil {
		return Attachment{}, err
	}
	block := documents.Format(name, text, "")
	n, ctxLen, err := tc.CountTokens(ctx, mdl, block)
	if err != nil {
		return Attachment{}, fmt.Errorf("%s: counting its tokens: %w", name, err)
	}
	if n >= ctxLen {
		return Attachment{}, fmt.Errorf("%s: %d tokens does not fit %s's %d-token context; attach an excerpt", name, n, mdl.Name, ctxLen)
	}
	return Attachment{Name: name, Block: block, Tokens: n, ContextTokens: ctxLen}, nil
}
