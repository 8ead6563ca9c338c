package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"anechat/storage"
)

// genJSON runs `anechat generate` with args and --json, and decodes what
// it prints; a non-zero exit fails the test.
func genJSON(t *testing.T, args ...string) generateJSON {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(append([]string{"generate"}, args...), "--json")
	if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errb.String())
	}
	var g generateJSON
	if err := json.Unmarshal(out.Bytes(), &g); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return g
}

// storedSetting returns the setting under key in the database of data dir
// home (found false when there is none) and, when set is not nil, replaces
// it with set.
func storedSetting(t *testing.T, home, key string, set json.RawMessage) (raw json.RawMessage, found bool) {
	t.Helper()
	db, err := storage.Open(context.Background(), storage.DBPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	raw, found, err = db.SettingRaw(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		if err := db.SetSettingRaw(context.Background(), key, set); err != nil {
			t.Fatal(err)
		}
	}
	return raw, found
}

// longPromptIDs is a fixed prompt of 150 stories260K ids (BOS first), long
// enough to span several KV snapshot blocks.
func longPromptIDs() string {
	prompt := make([]string, 150)
	for i := range prompt {
		prompt[i] = fmt.Sprint(3 + (i*37+i*i)%500)
	}
	prompt[0] = "1"
	return strings.Join(prompt, " ")
}
