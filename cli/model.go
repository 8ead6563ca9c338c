package cli

import (
	"anechat/engine"
)

// openModel loads the model at path and, when available, its tokenizer.
func openModel(path string) (*loadedModel, error) {
	b, err := engine.OpenBackend(path)
	if err != nil {
		return nil, err
	}
	return &loadedModel{backend: b}, nil
}
