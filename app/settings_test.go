package app

import (
	"encoding/json"
	"strings"
	"testing"

	"anechat/storage"
)

func TestWidthJSON(t *testing.T) {
	for _, tc := range []struct {
		w    Width
		json string
	}{{WidthAuto, `"auto"`}, {1, `1`}, {4, `4`}, {8, `8`}} {
		b, err := json.Marshal(tc.w)
		if err != nil || string(b) != tc.json {
			t.Errorf("Marshal(%d) = %s, %v; want %s", tc.w, b, err, tc.json)
		}
		var back Width = 99
		if err := json.Unmarshal([]byte(tc.json), &back); err != nil || back != tc.w {
			t.Errorf("Unmarshal(%s) = %d, %v; want %d", tc.json, back, err, tc.w)
		}
	}
	for _, bad := range []string{`0`, `9`, `-1`, `2.5`, `"4"`, `"AUTO"`, `null`, `true`} {
		var w Width
		if err := json.Unmarshal([]byte(bad), &w); err == nil {
			t.Errorf("Unmarshal(%s) accepted %d", bad, w)
		}
	}
}

func TestSettingsDefaultsAndRoundTrip(t *testing.T) {
	a, _, _ := start(t, nil)
	got, err := a.Settings.Get()
	if err != nil {
		t.Fatal(err)
	}
	if got != DefaultPreferences() {
		t.Fatalf("fresh settings %+v, want defaults %+v", got, DefaultPreferences())
	}
	if got.SpeculationWidth != 4 || got.KVQuotaBytes != 2<<30 || !got.HighlightDrafted {
		t.Fatalf("defaults: width %d, quota %d, highlight drafted %v; want 4, 2 GiB, true", got.SpeculationWidth, got.KVQuotaBytes, got.HighlightDrafted)
	}
	// HighlightDrafted false (the default is true) is stored, not defaulted.
	want := Preferences{SpeculationWidth: WidthAuto, KVQuotaBytes: 512 << 20, MaxTokens: 77, Temperature: 0.7,
		DefaultSystemPrompt: "Be kind.", Theme: ThemeDark, ModelTitles: true}
	stored, err := a.Settings.Update(want)
	if err != nil || stored != want {
		t.Fatalf("Update = %+v, %v; want %+v", stored, err, want)
	}
	// A new App on the same directory reads the same values back.
	dir := a.core.dataDir
	a.Shutdown()
	b := New(Options{DataDir: dir})
	b.Startup(t.Context(), nil)
	defer b.Shutdown()
	again, err := b.Settings.Get()
	if err != nil || again != want {
		t.Fatalf("after reopen Get = %+v, %v; want %+v", again, err, want)
	}
	// Stored as JSON under its key: auto is the string "auto", the quota is
	// the key storage's KV store reads.
	d, _ := b.core.db()
	raw, ok, err := d.SettingRaw(t.Context(), keySpeculationWidth)
	if err != nil || !ok || string(raw) != `"auto"` {
		t.Fatalf("stored width %s (%v, %v), want \"auto\"", raw, ok, err)
	}
	if q, err := d.KVQuota(t.Context()); err != nil || q != 512<<20 {
		t.Fatalf("storage KVQuota = %d, %v; want %d", q, err, 512<<20)
	}
}

func TestSettingsRejectOutOfRange(t *testing.T) {
	a, _, _ := start(t, nil)
	base := DefaultPreferences()
	for name, change := range map[string]func(*Preferences){
		"width 9":          func(p *Preferences) { p.SpeculationWidth = 9 },
		"negative quota":   func(p *Preferences) { p.KVQuotaBytes = -1 },
		"zero max tokens":  func(p *Preferences) { p.MaxTokens = 0 },
		"temperature 3":    func(p *Preferences) { p.Temperature = 3 },
		"unknown model 42": func(p *Preferences) { p.DefaultModelID = 42 },
	} {
		p := base
		change(&p)
		if _, err := a.Settings.Update(p); err == nil {
			t.Errorf("%s: Update accepted %+v", name, p)
		}
	}
	if got, _ := a.Settings.Get(); got != base {
		t.Fatalf("rejected updates changed the settings to %+v", got)
	}
}

func TestSettingsBadStoredValueNamesKeyAndResetFixesIt(t *testing.T) {
	a, _, _ := start(t, nil)
	d, _ := a.core.db()
	if err := d.SetSettingRaw(t.Context(), keySpeculationWidth, json.RawMessage(`"fast"`)); err != nil {
		t.Fatal(err)
	}
	_, err := a.Settings.Get()
	if err == nil || !strings.Contains(err.Error(), keySpeculationWidth) {
		t.Fatalf("Get with a bad stored width: %v, want an error naming %s", err, keySpeculationWidth)
	}
	p, err := a.Settings.Reset()
	if err != nil || p != DefaultPreferences() {
		t.Fatalf("Reset = %+v, %v", p, err)
	}
	if _, err := d.GetSetting(t.Context(), storage.SettingKVQuotaBytes, new(int64)); err != nil {
		t.Fatal(err)
	}
}

// FuzzWidthJSON: any input either fails to decode or decodes to a width in
// range that encodes back to the canonical form and decodes to itself.
func FuzzWidthJSON(f *testing.F) {
	for _, s := range []string{`"auto"`, `1`, `8`, `0`, `9`, `"4"`, `4.0`, ` 4 `, `null`, `[]`, `"\u0061uto"`, `1e0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var w Width
		if err := w.UnmarshalJSON(b); err != nil {
			return
		}
		if w < 0 || w > MaxWidth {
			t.Fatalf("%q decoded to out-of-range width %d", b, w)
		}
		out, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		var back Width
		if err := json.Unmarshal(out, &back); err != nil || back != w {
			t.Fatalf("%q -> %d -> %s -> %d, %v", b, w, out, back, err)
		}
	})
}
