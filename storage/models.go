package storage

import (
	"context"
	"encoding/json"
	"time"

	"anechat/storage/db"
)

// Model is a model file or directory the app knows about.
type Model struct {
	ID          int64           `json:"id"`
	Path        string          `json:"path"`
	Kind        string          `json:"kind"` // "gguf", "safetensors", "coreml", ...
	Name        string          `json:"name"`
	Fingerprint string          `json:"fingerprint"`
	SizeBytes   int64           `json:"sizeBytes"`
	Meta        json.RawMessage `json:"meta,omitempty"` // free-form JSON, nil if none
	AddedAt     time.Time       `json:"addedAt"`
	LastUsedAt  time.Time       `json:"lastUsedAt"` // zero if never used
}

// ModelInput is what RegisterModel stores.
type ModelInput struct {
	Path        string
	Kind        string
	Name        string
	Fingerprint string
	SizeBytes   int64
	Meta        json.RawMessage // nil for none
}

func modelOut(m db.Model) Model {
	out := Model{ID: m.ID, Path: m.Path, Kind: m.Kind, Name: m.Name, Fingerprint: m.Fingerprint,
		SizeBytes: m.SizeBytes, Meta: jsonOut(m.Meta), AddedAt: fromMillis(m.AddedAt)}
	if m.LastUsedAt.Valid {
		out.LastUsedAt = fromMillis(m.LastUsedAt.Int64)
	}
	return out
}

// RegisterModel adds the model at in.Path, or updates its kind, name,
// fingerprint, size and meta if the path is known (keeping its id).
func (d *DB) RegisterModel(ctx context.Context, in ModelInput) (Model, error) {
	const op = "register model"
	if in.Path == "" || in.Kind == "" {
		return Model{}, invalid(op, "path and kind are required")
	}
	meta, err := jsonIn(op+" meta", in.Meta)
	if err != nil {
		return Model{}, err
	}
	m, err := d.q.UpsertModel(ctx, db.UpsertModelParams{Path: in.Path, Kind: in.Kind, Name: in.Name,
		Fingerprint: in.Fingerprint, SizeBytes: in.SizeBytes, Meta: meta, AddedAt: millis(d.now())})
	if err != nil {
		return Model{}, d.fail(op, err)
	}
	return modelOut(m), nil
}

// GetModel returns the model with id, or ErrNotFound.
func (d *DB) GetModel(ctx context.Context, id int64) (Model, error) {
	m, err := d.q.GetModel(ctx, id)
	if err != nil {
		return Model{}, d.fail("get model", err)
	}
	return modelOut(m), nil
}

// ModelByPath returns the model registered at path, or ErrNotFound.
func (d *DB) ModelByPath(ctx context.Context, path string) (Model, error) {
	m, err := d.q.GetModelByPath(ctx, path)
	if err != nil {
		return Model{}, d.fail("get model "+path, err)
	}
	return modelOut(m), nil
}

// ListModels lists the models, most recently used (or added) first.
func (d *DB) ListModels(ctx context.Context) ([]Model, error) {
	ms, err := d.q.ListModels(ctx)
	if err != nil {
		return nil, d.fail("list models", err)
	}
	out := make([]Model, len(ms))
	for i, m := range ms {
		out[i] = modelOut(m)
	}
	return out, nil
}

// TouchModel records that the model was just used.
func (d *DB) TouchModel(ctx context.Context, id int64) error {
	n, err := d.q.TouchModel(ctx, db.TouchModelParams{LastUsedAt: idIn(millis(d.now())), ID: id})
	return d.fail("touch model", oneRow("touch model", n, err))
}

// DeleteModel forgets the model (its file stays); conversations keep their
// messages and lose the link.
func (d *DB) DeleteModel(ctx context.Context, id int64) error {
	n, err := d.q.DeleteModel(ctx, id)
	return d.fail("delete model", oneRow("delete model", n, err))
}

// ModelsByFingerprint lists the registered models with fingerprint fp (one
// file may be registered under several paths), oldest first.
func (d *DB) ModelsByFingerprint(ctx context.Context, fp string) ([]Model, error) {
	ms, err := d.q.ListModelsByFingerprint(ctx, fp)
	if err != nil {
		return nil, d.fail("list models by fingerprint", err)
	}
	out := make([]Model, len(ms))
	for i, m := range ms {
		out[i] = modelOut(m)
	}
	return out, nil
}

// DefaultModel returns the model SettingDefaultModelID names; ok is false
// when none is chosen or the chosen one is no longer registered.
func (d *DB) DefaultModel(ctx context.Context) (m Model, ok bool, err error) {
	var id int64
	if _, err := d.GetSetting(ctx, SettingDefaultModelID, &id); err != nil {
		return Model{}, false, err
	}
	if id == 0 {
		return Model{}, false, nil
	}
	m, err = d.GetModel(ctx, id)
	if isNotFound(err) {
		return Model{}, false, nil
	}
	return m, err == nil, err
}
