package mlcore

// The Core ML calls, through purego without cgo. Every message goes through
// a send* helper with a selector from calls.go and arguments made by its a*
// constructors; calls_test.go checks each call site against that table on
// any platform. Nothing here runs in CI (which has no Mac): it is
// type-checked there by `GOOS=darwin GOARCH=arm64 go vet`.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
	"golang.org/x/sys/unix"
)

// The classes the calls are sent to.
var classNames = [...]string{
	"NSString", "NSURL", "NSNumber", "NSArray", "NSDictionary",
	"MLModel", "MLModelConfiguration", "MLMultiArray", "MLFeatureValue",
	"MLDictionaryFeatureProvider", "MLPredictionOptions",
}

// objcRuntime is the resolved Objective-C side: classes, selectors, and
// objc_msgSend registered once per result type (purego passes the
// variadic arguments as the method's own prototype, not as C varargs).
type objcRuntime struct {
	os      osVersion
	classes map[string]uintptr // classNames, and optionalClasses (0 where missing)
	sels    [numSels]uintptr

	msgID       func(self, op uintptr, args ...any) uintptr
	msgVoid     func(self, op uintptr, args ...any)
	msgInt      func(self, op uintptr, args ...any) int
	msgUint     func(self, op uintptr, args ...any) uint
	msgLongLong func(self, op uintptr, args ...any) int64
	msgPtr      func(self, op uintptr, args ...any) unsafe.Pointer
	msgBool     func(self, op uintptr, args ...any) bool
	msgDouble   func(self, op uintptr, args ...any) float64
	poolPush    func() unsafe.Pointer
	poolPop     func(pool unsafe.Pointer)

	// cv is CoreVideo, for IOSurface-backed buffers; cvKeys holds the
	// values of cvars by name. cvErr says why they are missing (nil when
	// they are not).
	cv     coreVideo
	cvKeys map[string]uintptr
	cvErr  error
}

// openObjC loads libobjc and Core ML and resolves everything the calls use;
// it fails with an error (never a panic) when any piece is missing.
func openObjC() (*objcRuntime, error) {
	ver, err := unix.Sysctl("kern.osproductversion")
	if err != nil {
		return nil, fmt.Errorf("mlcore: reading the macOS version: %w", err)
	}
	r := &objcRuntime{classes: map[string]uintptr{}}
	if r.os, err = parseOSVersion(ver); err != nil {
		return nil, err
	}
	libobjc, err := purego.Dlopen(libobjcPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("mlcore: loading the Objective-C runtime %s: %w", libobjcPath, err)
	}
	if _, err := purego.Dlopen(coreMLPath, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		return nil, fmt.Errorf("mlcore: loading Core ML %s: %w", coreMLPath, err)
	}
	sym := func(name string) (uintptr, error) {
		p, err := purego.Dlsym(libobjc, name)
		if err != nil {
			return 0, fmt.Errorf("mlcore: %s: %w", name, err)
		}
		return p, nil
	}
	msgSend, err := sym(fnMsgSend)
	if err != nil {
		return nil, err
	}
	push, err := sym(fnPoolPush)
	if err != nil {
		return nil, err
	}
	pop, err := sym(fnPoolPop)
	if err != nil {
		return nil, err
	}
	purego.RegisterFunc(&r.msgID, msgSend)
	purego.RegisterFunc(&r.msgVoid, msgSend)
	purego.RegisterFunc(&r.msgInt, msgSend)
	purego.RegisterFunc(&r.msgUint, msgSend)
	purego.RegisterFunc(&r.msgLongLong, msgSend)
	purego.RegisterFunc(&r.msgPtr, msgSend)
	purego.RegisterFunc(&r.msgBool, msgSend)
	purego.RegisterFunc(&r.msgDouble, msgSend)
	purego.RegisterFunc(&r.poolPush, push)
	purego.RegisterFunc(&r.poolPop, pop)
	// CoreVideo is needed only for IOSurface-backed buffers: without it
	// Core ML still runs on plain memory (AllocSurface says why not).
	r.cvErr = r.openCoreVideo()

	// objc_getClass and sel_registerName through purego's objc package.
	for _, name := range classNames {
		c := objc.GetClass(name)
		if c == 0 {
			return nil, fmt.Errorf("mlcore: the Objective-C class %s is missing (macOS %v)", name, r.os)
		}
		r.classes[name] = uintptr(c)
	}
	for _, c := range optionalClasses {
		r.classes[c.Name] = uintptr(objc.GetClass(c.Name))
	}
	for s := range numSels {
		r.sels[s] = uintptr(objc.RegisterName(methods[s].Name))
	}
	return r, nil
}

