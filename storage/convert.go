package storage

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sqlc-dev/pqtype"
)

// jsonIn converts raw JSON for a nullable JSON column: nil (or empty) is SQL
// NULL; anything else must be valid JSON (the JSON literal null included,
// which is stored as the 4 bytes "null", not as SQL NULL).
func jsonIn(field string, raw json.RawMessage) (pqtype.NullRawMessage, error) {
	if len(raw) == 0 {
		return pqtype.NullRawMessage{}, nil
	}
	if !json.Valid(raw) {
		return pqtype.NullRawMessage{}, fmt.Errorf("storage: %s: %w: not valid JSON", field, ErrInvalid)
	}
	return pqtype.NullRawMessage{RawMessage: append(json.RawMessage(nil), raw...), Valid: true}, nil
}

// jsonOut converts a nullable JSON column back: SQL NULL is nil.
func jsonOut(v pqtype.NullRawMessage) json.RawMessage {
	if !v.Valid {
		return nil
	}
	return v.RawMessage
}

// idIn maps 0 ("none") to SQL NULL.
func idIn(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: id != 0} }

// idOut maps SQL NULL to 0.
func idOut(v sql.NullInt64) int64 {
	if !v.Valid {
		return 0
	}
	return v.Int64
}

// invalid reports a caller error in field.
func invalid(op, format string, args ...any) error {
	return fmt.Errorf("storage: %s: %w: %s", op, ErrInvalid, fmt.Sprintf(format, args...))
}

// oneRow turns an :execrows count of zero into ErrNotFound.
func oneRow(op string, n int64, err error) error {
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("storage: %s: %w", op, ErrNotFound)
	}
	return nil
}

// isNotFound reports whether err means "no such row".
func isNotFound(err error) bool { return errors.Is(err, sql.ErrNoRows) || errors.Is(err, ErrNotFound) }
