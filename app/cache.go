package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"anechat/storage"
)

// CacheUsage is the KV snapshot cache on disk against its quota: what the
// Settings page shows beside "Clear cache".
type CacheUsage struct {
	// UsedBytes is the size of every snapshot; QuotaBytes the quota beyond
	// which the least recently used unpinned ones are evicted.
	UsedBytes  int64 `json:"usedBytes"`
	QuotaBytes int64 `json:"quotaBytes"`
	Snapshots  int   `json:"snapshots"`
	// PinnedBytes and Pinned are the prepared library prompts' snapshots
	// (never evicted; ClearCache keeps them unless asked).
	PinnedBytes int64 `json:"pinnedBytes"`
	Pinned      int   `json:"pinned"`
	// Dir is the kv/ directory the files live in.
	Dir string `json:"dir"`
}

// ClearCacheResult is what ClearCache removed, and the cache after it.
type ClearCacheResult struct {
	Removed    int        `json:"removed"`
	FreedBytes int64      `json:"freedBytes"`
	Usage      CacheUsage `json:"usage"`
	// Problems are files that could not be removed (their rows are gone:
	// the next start cleans them up), each with why.
	Problems []Problem `json:"problems"`
}

// Cache reports the KV snapshot cache's size against its quota.
func (s *Settings) Cache() (CacheUsage, error) {
	d, err := s.c.db()
	if err != nil {
		return CacheUsage{}, err
	}
	ctx := s.c.context()
	rows, err := d.ListSnapshots(ctx)
	if err != nil {
		return CacheUsage{}, err
	}
	pinned, err := pinnedSnapshots(s.c)
	if err != nil {
		return CacheUsage{}, err
	}
	quota, err := d.KVQuota(ctx)
	if err != nil {
		return CacheUsage{}, err
	}
	u := CacheUsage{QuotaBytes: quota, Snapshots: len(rows), Dir: storage.KVPath(s.c.dataDir)}
	for _, r := range rows {
		u.UsedBytes += r.Bytes
		if r.Pinned || pinned[r.ID] {
			u.PinnedBytes += r.Bytes
			u.Pinned++
		}
	}
	return u, nil
}

// pinnedSnapshots is the set of snapshot ids library prompts pin.
func pinnedSnapshots(c *core) (map[int64]bool, error) {
	d, err := c.db()
	if err != nil {
		return nil, err
	}
	ps, err := d.ListPrompts(c.context(), "")
	if err != nil {
		return nil, err
	}
	out := map[int64]bool{}
	for _, p := range ps {
		if p.PinnedSnapshotID != 0 {
			out[p.PinnedSnapshotID] = true
		}
	}
	return out, nil
}

// ClearCache deletes the KV snapshots: conversations then prefill their
// history again on their next reply. The prepared prompts' snapshots stay
// unless includePinned (then those prompts are no longer ready to resume).
// A snapshot being restored while it is removed only costs that reply its
// resume: snapshots fail closed.
func (s *Settings) ClearCache(includePinned bool) (ClearCacheResult, error) {
	d, err := s.c.db()
	if err != nil {
		return ClearCacheResult{}, err
	}
	ctx := s.c.context()
	rows, err := d.ListSnapshots(ctx)
	if err != nil {
		return ClearCacheResult{}, err
	}
	pinned, err := pinnedSnapshots(s.c)
	if err != nil {
		return ClearCacheResult{}, err
	}
	res := ClearCacheResult{Problems: []Problem{}}
	dir := storage.KVPath(s.c.dataDir)
	for _, r := range rows {
		if !includePinned && (r.Pinned || pinned[r.ID]) {
			continue
		}
		// The row goes first: no row may point at a missing file.
		if err := d.DeleteSnapshot(ctx, r.ID); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue // another process evicted it meanwhile
			}
			return ClearCacheResult{}, err
		}
		res.Removed++
		res.FreedBytes += r.Bytes
		p := filepath.Join(dir, filepath.FromSlash(r.FilePath))
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			res.Problems = append(res.Problems, Problem{Path: p, Error: fmt.Sprintf("not removed: %v", err)})
		}
	}
	if res.Usage, err = s.Cache(); err != nil {
		return ClearCacheResult{}, err
	}
	return res, nil
}
