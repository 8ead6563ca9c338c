package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"anechat/engine/spec"
	"anechat/storage"
)

// Width is the speculation width: 1 (off) to 8 tokens per model call, or
// auto (0), which lets the engine choose per step. In JSON it is a number
// 1-8 or the string "auto".
type Width int

// WidthAuto lets the engine pick the width.
const WidthAuto Width = 0

// MaxWidth is the widest speculation setting: the verify loop's widest call.
const MaxWidth = spec.MaxWidth

// MarshalJSON writes auto as "auto" and a fixed width as its number.
func (w Width) MarshalJSON() ([]byte, error) {
	if w == WidthAuto {
		return []byte(`"auto"`), nil
	}
	return []byte(strconv.Itoa(int(w))), nil
}

// UnmarshalJSON accepts "auto" or a whole number 1-8.
func (w *Width) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s == "auto" {
			*w = WidthAuto
			return nil
		}
		return fmt.Errorf("speculation width %q: want a number 1-%d or \"auto\"", s, MaxWidth)
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil || n < 1 || n > MaxWidth {
		return fmt.Errorf("speculation width %s: want a number 1-%d or \"auto\"", b, MaxWidth)
	}
	*w = Width(n)
	return nil
}

// Preferences are the user's settings, typed. Each field is stored as JSON
// under its own settings key, so one bad value does not hide the others.
type Preferences struct {
	// SpeculationWidth is tokens verified per model call: 1-8 or auto; default 4.
	SpeculationWidth Width `json:"speculationWidth"`
	// KVQuotaBytes caps the KV snapshot store on disk; default 2 GiB.
	KVQuotaBytes int64 `json:"kvQuotaBytes"`
	// DefaultModelID is the model new conversations use; 0 for none.
	DefaultModelID int64 `json:"defaultModelId"`
	// MaxTokens caps one reply; default 1024.
	MaxTokens int `json:"maxTokens"`
	// Temperature 0 is greedy decoding; up to 2.
	Temperature float64 `json:"temperature"`
	// HighlightDrafted shades reply text that came from accepted speculative
	// drafts; default on.
	HighlightDrafted bool `json:"highlightDrafted"`
	// DefaultSystemPrompt is the system prompt of a new conversation not
	// started from a library prompt; "" for none.
	DefaultSystemPrompt string `json:"defaultSystemPrompt"`
	// Theme is the window's colour scheme: "system" (follow the desktop),
	// "light" or "dark".
	Theme Theme `json:"theme"`
	// ModelTitles: after the first reply, the model writes a short title
	// for the conversation in the background (only while no reply runs);
	// default off, the first message's start is the title.
	ModelTitles bool `json:"modelTitles"`
}

// Theme is the colour scheme setting.
type Theme string

// Themes.
const (
	ThemeSystem Theme = "system"
	ThemeLight  Theme = "light"
	ThemeDark   Theme = "dark"
)

// maxSystemPrompt bounds the default system prompt (it is sent with every
// new conversation's replies).
const maxSystemPrompt = 64 << 10

// Settings keys.
const (
	keySpeculationWidth = "speculation.width"
	keyKVQuota          = storage.SettingKVQuotaBytes
	keyDefaultModel     = storage.SettingDefaultModelID
	keyMaxTokens        = "generation.max_tokens"
	keyTemperature      = "generation.temperature"
	keyHighlightDrafted = "ui.highlight_drafted"
	keySystemPrompt     = "chat.default_system_prompt"
	keyTheme            = "ui.theme"
	keyModelTitles      = "chat.model_titles"
	keyWindow           = "ui.window"
)

// DefaultPreferences are the settings of a new data directory.
func DefaultPreferences() Preferences {
	return Preferences{SpeculationWidth: 4, KVQuotaBytes: storage.DefaultKVQuotaBytes, MaxTokens: 1024, HighlightDrafted: true,
		Theme: ThemeSystem}
}

