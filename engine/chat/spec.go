package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
	"anechat/engine/tokenizer"
)

// Spec is a model's own chat template as its files ship it.
type Spec struct {
	// Template is the Jinja source; "" when the model ships none (ForModel
	// then uses a built-in format).
	Template string
	// Source says where Template was read, for errors:
	// "model.gguf (tokenizer.chat_template)".
	Source string
	// Tokens are the named special tokens a template may use (bos_token,
	// eos_token, unk_token, pad_token, …), as transformers passes its
	// special_tokens_map.
	Tokens map[string]string
}

// maxTemplateFile bounds what is read of a template file or
// tokenizer_config.json (templates are KiBs; a config with a large added
// token table is a few MiB).
const maxTemplateFile = 64 << 20

// SpecFromGGUF reads the chat template of a GGUF file
// (tokenizer.chat_template) and names its special tokens from the
// tokenizer.ggml.*_token_id keys, as transformers' GGUF loader does.
func SpecFromGGUF(f *gguf.File, tok *tokenizer.Tokenizer) (Spec, error) {
	s := Spec{Source: f.Path() + " (tokenizer.chat_template)", Tokens: map[string]string{}}
	tmpl, err := f.String("tokenizer.chat_template")
	switch {
	case errors.Is(err, gguf.ErrMissing):
	case err != nil:
		return Spec{}, fmt.Errorf("chat: %s: %w", f.Path(), err)
	default:
		s.Template = tmpl
	}
	for name, key := range map[string]string{"bos_token": "bos", "eos_token": "eos", "unk_token": "unknown", "pad_token": "padding"} {
		id, err := f.Int("tokenizer.ggml." + key + "_token_id")
		if err != nil {
			continue
		}
		if p := tok.Piece(int32(id)); p != "" && id >= 0 {
			s.Tokens[name] = p
		}
	}
	return s, nil
}

// SpecFromDir reads the chat template of a Hugging Face model directory, in
// transformers' order: chat_template.jinja, else chat_template.json, else
// tokenizer_config.json's "chat_template" (a string, or a list of named
// templates of which "default" is used); the special token names come from
// tokenizer_config.json. A directory without any gives an empty Template.
func SpecFromDir(dir string) (Spec, error) {
	s := Spec{Tokens: map[string]string{}}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	var tokens map[string]json.RawMessage
	data, err := readSmall(cfgPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Spec{}, err
	default:
		if err := json.Unmarshal(data, &cfg); err != nil {
			return Spec{}, fmt.Errorf("chat: %s is not valid JSON: %w", cfgPath, err)
		}
		if err := json.Unmarshal(data, &tokens); err != nil {
			return Spec{}, fmt.Errorf("chat: %s is not a JSON object: %w", cfgPath, err)
		}
	}
	for _, name := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		raw, ok := tokens[name]
		if !ok {
			continue
		}
		var str string
		var obj struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(raw, &str) == nil && str != "" {
			s.Tokens[name] = str
		} else if json.Unmarshal(raw, &obj) == nil && obj.Content != "" {
			s.Tokens[name] = obj.Content
		}
	}
	jinjaPath := filepath.Join(dir, "chat_template.jinja")
	if data, err := readSmall(jinjaPath); err == nil {
		s.Template, s.Source = string(data), jinjaPath
		return s, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Spec{}, err
	}
	jsonPath := filepath.Join(dir, "chat_template.json")
	if data, err := readSmall(jsonPath); err == nil {
		var ct struct {
			ChatTemplate json.RawMessage `json:"chat_template"`
		}
		if err := json.Unmarshal(data, &ct); err != nil {
			return Spec{}, fmt.Errorf("chat: %s is not valid JSON: %w", jsonPath, err)
		}
		if s.Template, err = templateField(ct.ChatTemplate, jsonPath); err != nil {
			return Spec{}, err
		}
		if s.Template != "" {
			s.Source = jsonPath + " (chat_template)"
			return s, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Spec{}, err
	}
	if s.Template, err = templateField(cfg.ChatTemplate, cfgPath); err != nil {
		return Spec{}, err
	}
	if s.Template != "" {
		s.Source = cfgPath + " (chat_template)"
	}
	return s, nil
}

// templateField decodes a "chat_template" value: a string, or a list of
// {"name", "template"} of which "default" is the chat template.
func templateField(raw json.RawMessage, path string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat: %s: chat_template is neither a string nor a list of named templates", path)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", fmt.Errorf("chat: %s: chat_template lists no template named \"default\"", path)
}

// readSmall reads a template or tokenizer config: a regular file (a named
// pipe there would block the read forever) of at most maxTemplateFile bytes.
func readSmall(path string) ([]byte, error) {
	data, err := mmap.ReadFile(path, maxTemplateFile)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return data, nil
}
