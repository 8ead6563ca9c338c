package cli

import (
	"fmt"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/tokenizer"
)

// openModel loads the model at path with its tokenizer and chat template.
func openModel(path string) (*loadedModel, error) {
	b, tok, err := engine.Open(path)
	if err != nil {
		return nil, err
	}
	m := &loadedModel{backend: b}
	tmpl, err := chat.ForModel(b.Config().Arch, tok)
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
