package download

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"anechat/internal/atomicfile"
)

// A set is a download of several files that only make sense together (a
// Core ML bundle: a config, sidecars, RoPE tables and chunk directories),
// installed as one folder. Every file is fetched by Fetch (resumed by HTTP
// Range, the same URL rule, size bounds and free-space reserve) into the
// set's work folder, checked against its checksum, and moved into the
// set's staging tree; when every file is there the staging tree is renamed
// into place at once. Until then nothing is at the destination, so a
// crash, a pause or a failure never leaves half a model where the models
// folder would scan it.
//
// The work folder (WORK/NAME, e.g. models/.bundles/NAME) holds:
//
//	set.json        the set (written once, atomically): what to fetch
//	parts/I.part    file I's bytes so far; parts/I.json its Meta
//	files/PATH      the files checked so far, at their place in the bundle
//
// so a set resumes after a restart (OpenSet) from what is on disk, and
// RemoveSet (cancel) removes all of it.

// SetFile is one file of a set.
type SetFile struct {
	// URL is where the file is fetched from (a Hub resolve URL pinned to
	// a commit).
	URL string `json:"url"`
	// Path is where it goes in the installed folder: slash-separated,
	// relative, plain (CheckSetPath).
	Path string `json:"path"`
	// Size is the file's exact size (a larger answer is refused).
	Size int64 `json:"size"`
	// SHA256 is the file's sha256 (lower-case hex), for a file kept in LFS.
	SHA256 string `json:"sha256,omitempty"`
	// GitBlob is the file's Git blob id (sha1 of "blob SIZE\x00" and the
	// content), for a file kept in Git, which has no sha256 on the Hub.
	// One of SHA256 and GitBlob is set: every file is checked.
	GitBlob string `json:"gitBlob,omitempty"`
}

// Set is a set of files to install as the folder Name.
type Set struct {
	// Name is the installed folder's name (a plain name, not hidden).
	Name string `json:"name"`
	// Source says where the set comes from, for the user (e.g.
	// "OWNER/REPO@COMMIT").
	Source string    `json:"source"`
	Files  []SetFile `json:"files"`
	// StartedAt is when the download was first asked for.
	StartedAt time.Time `json:"startedAt"`
}

// Size is the bytes of every file.
func (s *Set) Size() int64 {
	var n int64
	for _, f := range s.Files {
		n += f.Size
	}
	return n
}

// SetOptions say how a set downloads.
type SetOptions struct {
	Options
	// Retries is how many times a file whose connection was lost is asked
	// for again (from where it stopped) before Run gives up (0: 3).
	Retries int
	// RetryDelay is the wait before the first retry, doubled after each
	// (0: 2s).
	RetryDelay time.Duration
}

// FileState is where one file of a set stands.
type FileState string

// File states.
const (
	FileWaiting     FileState = "waiting"
	FileRunning     FileState = "running"
	FileVerifying   FileState = "verifying"
	FileDone        FileState = "done" // checked and staged
	FileFailed      FileState = "failed"
	FileInterrupted FileState = "interrupted" // retrying after a lost connection
)

// FileProgress is one file's progress.
type FileProgress struct {
	Path     string    `json:"path"`
	Received int64     `json:"received"`
	Size     int64     `json:"size"`
	State    FileState `json:"state"`
}

// SetProgress is a set's progress: the whole and each file.
type SetProgress struct {
	Name     string         `json:"name"`
	Received int64          `json:"received"`
	Total    int64          `json:"total"`
	Files    []FileProgress `json:"files"`
	// Current is the index in Files of the file being fetched, -1 when none.
	Current int `json:"current"`
}

// SetJob is a set on disk, ready to run.
type SetJob struct {
	// Set is what it fetches.
	Set Set
	// Dir is its work folder, Dest where it is installed.
	Dir, Dest string
}

// FileError is a set's file that failed, and why.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }
func (e *FileError) Unwrap() error { return e.Err }

// setFile is the set's description in its work folder.
const setFile = "set.json"

// maxSetFiles bounds a set: a bundle has tens of files, a repository
// rarely more than a few hundred.
const maxSetFiles = 10_000

// CheckSetName refuses an installed folder name that is not plain.
func CheckSetName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") || len(name) > 200 {
		return fmt.Errorf("download: %q is not a plain folder name (no slashes, not hidden, under 200 bytes)", name)
	}
	return nil
}

