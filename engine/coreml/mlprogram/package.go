package mlprogram

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Bounds on a package's other files.
const (
	maxManifestBytes = 1 << 20 // Manifest.json
	maxPackageFiles  = 4096    // files and directories walked for the package's size
)

// ErrPackage is wrapped by every error about an .mlpackage that cannot be
// read: a missing or damaged file, a path leaving the package, a file that
// is not a regular file. The error names the file.
var ErrPackage = errors.New("unreadable .mlpackage")

// Blob is one blob of a weight file: its data type (coremltools'
// BlobDataType, MILBlob/Blob/BlobDataType.hpp) and where its data lies.
type Blob struct {
	DType      uint32
	Size       int64 // bytes of data
	DataOffset int64
}

// Package is a saved .mlpackage: its program, the blobs the program
// references, and its size on disk.
type Package struct {
	// Path is the package directory.
	Path string
	// ModelFile is the program's path inside the package
	// (Data/com.apple.CoreML/model.mlmodel).
	ModelFile string
	Model     *Model
	// Bytes is the size of every file of the package: what an iOS device
	// loads, and what `du` reports of it.
	Bytes int64
	// WeightFiles maps each weight file the program references (its path
	// inside the package) to its size.
	WeightFiles map[string]int64
	// Blobs are the blobs the program references.
	Blobs map[BlobRef]Blob
}

// WeightBytes is the size of the blobs fn references (each counted once,
// also when several ops share it).
func (p *Package) WeightBytes(fn *Function) int64 {
	seen := map[BlobRef]bool{}
	var n int64
	walkOps(fn.Block, func(op *Op) {
		for _, r := range op.Blobs {
			if !seen[r] {
				seen[r] = true
				n += p.Blobs[r].Size
			}
		}
	})
	return n
}

// walkOps calls visit on every op of blk, nested blocks included, in order.
func walkOps(blk *Block, visit func(op *Op)) {
	if blk == nil {
		return
	}
	for _, op := range blk.Ops {
		visit(op)
		for _, b := range op.Blocks {
			walkOps(b, visit)
		}
	}
}

// packageManifest is the part of an .mlpackage's Manifest.json that says
// where the model specification is.
type packageManifest struct {
	Root  string `json:"rootModelIdentifier"`
	Items map[string]struct {
		Path string `json:"path"`
	} `json:"itemInfoEntries"`
}

