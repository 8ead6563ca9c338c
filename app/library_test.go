package app

import (
	"errors"
	"testing"

	"anechat/storage"
)

func TestLibraryCRUDTagsSearch(t *testing.T) {
	a, _, _ := start(t, nil)
	l := a.Library
	p1, err := l.Create(PromptInput{Title: " Translator ", SystemPrompt: "You translate to French.", Body: "Translate: ", Tags: []string{"Lang", " work", "lang"}})
	if err != nil {
		t.Fatal(err)
	}
	if p1.Title != "Translator" || len(p1.Tags) != 2 || p1.Tags[0] != "lang" || p1.Tags[1] != "work" {
		t.Fatalf("created %+v: want trimmed title and tags [lang work]", p1)
	}
	p2, err := l.Create(PromptInput{Title: "Code review", Body: "Review this Go code for races.", Tags: []string{"work", "code"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(PromptInput{Title: "  "}); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("Create without a title: %v, want ErrInvalid", err)
	}

	check := func(tag, q string, want ...int64) {
		t.Helper()
		ps, err := l.List(tag, q)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, p := range ps {
			got = append(got, p.ID)
		}
		if len(got) != len(want) {
			t.Fatalf("List(%q, %q) = %v, want %v", tag, q, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("List(%q, %q) = %v, want %v", tag, q, got, want)
			}
		}
	}
	check("", "", p2.ID, p1.ID) // newest first
	check("work", "", p2.ID, p1.ID)
	check("lang", "", p1.ID)
	check("", "FRENCH", p1.ID)        // system prompt, case-insensitive
	check("", "go races", p2.ID)      // every word, in the body
	check("", "code", p2.ID)          // title and tag
	check("work", "translate", p1.ID) // tag and query together
	check("", "nothing-like-this")

	tags, err := l.Tags()
	if err != nil || len(tags) != 3 || tags[2].Tag != "work" || tags[2].Prompts != 2 {
		t.Fatalf("Tags = %+v, %v", tags, err)
	}
	up, err := l.Update(p1.ID, PromptInput{Title: "Translator (DE)", SystemPrompt: "You translate to German.", Tags: []string{"lang"}})
	if err != nil || up.Title != "Translator (DE)" || up.SystemPrompt != "You translate to German." || len(up.Tags) != 1 {
		t.Fatalf("Update = %+v, %v", up, err)
	}
	got, err := l.Get(p1.ID)
	if err != nil || got.Title != up.Title {
		t.Fatalf("Get after update = %+v, %v", got, err)
	}
	if err := l.Delete(p1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(p1.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get after delete: %v, want ErrNotFound", err)
	}
	if err := l.Delete(p1.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
}