// CheckSetPath refuses a file path that could leave the installed folder
// or is not plain: empty, absolute, a "." or ".." segment, a backslash,
// a hidden first segment.
func CheckSetPath(p string) error {
	if p == "" || len(p) > 1000 || strings.ContainsAny(p, "\\\x00") || path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, ".") {
		return fmt.Errorf("download: %q is not a plain relative path inside the folder", p)
	}
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("download: %q is not a plain relative path inside the folder", p)
		}
	}
	return nil
}

// check refuses a set that could not be installed as described.
func (s *Set) check() error {
	if err := CheckSetName(s.Name); err != nil {
		return err
	}
	if len(s.Files) == 0 || len(s.Files) > maxSetFiles {
		return fmt.Errorf("download: set %s has %d files (want 1..%d)", s.Name, len(s.Files), maxSetFiles)
	}
	seen := map[string]bool{}
	for _, f := range s.Files {
		if err := CheckSetPath(f.Path); err != nil {
			return err
		}
		key := strings.ToLower(f.Path) // two names one case-insensitive volume (APFS) takes for one
		if seen[key] {
			return fmt.Errorf("download: set %s lists %s twice", s.Name, f.Path)
		}
		seen[key] = true
		if f.Size < 0 {
			return fmt.Errorf("download: %s: size %d", f.Path, f.Size)
		}
		switch {
		case f.SHA256 != "" && !isHex(f.SHA256, 64):
			return fmt.Errorf("download: %s: sha256 %q is not 64 hexadecimal digits", f.Path, f.SHA256)
		case f.SHA256 == "" && !isHex(f.GitBlob, 40):
			return fmt.Errorf("download: %s: no checksum (want a sha256 or a Git blob id): every file of a set is checked", f.Path)
		}
	}
	// A file may not also be a directory of another (a/b and a/b/c).
	for _, f := range s.Files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if seen[strings.ToLower(d)] {
				return fmt.Errorf("download: set %s lists %s both as a file and as a folder", s.Name, d)
			}
		}
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// PrepareSet writes set into its work folder work/NAME, to be installed as
// dest/NAME, and returns its job. It refuses a set whose folder is already
// in dest or already being downloaded (OpenSet continues that one).
func PrepareSet(work, dest string, set Set) (*SetJob, error) {
	for i := range set.Files {
		set.Files[i].SHA256 = strings.ToLower(set.Files[i].SHA256)
		set.Files[i].GitBlob = strings.ToLower(set.Files[i].GitBlob)
	}
	if err := set.check(); err != nil {
		return nil, err
	}
	j := &SetJob{Set: set, Dir: filepath.Join(work, set.Name), Dest: filepath.Join(dest, set.Name)}
	if _, err := os.Lstat(j.Dest); err == nil {
		return nil, fmt.Errorf("download: %s is already there: remove or rename it first", j.Dest)
	}
	if _, err := os.Lstat(filepath.Join(j.Dir, setFile)); err == nil {
		return nil, fmt.Errorf("download: %s is already being downloaded (%s): resume or cancel it", set.Name, j.Dir)
	}
	// A work folder without its set.json is a leftover of a set that never
	// started: nothing in it can be trusted.
	if err := os.RemoveAll(j.Dir); err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(j.Dir, "parts"), 0o755); err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	b, err := json.MarshalIndent(&set, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(j.Dir, setFile), append(b, '\n'), 0o600); err != nil {
		os.RemoveAll(j.Dir)
		return nil, fmt.Errorf("download: %w", err)
	}
	return j, nil
}

// OpenSet reads the set left in work/name (by PrepareSet, in this run or
// an earlier one), to be installed in dest.
func OpenSet(work, dest, name string) (*SetJob, error) {
	if err := CheckSetName(name); err != nil {
		return nil, err
	}
	dir := filepath.Join(work, name)
	b, err := os.ReadFile(filepath.Join(dir, setFile))
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	var set Set
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("download: %s: %w (cancel the download and start it again)", filepath.Join(dir, setFile), err)
	}
	if set.Name != name {
		return nil, fmt.Errorf("download: %s describes %q, not %q (cancel the download and start it again)", filepath.Join(dir, setFile), set.Name, name)
	}
	if err := set.check(); err != nil {
		return nil, fmt.Errorf("%w (in %s: cancel the download and start it again)", err, filepath.Join(dir, setFile))
	}
	return &SetJob{Set: set, Dir: dir, Dest: filepath.Join(dest, name)}, nil
}

// ListSets returns the names of the sets waiting in work.
func ListSets(work string) ([]string, error) {
	entries, err := os.ReadDir(work)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && CheckSetName(e.Name()) == nil {
			if _, err := os.Stat(filepath.Join(work, e.Name(), setFile)); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	return out, nil
}

// RemoveSet removes the set's work folder: what a cancel leaves is nothing.
// The set must not be running.
func RemoveSet(work, name string) error {
	if err := CheckSetName(name); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(work, name)); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	return nil
}