// openCoreVideo loads CoreVideo, registers every field of coreVideo with
// the function of its name and reads the attribute keys of cvars.
func (r *objcRuntime) openCoreVideo() error {
	lib, err := purego.Dlopen(coreVideoPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("loading CoreVideo %s: %w", coreVideoPath, err)
	}
	cv := reflect.ValueOf(&r.cv).Elem()
	for i := range cv.NumField() {
		name := cv.Type().Field(i).Name
		fn, err := purego.Dlsym(lib, name)
		if err != nil {
			return fmt.Errorf("CoreVideo %s: %w", name, err)
		}
		purego.RegisterFunc(cv.Field(i).Addr().Interface(), fn)
	}
	r.cvKeys = map[string]uintptr{}
	for _, v := range cvars {
		addr, err := purego.Dlsym(lib, v.Name)
		if err != nil {
			return fmt.Errorf("CoreVideo %s: %w", v.Name, err)
		}
		// The symbol is a const CFStringRef: read the reference it holds.
		r.cvKeys[v.Name] = **(**uintptr)(unsafe.Pointer(&addr))
		if r.cvKeys[v.Name] == 0 {
			return fmt.Errorf("CoreVideo %s is NULL", v.Name)
		}
	}
	return nil
}

// args checks a call against the table (calls_test.go does the same for
// every call site statically, so this never fires) and unwraps the values.
func (r *objcRuntime) args(s sel, helper string, args []arg) []any {
	if msg := checkCall(s, helper, args); msg != "" {
		panic("mlcore: call does not match calls.go: " + msg)
	}
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = a.v
	}
	return vals
}

func (r *objcRuntime) sendID(recv uintptr, s sel, args ...arg) uintptr {
	return r.msgID(recv, r.sels[s], r.args(s, "sendID", args)...)
}

func (r *objcRuntime) sendVoid(recv uintptr, s sel, args ...arg) {
	r.msgVoid(recv, r.sels[s], r.args(s, "sendVoid", args)...)
}

func (r *objcRuntime) sendInt(recv uintptr, s sel, args ...arg) int {
	return r.msgInt(recv, r.sels[s], r.args(s, "sendInt", args)...)
}

func (r *objcRuntime) sendUint(recv uintptr, s sel, args ...arg) uint {
	return r.msgUint(recv, r.sels[s], r.args(s, "sendUint", args)...)
}

func (r *objcRuntime) sendLongLong(recv uintptr, s sel, args ...arg) int64 {
	return r.msgLongLong(recv, r.sels[s], r.args(s, "sendLongLong", args)...)
}

func (r *objcRuntime) sendPtr(recv uintptr, s sel, args ...arg) unsafe.Pointer {
	return r.msgPtr(recv, r.sels[s], r.args(s, "sendPtr", args)...)
}

func (r *objcRuntime) sendBool(recv uintptr, s sel, args ...arg) bool {
	return r.msgBool(recv, r.sels[s], r.args(s, "sendBool", args)...)
}

func (r *objcRuntime) sendDouble(recv uintptr, s sel, args ...arg) float64 {
	return r.msgDouble(recv, r.sels[s], r.args(s, "sendDouble", args)...)
}

