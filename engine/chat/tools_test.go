package chat

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"anechat/engine/chat/jinja"
)

// wantToolFormat is each fixture template's tool-call format: the ones that
// render tools (Qwen 2.5/3, Llama 3.1, Gemma 4) and the ones that ignore them.
var wantToolFormat = map[string]ToolFormat{
	"smollm2": NoTools, "gemma3": NoTools, "llama3": NoTools,
	"gemma4": ToolsGemma4, "gemma4-31b": ToolsGemma4,
	"qwen2.5": ToolsHermes, "qwen3": ToolsHermes, "llama3.1": ToolsLlama3,
}

// Conversations with tools, tool calls and tool results render exactly as
// transformers' apply_chat_template(tools=…) renders them: the same text and
// ids, or the template's own error (Llama 3.1 refuses two calls at once).
// Templates without tool support are told apart from those with it.
func TestJinjaToolsMatchTransformers(t *testing.T) {
	fx := loadHFFixture(t)
	withTools := 0
	for _, ft := range fx.Templates {
		t.Run(ft.ID, func(t *testing.T) {
			m := hfModel(t, ft.ID)
			tmpl, err := ForModel(context.Background(), "any", m.tok, m.spec)
			if err != nil {
				t.Fatal(err)
			}
			want, known := wantToolFormat[ft.ID]
			if !known {
				t.Fatalf("no expected tool format for %s", ft.ID)
			}
			if got := ToolFormatOf(tmpl); got != want {
				t.Fatalf("ToolFormatOf = %q, want %q", got, want)
			}
			if want == NoTools {
				if len(ft.ToolCases) > 0 {
					t.Fatalf("gen.py rendered tools for %s, which has no tool support", ft.ID)
				}
				_, err := RenderTools(context.Background(), tmpl, []Message{{Role: RoleUser, Content: "Hi"}}, []Tool{Tool(probeTool)}, true)
				if !errors.Is(err, ErrNoTools) {
					t.Errorf("RenderTools on a template without tools: %v, want ErrNoTools", err)
				}
				return
			}
			withTools++
			j := tmpl.(*Jinja)
			rendered := 0
			for i, c := range ft.ToolCases {
				if len(c.Tools) == 0 {
					t.Fatalf("case %d has no tools", i)
				}
				msgs, tl := messages(c.Messages), tools(c.Tools)
				text, terr := j.RenderText(context.Background(), msgs, tl, c.AddGen)
				ids, ierr := RenderTools(context.Background(), tmpl, msgs, tl, c.AddGen)
				if c.Error != "" {
					if ierr == nil || !errors.Is(ierr, ErrConversation) || !strings.Contains(ierr.Error(), c.Error) {
						t.Errorf("case %d: transformers raised %q; we gave %v", i, c.Error, ierr)
					}
					continue
				}
				if terr != nil || ierr != nil {
					t.Errorf("case %d: %v", i, errors.Join(terr, ierr))
					continue
				}
				if text != c.Text {
					t.Errorf("case %d (gen %v):\n got %q\nwant %q", i, c.AddGen, text, c.Text)
					continue
				}
				if !slices.Equal(ids, c.IDs) {
					t.Errorf("case %d (gen %v) %q:\n got %v\nwant %v", i, c.AddGen, text, ids, c.IDs)
				}
				rendered++
			}
			if rendered < 12 {
				t.Errorf("only %d tool renders compared", rendered)
			}
		})
	}
	if withTools < 5 {
		t.Errorf("%d templates with tools, want 5", withTools)
	}
}

// A call a template wrote into the history is what ParseCalls reads back,
// in the template's own format: the rendering and the parsing agree.
func TestToolCallsRoundTripThroughTemplates(t *testing.T) {
	for _, id := range []string{"qwen2.5", "qwen3", "llama3.1", "gemma4", "gemma4-31b"} {
		t.Run(id, func(t *testing.T) {
			m := hfModel(t, id)
			tmpl, err := ForModel(context.Background(), "any", m.tok, m.spec)
			if err != nil {
				t.Fatal(err)
			}
			j, f := tmpl.(*Jinja), ToolFormatOf(tmpl)
			args := `{"location": "Paris \"centre\"", "days": 3, "hourly": [true, null, 2.5], "opts": {"unit": "°C"}}`
			q := []Message{{Role: RoleUser, Content: "Weather?"}}
			before, err := j.RenderText(context.Background(), q, []Tool{Tool(probeTool)}, true)
			if err != nil {
				t.Fatal(err)
			}
			full, err := j.RenderText(context.Background(), append(q, Message{Role: RoleAssistant,
				ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: args}}}), []Tool{Tool(probeTool)}, false)
			if err != nil {
				t.Fatal(err)
			}
			// The reply is what follows the model turn's header (Gemma's
			// generation prompt also opens an empty thought, which the
			// history leaves out).
			n := 0
			for n < len(before) && n < len(full) && before[n] == full[n] {
				n++
			}
			n = strings.LastIndex(full[:n], "\n") + 1
			if n == 0 {
				t.Fatalf("the history with a call and the prompt part at %q", full[:n])
			}
			reply := full[n:]
			for _, p := range f.Stops() {
				if _, ok := m.tok.TokenID(p); !ok {
					t.Errorf("the stop %q is no token of the model's", p)
				}
			}
			// The template's end of turn (and Gemma's tool response
			// opening) are where generation stops: not part of the reply.
			for _, end := range append([]string{"<|im_end|>", "<|eot_id|>", "<turn|>"}, f.Stops()...) {
				if i := strings.Index(reply, end); i >= 0 {
					reply = reply[:i]
				}
			}
			content, calls := f.ParseCalls(reply)
			wantContent := ""
			if id == "qwen3" {
				wantContent = "<think>\n\n</think>" // the template's empty reasoning before the call
			}
			if len(calls) != 1 || calls[0].Name != "get_weather" || content != wantContent {
				t.Fatalf("ParseCalls(%q) = %q, %+v", reply, content, calls)
			}
			if !sameJSON(t, calls[0].Arguments, args) {
				t.Errorf("arguments %s, want %s", calls[0].Arguments, args)
			}
		})
	}
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// Any tool or arguments text a client sends becomes a template value or an
// error, never a panic; valid JSON objects always become dicts.
func FuzzJSONValue(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, "x", null, true, {"b": {}}]}`, `{"a": 1, "a": 2}`, `[` + strings.Repeat("[", 70), `{"n": 99999999999999999999}`, `"s"`, `{}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := jsonValue(data)
		if err == nil && json.Valid(data) && strings.HasPrefix(strings.TrimSpace(string(data)), "{") && v.Kind() != jinja.KindDict {
			t.Fatalf("%q became a %v", data, v.Kind())
		}
		messageValue(Message{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "f", Arguments: string(data)}}})
	})
}
