package gguf

import (
	"fmt"
	"math"
)

// ErrMissing marks a metadata key that the file does not have.
var ErrMissing = fmt.Errorf("gguf: missing metadata key")

func (f *File) get(key string) (any, error) {
	v, ok := f.meta[key]
	if !ok {
		return nil, fmt.Errorf("%w %q in %s", ErrMissing, key, f.path)
	}
	return v, nil
}

func (f *File) typeErr(key string, v any, want string) error {
	return fmt.Errorf("gguf: %s: metadata %q is %T, want %s", f.path, key, v, want)
}

// String returns the string value of key.
func (f *File) String(key string) (string, error) {
	v, err := f.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", f.typeErr(key, v, "a string")
	}
	return s, nil
}

// Bool returns the bool value of key.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.get(key)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, f.typeErr(key, v, "a bool")
	}
	return b, nil
}

// asInt64 converts any integer value to int64; ok is false for non-integers
// and for uint64 values beyond int64.
func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// Int returns the value of key, which may be stored as any integer type.
func (f *File) Int(key string) (int, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	n, ok := asInt64(v)
	if !ok || n != int64(int(n)) {
		return 0, f.typeErr(key, v, "an integer")
	}
	return int(n), nil
}

// Uint32 returns the value of key, which may be stored as any integer type
// whose value fits in a uint32.
func (f *File) Uint32(key string) (uint32, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	n, ok := asInt64(v)
	if !ok || n < 0 || n > math.MaxUint32 {
		return 0, f.typeErr(key, v, "an integer in 0..2^32-1")
	}
	return uint32(n), nil
}

// Float32 returns the value of key, stored as float32 or float64.
func (f *File) Float32(key string) (float32, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float32:
		return x, nil
	case float64:
		return float32(x), nil
	}
	return 0, f.typeErr(key, v, "a float")
}

// Strings returns the string array value of key.
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.([]string)
	if !ok {
		return nil, f.typeErr(key, v, "an array of strings")
	}
	return s, nil
}

// Float32s returns the float array value of key (float32 or float64 elements).
func (f *File) Float32s(key string) ([]float32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case []float32:
		return x, nil
	case []float64:
		out := make([]float32, len(x))
		for i, e := range x {
			out[i] = float32(e)
		}
		return out, nil
	}
	return nil, f.typeErr(key, v, "an array of floats")
}

// Int32s returns the integer array value of key (any integer element type
// whose values fit in an int32).
func (f *File) Int32s(key string) ([]int32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	if x, ok := v.([]int32); ok {
		return x, nil
	}
	var out []int32
	conv := func(n int64) bool {
		if n < math.MinInt32 || n > math.MaxInt32 {
			return false
		}
		out = append(out, int32(n))
		return true
	}
	ok := true
	switch x := v.(type) {
	case []uint8:
		for _, e := range x {
			ok = ok && conv(int64(e))
		}
	case []int8:
		for _, e := range x {
			ok = ok && conv(int64(e))
		}
	case []uint16:
		for _, e := range x {
			ok = ok && conv(int64(e))
		}
	case []int16:
		for _, e := range x {
			ok = ok && conv(int64(e))
		}
	case []uint32:
		for _, e := range x {
			ok = ok && conv(int64(e))
		}
	case []int64:
		for _, e := range x {
			ok = ok && conv(e)
		}
	case []uint64:
		for _, e := range x {
			ok = ok && e <= math.MaxInt32 && conv(int64(e))
		}
	default:
		ok = false
	}
	if !ok {
		return nil, f.typeErr(key, v, "an array of int32 values")
	}
	if out == nil {
		out = []int32{}
	}
	return out, nil
}

// TokenID returns the token id stored at key (tokenizer.ggml.bos_token_id,
// ...) for a vocabulary of n tokens, or -1 when the key is absent or holds
// llama.cpp's "no token" (-1, which its writers also store as the uint32
// 0xFFFFFFFF). Any other value outside 0..n-1 is an error naming the file
// and the key: the vocabulary has no such token, so the metadata is damaged,
// and treating the id as absent would quietly change what the model does
// (no BOS, or no end to a reply).
func (f *File) TokenID(key string, n int) (int32, error) {
	v, ok := f.meta[key]
	if !ok {
		return -1, nil
	}
	id, ok := asInt64(v)
	if !ok {
		return -1, f.typeErr(key, v, "an integer token id")
	}
	if u, ok := v.(uint32); id == -1 || ok && u == math.MaxUint32 {
		return -1, nil
	}
	if id < 0 || id >= int64(n) {
		return -1, fmt.Errorf("gguf: %s: metadata %q = %d is not a token id of the %d-token vocabulary (the file is damaged)", f.path, key, id, n)
	}
	return int32(id), nil
}