// withPool runs f inside an autorelease pool on one locked OS thread (a
// pool belongs to the thread that pushed it), so every autoreleased object
// f makes is released when it returns.
func (r *objcRuntime) withPool(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pool := r.poolPush()
	defer r.poolPop(pool)
	return f()
}

// newObject returns an owned (+1) object of class made with alloc and init.
func (r *objcRuntime) newObject(class string) uintptr {
	return r.sendID(r.sendID(r.classes[class], selAlloc), selInit)
}

func (r *objcRuntime) release(obj uintptr) {
	if obj != 0 {
		r.sendVoid(obj, selRelease)
	}
}

// newString returns an owned (+1) NSString holding s.
func (r *objcRuntime) newString(s string) (uintptr, error) {
	b := append([]byte(s), 0) // never empty, so &b[0] exists
	str := r.sendID(r.sendID(r.classes["NSString"], selAlloc), selStringInitWithBytes,
		aPtr(unsafe.Pointer(&b[0])), aUint(uint(len(s))), aUint(nsUTF8StringEncoding))
	runtime.KeepAlive(b)
	if str == 0 {
		return 0, fmt.Errorf("mlcore: %q is not valid UTF-8", s)
	}
	return str, nil
}

// goString copies an NSString's UTF-8 bytes into a Go string ("" for nil).
func (r *objcRuntime) goString(str uintptr) string {
	if str == 0 {
		return ""
	}
	p := r.sendPtr(str, selStringUTF8)
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// fileURL returns an autoreleased file NSURL for path.
func (r *objcRuntime) fileURL(path string, dir bool) (uintptr, error) {
	str, err := r.newString(path)
	if err != nil {
		return 0, err
	}
	defer r.release(str)
	url := r.sendID(r.classes["NSURL"], selURLFileURLWithPath, aID(str), aBool(dir))
	if url == 0 {
		return 0, fmt.Errorf("mlcore: no file URL for %s", path)
	}
	return url, nil
}

// numbers returns an autoreleased NSArray<NSNumber *> of vals.
func (r *objcRuntime) numbers(vals []int) uintptr {
	ids := make([]uintptr, len(vals))
	for i, v := range vals {
		ids[i] = r.sendID(r.classes["NSNumber"], selNumberWithLongLong, aLongLong(int64(v)))
	}
	return r.sendID(r.classes["NSArray"], selArrayWithObjects, aIDs(ids), aUint(uint(len(ids))))
}

// ints reads an NSArray<NSNumber *>.
func (r *objcRuntime) ints(arr uintptr) []int {
	if arr == 0 {
		return nil
	}
	out := make([]int, r.sendUint(arr, selArrayCount))
	for i := range out {
		num := r.sendID(arr, selArrayObjectAtIndex, aUint(uint(i)))
		out[i] = int(r.sendLongLong(num, selNumberLongLongValue))
	}
	return out
}

// dictionary returns an autoreleased NSDictionary of keys[i] -> vals[i].
func (r *objcRuntime) dictionary(keys, vals []uintptr) uintptr {
	return r.sendID(r.classes["NSDictionary"], selDictionaryWithObjects, aIDs(vals), aIDs(keys), aUint(uint(len(keys))))
}

// nsError reads an NSError through the table's selectors.
type nsError struct {
	r  *objcRuntime
	id uintptr
}

func (e nsError) Domain() string { return e.r.goString(e.r.sendID(e.id, selErrorDomain)) }
func (e nsError) Code() int      { return e.r.sendInt(e.id, selErrorCode) }
func (e nsError) LocalizedDescription() string {
	return e.r.goString(e.r.sendID(e.id, selErrorLocalizedDescription))
}

// fail turns the NSError a call s left in errObj (0 if none) into a Go
// error. It must run inside the pool the NSError was autoreleased into.
func (r *objcRuntime) fail(s sel, subject string, errObj uintptr) error {
	if errObj == 0 {
		return callError(methods[s].Name, subject, nil)
	}
	return callError(methods[s].Name, subject, nsError{r, errObj})
}

// multiArray returns an owned MLMultiArray over b's memory (no copy, no
// deallocator: the Go side owns the memory).
func (r *objcRuntime) multiArray(b Buffer, subject string) (uintptr, error) {
	var errObj uintptr
	arr := r.sendID(r.sendID(r.classes["MLMultiArray"], selAlloc), selArrayInitWithDataPointer,
		aPtr(b.ptr), aID(r.numbers(b.shape)), aInt(int(b.dtype)), aID(r.numbers(b.strides)), aNilBlock(), aErr(&errObj))
	if arr == 0 {
		return 0, r.fail(selArrayInitWithDataPointer, subject, errObj)
	}
	return arr, nil
}

// coreML implements Runtime.
type coreML struct{ r *objcRuntime }

// New returns Core ML on this Mac.
func New() (Runtime, error) {
	r, err := openObjC()
	if err != nil {
		return nil, err
	}
	return &coreML{r}, nil
}

// Compile calls +[MLModel compileModelAtURL:error:].
func (c *coreML) Compile(ctx context.Context, pkg string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(pkg)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("mlcore: model package: %w", err)
	}
	r := c.r
	var out string
	err = r.withPool(func() error {
		url, err := r.fileURL(abs, st.IsDir())
		if err != nil {
			return err
		}
		var errObj uintptr
		compiled := r.sendID(r.classes["MLModel"], selModelCompile, aID(url), aErr(&errObj))
		if compiled == 0 {
			return r.fail(selModelCompile, abs, errObj)
		}
		out = r.goString(r.sendID(compiled, selURLPath))
		if out == "" {
			return fmt.Errorf("mlcore: compiling %s: Core ML returned a URL without a path", abs)
		}
		return nil
	})
	return out, err
}