func (j *SetJob) part(i int) string { return filepath.Join(j.Dir, "parts", strconv.Itoa(i)+".part") }
func (j *SetJob) meta(i int) string { return filepath.Join(j.Dir, "parts", strconv.Itoa(i)+".json") }
func (j *SetJob) staged(i int) string {
	return filepath.Join(j.Dir, "files", filepath.FromSlash(j.Set.Files[i].Path))
}

// Progress reads from disk where the set stands (what Run reports, also
// for a set that is not running).
func (j *SetJob) Progress() SetProgress {
	p := SetProgress{Name: j.Set.Name, Current: -1, Files: make([]FileProgress, len(j.Set.Files))}
	for i, f := range j.Set.Files {
		fp := FileProgress{Path: f.Path, Size: f.Size, State: FileWaiting}
		if st, err := os.Stat(j.staged(i)); err == nil && st.Size() == f.Size {
			fp.Received, fp.State = f.Size, FileDone
		} else if st, err := os.Stat(j.part(i)); err == nil {
			fp.Received = min(st.Size(), f.Size)
		}
		p.Files[i] = fp
		p.Received += fp.Received
		p.Total += f.Size
	}
	return p
}

// Run fetches every file not yet checked, checks each, and when all are
// there installs the folder at Dest. progress (which may be nil) hears the
// set's and each file's bytes after every write and every change of
// state; the caller throttles what it shows.
//
// It returns nil once the folder is installed; ctx's cause when cancelled
// (the work folder is kept: Run again continues, RemoveSet discards it);
// a *FileError wrapping Fetch's errors (a *ChecksumError for a file whose
// bytes are not the expected ones: that file's bytes are discarded, the
// others kept, so Run again fetches it alone); a *SpaceError before any
// byte when the volume cannot hold the rest of the set and keep the
// reserve.
func (j *SetJob) Run(ctx context.Context, o SetOptions, progress func(SetProgress)) error {
	if progress == nil {
		progress = func(SetProgress) {}
	}
	if o.Retries <= 0 {
		o.Retries = 3
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = 2 * time.Second
	}
	if _, err := os.Lstat(j.Dest); err == nil {
		if _, serr := os.Stat(filepath.Join(j.Dir, "files")); errors.Is(serr, fs.ErrNotExist) {
			// Installed by a run that stopped before removing its work folder.
			return RemoveSet(filepath.Dir(j.Dir), j.Set.Name)
		}
		return fmt.Errorf("download: %s appeared meanwhile: remove or rename it, then resume", j.Dest)
	}
	if err := os.MkdirAll(filepath.Join(j.Dir, "parts"), 0o755); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	p := j.Progress()
	if err := j.checkSpace(o.Options, p); err != nil {
		return err
	}
	progress(p)
	for i, f := range j.Set.Files {
		if p.Files[i].State == FileDone {
			continue
		}
		p.Current = i
		if err := j.fetch(ctx, o, i, &p, progress); err != nil {
			p.Files[i].State = FileFailed
			if ctx.Err() != nil {
				p.Files[i].State = FileWaiting
			}
			p.Current = -1
			progress(p)
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return &FileError{Path: f.Path, Err: err}
		}
	}
	p.Current = -1
	if err := j.install(); err != nil {
		return err
	}
	progress(p)
	return nil
}

// checkSpace refuses to start when the rest of the set would leave less
// than the reserve free on the work folder's volume (each file's transfer
// watches the space as it goes too).
func (j *SetJob) checkSpace(o Options, p SetProgress) error {
	space := o.Space
	if space == nil {
		space = DiskSpace
	}
	free, size, err := space(j.Dir)
	if err != nil {
		return nil // not known here: each transfer still bounds itself
	}
	reserve := o.Reserve
	if reserve <= 0 {
		reserve = DefaultReserve(size)
	}
	if need := p.Total - p.Received; free-need < reserve {
		return &SpaceError{Dir: j.Dir, Free: free, Reserve: reserve, Need: need}
	}
	return nil
}

