package storage

import (
	"context"
	"encoding/json"
	"fmt"

	"anechat/storage/db"
	"github.com/sqlc-dev/pqtype"
)

// Setting keys storage itself reads.
const (
	// SettingKVQuotaBytes holds the byte quota of the KV snapshot store (a JSON number).
	SettingKVQuotaBytes = "kv.quota_bytes"
	// DefaultKVQuotaBytes applies while SettingKVQuotaBytes is unset: 2 GiB.
	DefaultKVQuotaBytes int64 = 2 << 30
	// SettingDefaultModelID holds the id of the model new conversations and
	// the command line use (a JSON number; unset or 0: none chosen).
	SettingDefaultModelID = "models.default_id"
)

// SettingRaw returns the JSON value stored under key; found is false if the
// key is unset. A key set to JSON null returns "null" and found true.
func (d *DB) SettingRaw(ctx context.Context, key string) (value json.RawMessage, found bool, err error) {
	v, err := d.q.GetSetting(ctx, key)
	if isNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, d.fail("get setting "+key, err)
	}
	return v.RawMessage, true, nil
}

// SetSettingRaw stores value (valid JSON, which may be null) under key.
func (d *DB) SetSettingRaw(ctx context.Context, key string, value json.RawMessage) error {
	op := "set setting " + key
	if key == "" {
		return invalid(op, "empty key")
	}
	if len(value) == 0 || !json.Valid(value) {
		return invalid(op, "value is not valid JSON")
	}
	err := d.q.SetSetting(ctx, db.SetSettingParams{Key: key,
		Value: pqtype.NullRawMessage{RawMessage: append(json.RawMessage(nil), value...), Valid: true}, UpdatedAt: millis(d.now())})
	return d.fail(op, err)
}

// GetSetting decodes the value under key into dst; found is false (and dst
// untouched) if the key is unset.
func (d *DB) GetSetting(ctx context.Context, key string, dst any) (found bool, err error) {
	raw, found, err := d.SettingRaw(ctx, key)
	if err != nil || !found {
		return found, err
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return true, fmt.Errorf("storage: setting %s: decode %s: %w", key, raw, err)
	}
	return true, nil
}

// SetSetting stores v, encoded as JSON, under key.
func (d *DB) SetSetting(ctx context.Context, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return invalid("set setting "+key, "encode value: %v", err)
	}
	return d.SetSettingRaw(ctx, key, raw)
}

// Settings returns every setting.
func (d *DB) Settings(ctx context.Context) (map[string]json.RawMessage, error) {
	rows, err := d.q.ListSettings(ctx)
	if err != nil {
		return nil, d.fail("list settings", err)
	}
	out := make(map[string]json.RawMessage, len(rows))
	for _, r := range rows {
		out[r.Key] = r.Value.RawMessage
	}
	return out, nil
}

// DeleteSetting unsets key (no error if it was unset).
func (d *DB) DeleteSetting(ctx context.Context, key string) error {
	_, err := d.q.DeleteSetting(ctx, key)
	return d.fail("delete setting "+key, err)
}

// KVQuota returns the KV snapshot byte quota: the SettingKVQuotaBytes
// setting, or DefaultKVQuotaBytes when unset.
func (d *DB) KVQuota(ctx context.Context) (int64, error) {
	q := DefaultKVQuotaBytes
	if _, err := d.GetSetting(ctx, SettingKVQuotaBytes, &q); err != nil {
		return 0, err
	}
	if q < 0 {
		return 0, fmt.Errorf("storage: setting %s: %w: negative quota %d", SettingKVQuotaBytes, ErrInvalid, q)
	}
	return q, nil
}