// Validate reports the first field out of range, naming it.
func (p Preferences) Validate() error {
	switch {
	case p.SpeculationWidth < 0 || p.SpeculationWidth > MaxWidth:
		return fmt.Errorf("settings: speculation width %d: want 1-%d or auto", p.SpeculationWidth, MaxWidth)
	case p.KVQuotaBytes < 0:
		return fmt.Errorf("settings: KV cache quota %d bytes: must not be negative", p.KVQuotaBytes)
	case p.DefaultModelID < 0:
		return fmt.Errorf("settings: default model id %d: must not be negative", p.DefaultModelID)
	case p.MaxTokens < 1 || p.MaxTokens > 1<<20:
		return fmt.Errorf("settings: max tokens %d: want 1 to %d", p.MaxTokens, 1<<20)
	case !(p.Temperature >= 0 && p.Temperature <= 2):
		return fmt.Errorf("settings: temperature %v: want 0 (greedy) to 2", p.Temperature)
	case len(p.DefaultSystemPrompt) > maxSystemPrompt:
		return fmt.Errorf("settings: default system prompt of %d bytes: keep it under %d", len(p.DefaultSystemPrompt), maxSystemPrompt)
	case p.Theme != ThemeSystem && p.Theme != ThemeLight && p.Theme != ThemeDark:
		return fmt.Errorf("settings: theme %q: want system, light or dark", p.Theme)
	}
	return nil
}

// Settings is the settings service.
type Settings struct{ c *core }

// fields pairs each preference with its key, for loading and saving.
func (p *Preferences) fields() []struct {
	key string
	ptr any
} {
	return []struct {
		key string
		ptr any
	}{
		{keySpeculationWidth, &p.SpeculationWidth},
		{keyKVQuota, &p.KVQuotaBytes},
		{keyDefaultModel, &p.DefaultModelID},
		{keyMaxTokens, &p.MaxTokens},
		{keyTemperature, &p.Temperature},
		{keyHighlightDrafted, &p.HighlightDrafted},
		{keySystemPrompt, &p.DefaultSystemPrompt},
		{keyTheme, &p.Theme},
		{keyModelTitles, &p.ModelTitles},
	}
}

// Get returns the settings, with defaults for those never set. A stored
// value that does not decode or is out of range is an error naming its key.
func (s *Settings) Get() (Preferences, error) {
	d, err := s.c.db()
	if err != nil {
		return Preferences{}, err
	}
	p := DefaultPreferences()
	ctx := s.c.context()
	for _, f := range p.fields() {
		if _, err := d.GetSetting(ctx, f.key, f.ptr); err != nil {
			return Preferences{}, fmt.Errorf("settings: %w (fix it on the Settings page, which stores a valid value)", err)
		}
	}
	if err := p.Validate(); err != nil {
		return Preferences{}, err
	}
	return p, nil
}

// Update validates and stores every setting, then returns them as stored.
func (s *Settings) Update(p Preferences) (Preferences, error) {
	if p.Theme == "" {
		p.Theme = ThemeSystem // a window that predates the setting
	}
	if err := p.Validate(); err != nil {
		return Preferences{}, err
	}
	d, err := s.c.db()
	if err != nil {
		return Preferences{}, err
	}
	ctx := s.c.context()
	if p.DefaultModelID != 0 {
		if _, err := d.GetModel(ctx, p.DefaultModelID); err != nil {
			return Preferences{}, fmt.Errorf("settings: default model %d: %w", p.DefaultModelID, err)
		}
	}
	for _, f := range p.fields() {
		if err := d.SetSetting(ctx, f.key, f.ptr); err != nil {
			return Preferences{}, err
		}
	}
	return s.Get()
}

// Reset stores the defaults (keeping the default model) and returns them.
func (s *Settings) Reset() (Preferences, error) {
	cur, err := s.Get()
	if err != nil {
		// A broken value must not stop the user from resetting it.
		cur = DefaultPreferences()
	}
	p := DefaultPreferences()
	p.DefaultModelID = cur.DefaultModelID
	d, err := s.c.db()
	if err != nil {
		return Preferences{}, err
	}
	if p.DefaultModelID != 0 {
		if _, err := d.GetModel(s.c.context(), p.DefaultModelID); err != nil {
			p.DefaultModelID = 0
		}
	}
	return s.Update(p)
}