// fetch brings file i to its staged place: Fetch with retries after a lost
// connection, then the checksum, then a rename into the staging tree.
func (j *SetJob) fetch(ctx context.Context, o SetOptions, i int, p *SetProgress, progress func(SetProgress)) error {
	f := j.Set.Files[i]
	m := Meta{URL: f.URL, Name: path.Base(f.Path), SHA256: f.SHA256, Total: -1, Expected: f.Size, StartedAt: j.Set.StartedAt}
	if old, err := LoadMeta(j.meta(i)); err == nil && old.URL == f.URL {
		m = old // the validators of the bytes the partial file holds
	} else {
		os.Remove(j.part(i)) // bytes nothing describes
	}
	save := func(m *Meta) error { return SaveMeta(j.meta(i), m) }
	before := p.Received - p.Files[i].Received
	report := func(received, _ int64) {
		p.Files[i].Received, p.Files[i].State = received, FileRunning
		p.Received = before + received
		progress(*p)
	}
	p.Files[i].State = FileRunning
	progress(*p)
	var err error
	if f.Size == 0 {
		// An empty file: nothing to ask for (a Range of nothing is not
		// satisfiable); its checksum still holds it to the tree.
		err = os.WriteFile(j.part(i), nil, 0o644)
	} else {
		for attempt := 0; ; attempt++ {
			err = Fetch(ctx, o.Options, j.part(i), &m, save, report)
			var ie *InterruptedError
			if err == nil || !errors.As(err, &ie) || attempt >= o.Retries || ctx.Err() != nil {
				break
			}
			p.Files[i].State = FileInterrupted
			progress(*p)
			select {
			case <-time.After(o.RetryDelay << attempt):
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				err = context.Cause(ctx)
				break
			}
		}
	}
	if err != nil {
		return err
	}
	p.Files[i].State = FileVerifying
	progress(*p)
	if err := j.verify(ctx, i); err != nil {
		var ce *ChecksumError
		if errors.As(err, &ce) {
			// The bytes are wrong: keeping them would only resume a bad file.
			os.Remove(j.part(i))
			os.Remove(j.meta(i))
			p.Received -= p.Files[i].Received
			p.Files[i].Received = 0
		}
		return err
	}
	dst := j.staged(i)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if err := os.Rename(j.part(i), dst); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	os.Remove(j.meta(i))
	p.Files[i].Received, p.Files[i].State = f.Size, FileDone
	p.Received = before + f.Size
	progress(*p)
	return nil
}

// verify checks file i's partial file against its sha256 or Git blob id,
// and its size.
func (j *SetJob) verify(ctx context.Context, i int) error {
	return verifyFile(ctx, j.part(i), j.Set.Files[i])
}

// verifyFile checks the file at p against f's size and checksum.
func verifyFile(ctx context.Context, p string, f SetFile) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if st.Size() != f.Size {
		return fmt.Errorf("download: %s has %d bytes, the file has %d", p, st.Size(), f.Size)
	}
	if f.SHA256 != "" {
		_, err := Verify(ctx, p, f.SHA256)
		return err
	}
	got, err := gitBlobID(p, f.Size)
	if err != nil {
		return err
	}
	if got != f.GitBlob {
		return &ChecksumError{Want: f.GitBlob, Got: got, Kind: "git blob id"}
	}
	return nil
}

// VerifyInstalled checks that the folder dir holds every file of the set
// with its size and checksum (a set installed before, or put there by
// hand); extra files are not looked at. The error is a *FileError naming
// the first file that differs.
func (s *Set) VerifyInstalled(ctx context.Context, dir string) error {
	if err := s.check(); err != nil {
		return err
	}
	for _, f := range s.Files {
		if err := verifyFile(ctx, filepath.Join(dir, filepath.FromSlash(f.Path)), f); err != nil {
			return &FileError{Path: f.Path, Err: err}
		}
	}
	return nil
}

// gitBlobID is the Git blob id of the file at p (size bytes).
func gitBlobID(p string, size int64) (string, error) {
	fh, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	defer fh.Close()
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", size)
	if _, err := io.Copy(h, fh); err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// install syncs the staging tree's folders (each file was synced when its
// last byte came) and renames the tree to Dest in one step, then removes
// the work folder.
func (j *SetJob) install() error {
	files := filepath.Join(j.Dir, "files")
	var dirs []string
	err := filepath.WalkDir(files, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	for k := len(dirs) - 1; k >= 0; k-- {
		if err := atomicfile.SyncDir(dirs[k]); err != nil {
			return fmt.Errorf("download: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(j.Dest), 0o755); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	var placed *atomicfile.SyncDirError
	if err := atomicfile.Rename(files, j.Dest); err != nil && !errors.As(err, &placed) {
		return fmt.Errorf("download: install %s: %w", j.Dest, err)
	}
	return RemoveSet(filepath.Dir(j.Dir), j.Set.Name)
}
