package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"anechat/storage"
)

// ConversationOptions are a conversation's own generation settings, set
// beside the composer; a field left out (nil) follows the Settings page.
// They are stored as the conversation's options JSON.
type ConversationOptions struct {
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   *int     `json:"maxTokens,omitempty"`
	// SpeculationWidth is 1-8 or "auto".
	SpeculationWidth *Width `json:"speculationWidth,omitempty"`
}

// GenerationSettings are the settings a conversation's next reply runs
// with: its own options over the Settings page's.
type GenerationSettings struct {
	Temperature      float64 `json:"temperature"`
	MaxTokens        int     `json:"maxTokens"`
	SpeculationWidth Width   `json:"speculationWidth"`
}

// Validate reports the first option out of range, naming it.
func (o ConversationOptions) Validate() error {
	switch {
	case o.Temperature != nil && !(*o.Temperature >= 0 && *o.Temperature <= 2):
		return fmt.Errorf("chat: temperature %v: want 0 (greedy) to 2", *o.Temperature)
	case o.MaxTokens != nil && (*o.MaxTokens < 1 || *o.MaxTokens > 1<<20):
		return fmt.Errorf("chat: max tokens %d: want 1 to %d", *o.MaxTokens, 1<<20)
	case o.SpeculationWidth != nil && (*o.SpeculationWidth < 0 || *o.SpeculationWidth > MaxWidth):
		return fmt.Errorf("chat: speculation width %d: want 1-%d or auto", *o.SpeculationWidth, MaxWidth)
	}
	return nil
}

// conversationOptions reads c's options; a value that does not decode is
// ignored (logged by the caller): the Settings page's values apply.
func conversationOptions(c storage.Conversation) (ConversationOptions, error) {
	var o ConversationOptions
	raw := bytes.TrimSpace(c.Options)
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return ConversationOptions{}, fmt.Errorf("chat: conversation %d options %s: %w", c.ID, raw, err)
	}
	if err := o.Validate(); err != nil {
		return ConversationOptions{}, err
	}
	return o, nil
}

// apply overlays o on the Settings page's values.
func (o ConversationOptions) apply(p Preferences) GenerationSettings {
	g := GenerationSettings{Temperature: p.Temperature, MaxTokens: p.MaxTokens, SpeculationWidth: p.SpeculationWidth}
	if o.Temperature != nil && !math.IsNaN(*o.Temperature) {
		g.Temperature = *o.Temperature
	}
	if o.MaxTokens != nil {
		g.MaxTokens = *o.MaxTokens
	}
	if o.SpeculationWidth != nil {
		g.SpeculationWidth = *o.SpeculationWidth
	}
	return g
}

// SetOptions stores the conversation's own generation settings (a nil field
// follows the Settings page) and returns the conversation.
func (ch *Chat) SetOptions(id int64, o ConversationOptions) (storage.Conversation, error) {
	if err := o.Validate(); err != nil {
		return storage.Conversation{}, err
	}
	raw, err := json.Marshal(o)
	if err != nil {
		return storage.Conversation{}, err
	}
	return ch.updateConversation(id, func(in *storage.ConversationInput) { in.Options = raw })
}

// settingsFor is what conversation c's next reply runs with.
func (ch *Chat) settingsFor(c storage.Conversation, p Preferences) GenerationSettings {
	o, err := conversationOptions(c)
	if err != nil {
		ch.c.log.Warn("conversation options ignored", "conversation", c.ID, "err", err)
	}
	return o.apply(p)
}