// Load calls +[MLModel modelWithContentsOfURL:configuration:error:] with
// the compute units and function name, and reads the model description.
func (c *coreML) Load(ctx context.Context, compiled string, opts LoadOptions) (Function, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := c.r
	units, since, err := opts.ComputeUnits.mlComputeUnits()
	if err != nil {
		return nil, err
	}
	if since != "" {
		if err := requireSince(r.os, since, "compute units "+opts.ComputeUnits.String()); err != nil {
			return nil, err
		}
	}
	if opts.FunctionName != "" {
		if err := requireMethod(r.os, selConfigSetFunctionName, "choosing a function of a multifunction model"); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(compiled)
	if err != nil {
		return nil, err
	}
	subject := abs
	if opts.FunctionName != "" {
		subject = fmt.Sprintf("function %q of %s", opts.FunctionName, abs)
	}
	f := &function{r: r, subject: subject}
	err = r.withPool(func() error {
		url, err := r.fileURL(abs, true)
		if err != nil {
			return err
		}
		cfg := r.newObject("MLModelConfiguration")
		defer r.release(cfg)
		r.sendVoid(cfg, selConfigSetComputeUnits, aInt(units))
		if opts.FunctionName != "" {
			name, err := r.newString(opts.FunctionName)
			if err != nil {
				return err
			}
			defer r.release(name)
			r.sendVoid(cfg, selConfigSetFunctionName, aID(name))
		}
		var errObj uintptr
		model := r.sendID(r.classes["MLModel"], selModelWithContentsOfURL, aID(url), aID(cfg), aErr(&errObj))
		if model == 0 {
			return r.fail(selModelWithContentsOfURL, subject, errObj)
		}
		desc := r.sendID(model, selModelDescription)
		f.ins = r.features(r.sendID(desc, selDescriptionInputs))
		f.outs = r.features(r.sendID(desc, selDescriptionOutputs))
		f.model = r.sendID(model, selRetain) // outlives the pool
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// features reads an NSDictionary<NSString *, MLFeatureDescription *>.
func (r *objcRuntime) features(dict uintptr) []FeatureSpec {
	if dict == 0 {
		return nil
	}
	keys := r.sendID(dict, selDictionaryAllKeys)
	specs := make([]FeatureSpec, r.sendUint(keys, selArrayCount))
	for i := range specs {
		key := r.sendID(keys, selArrayObjectAtIndex, aUint(uint(i)))
		fd := r.sendID(dict, selDictionaryObjectForKey, aID(key))
		specs[i].Name = r.goString(key)
		if r.sendInt(fd, selFeatureDescriptionType) != mlFeatureTypeMultiArray {
			continue
		}
		if c := r.sendID(fd, selFeatureDescriptionConstraint); c != 0 {
			specs[i].MultiArray = true
			specs[i].DType = DType(r.sendInt(c, selConstraintDataType))
			specs[i].Shape = r.ints(r.sendID(c, selConstraintShape))
		}
	}
	sortSpecs(specs)
	return specs
}

// function implements Function over one retained MLModel.
type function struct {
	r       *objcRuntime
	subject string
	ins     []FeatureSpec
	outs    []FeatureSpec

	mu    sync.Mutex
	model uintptr // retained; 0 once closed
	stats Stats
}

// Inputs returns the model description's inputs, sorted by name.
func (f *function) Inputs() []FeatureSpec { return cloneSpecs(f.ins) }

// Outputs returns the model description's outputs, sorted by name.
func (f *function) Outputs() []FeatureSpec { return cloneSpecs(f.outs) }

// Stats returns the counters.
func (f *function) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Close releases the MLModel; later calls do nothing.
func (f *function) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.model == 0 {
		return nil
	}
	model := f.model
	f.model = 0
	return f.r.withPool(func() error {
		f.r.release(model)
		return nil
	})
}

// Predict calls -[MLModel predictionFromFeatures:options:error:] with
// inputs wrapped in MLMultiArrays over the host buffers and the outputs'
// buffers as output backings.
func (f *function) Predict(ctx context.Context, inputs, outputs map[string]Buffer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.model == 0 {
		return fmt.Errorf("mlcore: %s: Predict after Close", f.subject)
	}
	if err := checkIO(f.subject, f.ins, f.outs, inputs, outputs); err != nil {
		return err
	}
	for _, side := range []map[string]Buffer{inputs, outputs} {
		for name, b := range side {
			if b.dtype == Float16 {
				if err := requireSince(f.r.os, enumSince("MLMultiArrayDataTypeFloat16"), "float16 multi-array "+name); err != nil {
					return err
				}
			}
		}
	}
	var copies int
	err := f.r.withPool(func() error {
		var err error
		copies, err = f.predict(inputs, outputs)
		return err
	})
	// The MLMultiArrays over the buffers are released; only now may the
	// buffers' memory go.
	runtime.KeepAlive(inputs)
	runtime.KeepAlive(outputs)
	if err != nil {
		return err
	}
	f.stats.Calls++
	f.stats.OutputCopies += int64(copies)
	return nil
}

// predict runs inside the pool; it returns how many outputs it had to copy.
func (f *function) predict(inputs, outputs map[string]Buffer) (int, error) {
	r := f.r
	var owned []uintptr
	defer func() {
		for _, o := range owned {
			r.release(o)
		}
	}()
	wrap := func(bufs map[string]Buffer, side string, value bool) (names []string, keys, vals []uintptr, err error) {
		for name := range bufs {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			key, err := r.newString(name)
			if err != nil {
				return nil, nil, nil, err
			}
			owned = append(owned, key)
			var arr uintptr
			if sf := bufs[name].surfaceOf(); sf != nil && sf.whole(bufs[name]) {
				// Made once with the surface; the surface owns it.
				arr = sf.ops.array()
			} else {
				arr, err = r.multiArray(bufs[name], f.subject+": "+side+" "+name)
				if err != nil {
					return nil, nil, nil, err
				}
				owned = append(owned, arr)
			}
			if value {
				arr = r.sendID(r.classes["MLFeatureValue"], selFeatureValueWithMultiArray, aID(arr))
			}
			keys = append(keys, key)
			vals = append(vals, arr)
		}
		return names, keys, vals, nil
	}
	_, inKeys, inVals, err := wrap(inputs, "input", true)
	if err != nil {
		return 0, err
	}
	var errObj uintptr
	provider := r.sendID(r.sendID(r.classes["MLDictionaryFeatureProvider"], selAlloc), selProviderInitWithDictionary,
		aID(r.dictionary(inKeys, inVals)), aErr(&errObj))
	if provider == 0 {
		return 0, r.fail(selProviderInitWithDictionary, f.subject, errObj)
	}
	owned = append(owned, provider)

	outNames, outKeys, outArrays, err := wrap(outputs, "output", false)
	if err != nil {
		return 0, err
	}
	opts := r.newObject("MLPredictionOptions")
	owned = append(owned, opts)
	r.sendVoid(opts, selOptionsSetOutputBackings, aID(r.dictionary(outKeys, outArrays)))

	// The host gives up its locks on the IOSurfaces for the call and takes
	// them back before anyone reads an output (surface.go).
	relock, err := lendSurfaces(f.subject, inputs, outputs)
	if err != nil {
		return 0, err
	}
	result := r.sendID(f.model, selModelPredict, aID(provider), aID(opts), aErr(&errObj))
	lockErr := relock()
	if result == 0 {
		return 0, errors.Join(r.fail(selModelPredict, f.subject, errObj), lockErr)
	}
	if lockErr != nil {
		return 0, lockErr
	}
	// Core ML may ignore a backing (its header: compare by identity); then
	// the output is in an array of its own and is copied into the buffer.
	copies := 0
	for i, name := range outNames {
		var got uintptr
		if v := r.sendID(result, selProviderFeatureValueForName, aID(outKeys[i])); v != 0 {
			got = r.sendID(v, selFeatureValueMultiArray)
		}
		if got == outArrays[i] {
			continue
		}
		if got == 0 {
			return 0, fmt.Errorf("mlcore: %s: Core ML returned no multi-array for output %q", f.subject, name)
		}
		if err := r.copyOut(got, outputs[name]); err != nil {
			return 0, fmt.Errorf("mlcore: %s: output %q: %w", f.subject, name, err)
		}
		copies++
	}
	return copies, nil
}

// copyOut copies an MLMultiArray Core ML allocated into dst.
func (r *objcRuntime) copyOut(src uintptr, dst Buffer) error {
	if dt := DType(r.sendInt(src, selMultiArrayDataType)); dt != dst.dtype {
		return fmt.Errorf("Core ML wrote %v, the buffer is %v", dt, dst.dtype)
	}
	shape := r.ints(r.sendID(src, selMultiArrayShape))
	if !slices.Equal(shape, dst.shape) {
		return fmt.Errorf("Core ML wrote shape %v, the buffer has %v", shape, dst.shape)
	}
	strides := r.ints(r.sendID(src, selMultiArrayStrides))
	if _, err := stridedExtent(shape, strides); err != nil {
		return fmt.Errorf("Core ML's output layout: %w", err)
	}
	p := r.sendPtr(src, selMultiArrayDataPointer)
	if p == nil {
		return errors.New("Core ML's output has no data pointer")
	}
	copyStrided(dst, p, strides)
	return nil
}

func cloneSpecs(in []FeatureSpec) []FeatureSpec {
	out := slices.Clone(in)
	for i := range out {
		out[i].Shape = slices.Clone(out[i].Shape)
	}
	return out
}
