// Package mmap maps weight files read-only into memory, so that the model
// readers (GGUF, safetensors) hand out tensor bytes without copying them. On
// systems without mmap the file is read into memory instead.
package mmap
