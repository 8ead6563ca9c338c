package cli

import (
	"context"
	"fmt"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/load"
	"anechat/engine/tokenizer"
	"anechat/internal/backends"
)

// openModel loads the model at path on the build's backends, with its
// tokenizer and chat template.
func openModel(path string) (*loadedModel, error) {
	lm, err := backends.Registry().Open(context.Background(), path, load.Options{})
	if err != nil {
		return nil, err
	}
	b, tok := lm.Backend, lm.Tokenizer
	m := &loadedModel{backend: b}
	tmpl, err := chat.ForModel(b.Config().Arch, tok, lm.Chat)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.codec = &tokCodec{tok: tok, tmpl: tmpl}
	return m, nil
}

// tokCodec is a textCodec over the engine's tokenizer and chat template.
type tokCodec struct {
	tok  *tokenizer.Tokenizer
	tmpl chat.Template
}

func (c *tokCodec) raw(text string) []int32 { return engine.RawPrompt(c.tok, text) }

func (c *tokCodec) chatPrompt(user string) ([]int32, error) {
	return c.tmpl.Render([]chat.Message{{Role: chat.RoleUser, Content: user}}, true)
}

func (c *tokCodec) render(msgs []chat.Message) ([]int32, error) { return c.tmpl.Render(msgs, true) }

func (c *tokCodec) stops() []int32 { return c.tmpl.Stops() }

func (c *tokCodec) stream() engine.TextStream { return c.tok.NewStream() }
