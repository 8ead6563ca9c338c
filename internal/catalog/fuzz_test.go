package catalog

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzParse: no catalog file makes Parse panic, and one it accepts (pins
// and all) is written back by the pin script's encoder and read again as
// the same catalog.
func FuzzParse(f *testing.F) {
	f.Add(catalogJSON)
	f.Add([]byte(`{"entries":[{"name":"x","title":"X","repo":"o/r","revision":"main","format":"gguf","backend":"cpu","context":4096,
		"licence":"MIT","licenceURL":"https://opensource.org/license/mit","files":[{"path":"x-Q8_0.gguf"}],"sources":["s"],
		"commit":"0123456789abcdef0123456789abcdef01234567",
		"pins":[{"path":"x-Q8_0.gguf","size":1,"sha256":"270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"}]}]}`))
	f.Add([]byte(`{"entries":[{"pins":[{"path":"../x","gitBlob":"00"}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("an accepted catalog, written back, is refused: %v", err)
		}
		if !reflect.DeepEqual(c.Entries, again.Entries) {
			t.Fatalf("an accepted catalog changed when written back")
		}
	})
}
