// Package mmap maps weight files read-only into memory, so that the model
// readers (GGUF, safetensors) hand out tensor bytes without copying them. On
// systems without mmap the file is read into memory instead.
//
// It is also where every model and bundle file is opened (Open, ReadFile):
// only regular files are, so a named pipe or a device put where a model
// belongs gives an error naming it instead of a read that never returns.
//
// A mapping is only as stable as the file under it: when another program
// truncates the file (a re-download, an editor saving over it) while it is
// mapped, reading the pages past the new end raises SIGBUS, which kills a
// Go process. Two things keep that from crashing the app:
//
//   - Mapping.Check compares the file on disk with the one mapped (same
//     inode, size and modification time): callers run it before each
//     generation and get a *ChangedError instead of a fault in the common
//     case, where the file changed between two replies.
//   - Guard turns a fault on mapped memory during a call into a
//     *ChangedError for that call, for the race where the file changes
//     while a reply is being computed (debug.SetPanicOnFault, recovered).
//     Every goroutine that reads mapped memory must be guarded: a fault on
//     an unguarded goroutine still kills the process.
package mmap