// OpenPackage reads the .mlpackage directory dir: Manifest.json, the model
// it names (which must be an ML program) and the metadata of every blob
// the program references. Only regular files inside dir are read; any
// other file, a path leaving the package, or a damaged file is an error
// wrapping ErrPackage (or ErrFormat for the program) that names the file.
func OpenPackage(ctx context.Context, dir string) (*Package, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPackage, err)
	}
	if !fi.IsDir() {
		// A symbolic link is not followed: what is read stays inside the
		// bundle that names the package.
		return nil, fmt.Errorf("%w: %s is not a directory (it is %s; an .mlpackage is a directory)", ErrPackage, dir, kindOf(fi.Mode()))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPackage, err)
	}
	defer root.Close()
	p := &Package{Path: dir, WeightFiles: map[string]int64{}, Blobs: map[BlobRef]Blob{}}

	raw, err := readAll(root, "Manifest.json", maxManifestBytes)
	if err != nil {
		return nil, p.errorf("Manifest.json", err)
	}
	var man packageManifest
	if err := json.Unmarshal(raw, &man); err != nil {
		return nil, p.errorf("Manifest.json", fmt.Errorf("not valid JSON: %w", err))
	}
	item, ok := man.Items[man.Root]
	if !ok || man.Root == "" {
		return nil, p.errorf("Manifest.json", fmt.Errorf("rootModelIdentifier %q names no entry of itemInfoEntries", man.Root))
	}
	p.ModelFile, err = inside("Data", item.Path)
	if err != nil {
		return nil, p.errorf("Manifest.json", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	raw, err = readAll(root, p.ModelFile, MaxModelBytes)
	if err != nil {
		return nil, p.errorf(p.ModelFile, err)
	}
	if p.Model, err = ReadProgram(raw); err != nil {
		return nil, p.errorf(p.ModelFile, err)
	}
	if err := p.readBlobs(ctx, root); err != nil {
		return nil, err
	}
	if p.Bytes, err = treeSize(root); err != nil {
		return nil, p.errorf(".", err)
	}
	return p, nil
}

// errorf wraps err as an error about file of the package.
func (p *Package) errorf(file string, err error) error {
	if errors.Is(err, ErrFormat) {
		return fmt.Errorf("%s: %w", filepath.Join(p.Path, file), err)
	}
	return fmt.Errorf("%w: %s: %w", ErrPackage, filepath.Join(p.Path, file), err)
}

// inside joins dir and the slash-separated rel, refusing a rel that is
// absolute or climbs out of dir.
func inside(dir, rel string) (string, error) {
	if rel == "" || !filepath.IsLocal(filepath.FromSlash(rel)) || strings.Contains(rel, `\`) {
		return "", fmt.Errorf("path %q leaves the package or is empty", rel)
	}
	return path.Join(dir, rel), nil
}

// readBlobs resolves every blob the program references and reads its
// metadata (coremltools' MILBlob storage format, MILBlob/Blob/
// StorageFormat.hpp: a 64-byte storage_header {count, version = 2}, then
// per blob a 64-byte blob_metadata {sentinel 0xDEADBEEF, mil_dtype,
// sizeInBytes, offset, ...} at the offset the program gives, its data at
// offset).
func (p *Package) readBlobs(ctx context.Context, root *os.Root) error {
	refs := map[string][]BlobRef{}
	for _, fn := range p.Model.Functions {
		walkOps(fn.Block, func(op *Op) {
			for _, r := range op.Blobs {
				refs[r.File] = append(refs[r.File], r)
			}
		})
	}
	files := make([]string, 0, len(refs))
	for f := range refs {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, name := range files {
		rel, ok := strings.CutPrefix(name, "@model_path/")
		if !ok {
			return p.errorf(p.ModelFile, fmt.Errorf("weight file %q is not under @model_path/", name))
		}
		file, err := inside(path.Dir(p.ModelFile), rel)
		if err != nil {
			return p.errorf(p.ModelFile, fmt.Errorf("weight file %q: %w", name, err))
		}
		if err := p.readBlobFile(ctx, root, file, refs[name]); err != nil {
			return p.errorf(file, err)
		}
	}
	return nil
}

// readBlobFile reads the metadata of the blobs refs in the weight file
// file.
func (p *Package) readBlobFile(ctx context.Context, root *os.Root, file string, refs []BlobRef) error {
	f, size, err := openRegular(root, file)
	if err != nil {
		return err
	}
	defer f.Close()
	p.WeightFiles[file] = size
	var hdr [64]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("storage header: %w", err)
	}
	if v := binary.LittleEndian.Uint32(hdr[4:]); v != 2 {
		return fmt.Errorf("storage format version %d (coremltools writes version 2)", v)
	}
	for i, r := range refs {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if _, done := p.Blobs[r]; done {
			continue
		}
		if r.Offset < 64 || r.Offset > uint64(size) || uint64(size)-r.Offset < 64 {
			return fmt.Errorf("blob metadata at offset %d is outside the file's %d bytes", r.Offset, size)
		}
		var md [64]byte
		if _, err := f.ReadAt(md[:], int64(r.Offset)); err != nil {
			return fmt.Errorf("blob metadata at offset %d: %w", r.Offset, err)
		}
		if s := binary.LittleEndian.Uint32(md[0:]); s != 0xDEADBEEF {
			return fmt.Errorf("blob metadata at offset %d: sentinel %#x, not 0xdeadbeef", r.Offset, s)
		}
		n := binary.LittleEndian.Uint64(md[8:])
		at := binary.LittleEndian.Uint64(md[16:])
		if at > uint64(size) || n > uint64(size)-at {
			return fmt.Errorf("blob at offset %d: %d bytes of data at %d are outside the file's %d bytes", r.Offset, n, at, size)
		}
		p.Blobs[r] = Blob{DType: binary.LittleEndian.Uint32(md[4:]), Size: int64(n), DataOffset: int64(at)}
	}
	return nil
}

// openRegular opens the file name inside root for reading, refusing
// anything that is not a regular file (a symbolic link, a device, a FIFO,
// a directory); root refuses a name leaving it. It returns the file's
// size. (The one place this package opens a file: engine/model's shared
// regular-file helper can replace it.)
func openRegular(root *os.Root, name string) (*os.File, int64, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("not a regular file (%s)", kindOf(fi.Mode()))
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, 0, err
	}
	got, err := f.Stat()
	if err == nil && !os.SameFile(fi, got) {
		err = errors.New("the file changed while it was opened")
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, got.Size(), nil
}

// readAll reads the regular file name inside root, refusing one larger
// than limit bytes.
func readAll(root *os.Root, name string, limit int64) ([]byte, error) {
	f, size, err := openRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > limit {
		return nil, fmt.Errorf("%d bytes, more than the %d this reader accepts", size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("more than the %d bytes this reader accepts", limit)
	}
	return b, nil
}

// treeSize sums the sizes of the files under root, refusing any entry
// that is neither a directory nor a regular file, and more than
// maxPackageFiles entries.
func treeSize(root *os.Root) (int64, error) {
	var total int64
	n := 0
	err := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n++
		if n > maxPackageFiles {
			return fmt.Errorf("more than %d files", maxPackageFiles)
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file (%s)", name, kindOf(d.Type()))
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		total += fi.Size()
		return nil
	})
	return total, err
}

// kindOf names the kind of file a mode describes.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a file"
	}
	return "not a plain file"
}
