package mlcore

import "unsafe"

// This file is the one place that says how the darwin code talks to the
// Objective-C runtime, Core ML and CoreVideo: every selector it sends, with
// the C types of its arguments and result, the header it was read from and
// the first macOS that has it; the parameters of every block it passes;
// every C function and global it looks up (with the Go types purego calls
// the functions with); the classes only some macOS versions have; the enum
// values it passes. The darwin code sends messages only through send* helpers that
// take a sel from this table and arguments made by the a* constructors
// below, each of which names its C type. calls_test.go (run on Linux)
// checks every send* call site in the darwin files against the table (arity
// and each argument's C type), that every entry is used, that each
// selector's arity equals its number of ':', and the table against
// testdata/coreml_headers.txt, facts read off Apple's public headers with
// the repository, path and commit each came from.

// ctype names a C type as it crosses objc_msgSend. The Go type that carries
// it through purego is fixed per ctype (see arg and the send* helpers):
// object pointers and id arrays as uintptr / unsafe.Pointer, NSInteger and
// enums over it as int, NSUInteger as uint, long long as int64, BOOL (a C
// bool on arm64) as bool, double as float64; Core Foundation references
// as uintptr; size_t as uintptr; uint32_t, uint64_t and int32_t as
// themselves.
type ctype string

const (
	cID        ctype = "id"          // any object pointer: id, instancetype, NSString *, id<P>, ...
	cIDArray   ctype = "id*"         // a C array of object pointers (const id [])
	cNSInteger ctype = "NSInteger"   // long on arm64; also enums declared NS_ENUM(NSInteger, ...)
	cNSUInt    ctype = "NSUInteger"  // unsigned long on arm64; also NSStringEncoding
	cLongLong  ctype = "long long"   // 64-bit signed
	cBOOL      ctype = "BOOL"        // bool on arm64
	cVoidPtr   ctype = "void*"       // void *, const void *
	cErrOut    ctype = "NSError**"   // an out-parameter for an autoreleased NSError
	cBlock     ctype = "block"       // a block pointer: nil, or a block made by objc.NewBlock
	cCString   ctype = "const char*" // a NUL-terminated UTF-8 string owned by the callee
	cVoid      ctype = "void"        // no result
	cSEL       ctype = "SEL"         // a selector (only objc_msgSend's second argument)
	cDouble    ctype = "double"      // a C double (returned in d0 on arm64)
	cCFRef     ctype = "CFTypeRef"   // a Core Foundation object: CVPixelBufferRef, CFStringRef, CFDictionaryRef, ...
	cCFRefOut  ctype = "CFTypeRef*"  // an out-parameter receiving a +1 Core Foundation object
	cSizeT     ctype = "size_t"      // unsigned long on arm64
	cUInt32    ctype = "uint32_t"    // also OSType (FourCharCode)
	cUInt64    ctype = "uint64_t"    // also CVOptionFlags
	cInt32     ctype = "int32_t"     // also CVReturn
)

// method is one Objective-C method the darwin code sends.
type method struct {
	Class  string  // the class (or protocol) that declares it
	Static bool    // a class method (+), else an instance method (-)
	Name   string  // the selector
	Args   []ctype // one per ':' in Name
	Ret    ctype
	Header string // where it is declared, as <Framework/Header.h>
	Since  string // first macOS that has it ("" = no availability annotation)
}

// sel indexes methods.
type sel int

// The selectors, named after class and selector.
const (
	selAlloc sel = iota
	selInit
	selRelease
	selRetain
	selStringInitWithBytes
	selStringUTF8
	selURLFileURLWithPath
	selURLPath
	selNumberWithLongLong
	selNumberLongLongValue
	selArrayWithObjects
	selArrayCount
	selArrayObjectAtIndex
	selDictionaryWithObjects
	selDictionaryObjectForKey
	selDictionaryAllKeys
	selErrorLocalizedDescription
	selErrorDomain
	selErrorCode
	selModelCompile
	selModelWithContentsOfURL
	selModelPredict
	selModelDescription
	selConfigSetComputeUnits
	selConfigSetFunctionName
	selArrayInitWithDataPointer
	selMultiArrayDataPointer
	selMultiArrayShape
	selMultiArrayStrides
	selMultiArrayDataType
	selFeatureValueWithMultiArray
	selFeatureValueMultiArray
	selProviderInitWithDictionary
	selProviderFeatureValueForName
	selOptionsSetOutputBackings
	selDescriptionInputs
	selDescriptionOutputs
	selFeatureDescriptionType
	selFeatureDescriptionConstraint
	selConstraintShape
	selConstraintDataType
	selNumberWithBool
	selIsKindOfClass
	selArrayInitWithPixelBuffer
	selPlanLoad
	selPlanModelStructure
	selPlanDeviceUsage
	selPlanCost
	selStructureProgram
	selProgramFunctions
	selFunctionBlock
	selBlockOperations
	selOperationName
	selOperationOutputs
	selOperationBlocks
	selNamedValueName
	selUsagePreferred
	selUsageSupported
	selCostWeight
	numSels
)

// methods is the table, indexed by sel. It is read-only.
var methods = [numSels]method{
	// Object lifetime. Objects made with alloc/init are owned (+1) and get
	// one release; everything else is autoreleased into the pool that
	// wraps each call.
	selAlloc:   {"NSObject", true, "alloc", nil, cID, "<objc/NSObject.h>", ""},
	selInit:    {"NSObject", false, "init", nil, cID, "<objc/NSObject.h>", ""},
	selRelease: {"NSObject", false, "release", nil, cVoid, "<objc/NSObject.h>", ""},
	selRetain:  {"NSObject", false, "retain", nil, cID, "<objc/NSObject.h>", ""},

	// NSString from Go bytes (no NUL needed), and back as UTF-8.
	selStringInitWithBytes: {"NSString", false, "initWithBytes:length:encoding:", []ctype{cVoidPtr, cNSUInt, cNSUInt}, cID, "<Foundation/NSString.h>", ""},
	selStringUTF8:          {"NSString", false, "UTF8String", nil, cCString, "<Foundation/NSString.h>", ""},

	// File URLs for model paths; path turns the compiler's result back into a string.
	selURLFileURLWithPath: {"NSURL", true, "fileURLWithPath:isDirectory:", []ctype{cID, cBOOL}, cID, "<Foundation/NSURL.h>", "10.5"},
	selURLPath:            {"NSURL", false, "path", nil, cID, "<Foundation/NSURL.h>", ""},

	// NSNumber for shapes and strides (NSArray<NSNumber *>).
	selNumberWithLongLong:  {"NSNumber", true, "numberWithLongLong:", []ctype{cLongLong}, cID, "<Foundation/NSValue.h>", ""},
	selNumberLongLongValue: {"NSNumber", false, "longLongValue", nil, cLongLong, "<Foundation/NSValue.h>", ""},

	// NSArray: built from a C array of ids, read by index.
	selArrayWithObjects:   {"NSArray", true, "arrayWithObjects:count:", []ctype{cIDArray, cNSUInt}, cID, "<Foundation/NSArray.h>", ""},
	selArrayCount:         {"NSArray", false, "count", nil, cNSUInt, "<Foundation/NSArray.h>", ""},
	selArrayObjectAtIndex: {"NSArray", false, "objectAtIndex:", []ctype{cNSUInt}, cID, "<Foundation/NSArray.h>", ""},

	// NSDictionary: feature name -> MLFeatureValue (inputs) or MLMultiArray
	// (output backings); read for model descriptions.
	selDictionaryWithObjects:  {"NSDictionary", true, "dictionaryWithObjects:forKeys:count:", []ctype{cIDArray, cIDArray, cNSUInt}, cID, "<Foundation/NSDictionary.h>", ""},
	selDictionaryObjectForKey: {"NSDictionary", false, "objectForKey:", []ctype{cID}, cID, "<Foundation/NSDictionary.h>", ""},
	selDictionaryAllKeys:      {"NSDictionary", false, "allKeys", nil, cID, "<Foundation/NSDictionary.h>", ""},

	// NSError -> Go error: every NSError** out-parameter is read through these.
	selErrorLocalizedDescription: {"NSError", false, "localizedDescription", nil, cID, "<Foundation/NSError.h>", ""},
	selErrorDomain:               {"NSError", false, "domain", nil, cID, "<Foundation/NSError.h>", ""},
	selErrorCode:                 {"NSError", false, "code", nil, cNSInteger, "<Foundation/NSError.h>", ""},

	// +[MLModel compileModelAtURL:error:]: the synchronous compiler. Newer
	// SDKs mark it API_TO_BE_DEPRECATED in favour of
	// compileModelAtURL:completionHandler: (macOS 13); it is still there,
	// and it needs no Go callback run on a Core ML queue thread. It runs
	// once per package (Cache keeps the result), on the caller's goroutine.
	selModelCompile: {"MLModel", true, "compileModelAtURL:error:", []ctype{cID, cErrOut}, cID, "<CoreML/MLModel+MLModelCompilation.h>", "10.13"},
	// +[MLModel modelWithContentsOfURL:configuration:error:]: load a .mlmodelc.
	selModelWithContentsOfURL: {"MLModel", true, "modelWithContentsOfURL:configuration:error:", []ctype{cID, cID, cErrOut}, cID, "<CoreML/MLModel.h>", "10.14"},
	// -[MLModel predictionFromFeatures:options:error:]: one call of the function.
	selModelPredict: {"MLModel", false, "predictionFromFeatures:options:error:", []ctype{cID, cID, cErrOut}, cID, "<CoreML/MLModel.h>", "10.13"},
	// -[MLModel modelDescription]: input and output names, types, shapes.
	selModelDescription: {"MLModel", false, "modelDescription", nil, cID, "<CoreML/MLModel.h>", "10.13"},

	// MLModelConfiguration: where it runs, and which function of a
	// multifunction package (macOS 15).
	selConfigSetComputeUnits: {"MLModelConfiguration", false, "setComputeUnits:", []ctype{cNSInteger}, cVoid, "<CoreML/MLModelConfiguration.h>", "10.14"},
	selConfigSetFunctionName: {"MLModelConfiguration", false, "setFunctionName:", []ctype{cID}, cVoid, "<CoreML/MLModelConfiguration.h>", "15.0"},

	// -[MLMultiArray initWithDataPointer:shape:dataType:strides:deallocator:error:]:
	// wraps host memory without a copy. The deallocator is _Nullable in the
	// header and is always nil here: the Go side owns the memory.
	selArrayInitWithDataPointer: {"MLMultiArray", false, "initWithDataPointer:shape:dataType:strides:deallocator:error:", []ctype{cVoidPtr, cID, cNSInteger, cID, cBlock, cErrOut}, cID, "<CoreML/MLMultiArray.h>", "10.13"},
	// The layout of an output Core ML allocated itself (when it did not use
	// the backing it was offered), so Predict can copy it into the host buffer.
	selMultiArrayDataPointer: {"MLMultiArray", false, "dataPointer", nil, cVoidPtr, "<CoreML/MLMultiArray.h>", "10.13"},
	selMultiArrayShape:       {"MLMultiArray", false, "shape", nil, cID, "<CoreML/MLMultiArray.h>", "10.13"},
	selMultiArrayStrides:     {"MLMultiArray", false, "strides", nil, cID, "<CoreML/MLMultiArray.h>", "10.13"},
	selMultiArrayDataType:    {"MLMultiArray", false, "dataType", nil, cNSInteger, "<CoreML/MLMultiArray.h>", "10.13"},

	// Feature values and the input provider.
	selFeatureValueWithMultiArray:  {"MLFeatureValue", true, "featureValueWithMultiArray:", []ctype{cID}, cID, "<CoreML/MLFeatureValue.h>", "10.13"},
	selFeatureValueMultiArray:      {"MLFeatureValue", false, "multiArrayValue", nil, cID, "<CoreML/MLFeatureValue.h>", "10.13"},
	selProviderInitWithDictionary:  {"MLDictionaryFeatureProvider", false, "initWithDictionary:error:", []ctype{cID, cErrOut}, cID, "<CoreML/MLDictionaryFeatureProvider.h>", "10.13"},
	selProviderFeatureValueForName: {"MLFeatureProvider", false, "featureValueForName:", []ctype{cID}, cID, "<CoreML/MLFeatureProvider.h>", "10.13"},

	// -[MLPredictionOptions setOutputBackings:]: outputs land in host buffers.
	selOptionsSetOutputBackings: {"MLPredictionOptions", false, "setOutputBackings:", []ctype{cID}, cVoid, "<CoreML/MLPredictionOptions.h>", "11.0"},

	// The model description, read once at load.
	selDescriptionInputs:            {"MLModelDescription", false, "inputDescriptionsByName", nil, cID, "<CoreML/MLModelDescription.h>", "10.13"},
	selDescriptionOutputs:           {"MLModelDescription", false, "outputDescriptionsByName", nil, cID, "<CoreML/MLModelDescription.h>", "10.13"},
	selFeatureDescriptionType:       {"MLFeatureDescription", false, "type", nil, cNSInteger, "<CoreML/MLFeatureDescription.h>", "10.13"},
	selFeatureDescriptionConstraint: {"MLFeatureDescription", false, "multiArrayConstraint", nil, cID, "<CoreML/MLFeatureDescription.h>", "10.13"},
	selConstraintShape:              {"MLMultiArrayConstraint", false, "shape", nil, cID, "<CoreML/MLMultiArrayConstraint.h>", "10.13"},
	selConstraintDataType:           {"MLMultiArrayConstraint", false, "dataType", nil, cNSInteger, "<CoreML/MLMultiArrayConstraint.h>", "10.13"},

	// IOSurface-backed buffers (surface.go). The pixel buffer attributes
	// hold @YES for kCVPixelBufferMetalCompatibilityKey (a CFBoolean: the
	// header's comment says so, and numberWithBool: returns one).
	selNumberWithBool: {"NSNumber", true, "numberWithBool:", []ctype{cBOOL}, cID, "<Foundation/NSValue.h>", ""},
	// -[MLMultiArray initWithPixelBuffer:shape:]: "an IOSurface backed
	// MLMultiArray"; the pixel buffer must be OneComponent16Half, its width
	// the last axis, its height the product of the others. It has no
	// NSError**: nil is the only failure.
	selArrayInitWithPixelBuffer: {"MLMultiArray", false, "initWithPixelBuffer:shape:", []ctype{cCFRef, cID}, cID, "<CoreML/MLMultiArray.h>", "12.0"},

	// Compute plans (plan.go): where each operation of an ML Program runs.
	// +[MLComputePlan loadContentsOfURL:configuration:completionHandler:]
	// takes the compiled .mlmodelc and calls its block once, on a queue of
	// its own, with the plan or an NSError (blockParams).
	selPlanLoad:           {"MLComputePlan", true, "loadContentsOfURL:configuration:completionHandler:", []ctype{cID, cID, cBlock}, cVoid, "<CoreML/MLComputePlan.h>", "14.4"},
	selPlanModelStructure: {"MLComputePlan", false, "modelStructure", nil, cID, "<CoreML/MLComputePlan.h>", "14.4"},
	selPlanDeviceUsage:    {"MLComputePlan", false, "computeDeviceUsageForMLProgramOperation:", []ctype{cID}, cID, "<CoreML/MLComputePlan.h>", "14.4"},
	// "Of", not "For" (the Python API says get_estimated_cost_for_...).
	selPlanCost:         {"MLComputePlan", false, "estimatedCostOfMLProgramOperation:", []ctype{cID}, cID, "<CoreML/MLComputePlan.h>", "14.4"},
	selStructureProgram: {"MLModelStructure", false, "program", nil, cID, "<CoreML/MLModelStructure.h>", "14.4"},
	selProgramFunctions: {"MLModelStructureProgram", false, "functions", nil, cID, "<CoreML/MLModelStructureProgram.h>", "14.4"},
	selFunctionBlock:    {"MLModelStructureProgramFunction", false, "block", nil, cID, "<CoreML/MLModelStructureProgramFunction.h>", "14.4"},
	selBlockOperations:  {"MLModelStructureProgramBlock", false, "operations", nil, cID, "<CoreML/MLModelStructureProgramBlock.h>", "14.4"},
	selOperationName:    {"MLModelStructureProgramOperation", false, "operatorName", nil, cID, "<CoreML/MLModelStructureProgramOperation.h>", "14.4"},
	selOperationOutputs: {"MLModelStructureProgramOperation", false, "outputs", nil, cID, "<CoreML/MLModelStructureProgramOperation.h>", "14.4"},
	selOperationBlocks:  {"MLModelStructureProgramOperation", false, "blocks", nil, cID, "<CoreML/MLModelStructureProgramOperation.h>", "14.4"},
	selNamedValueName:   {"MLModelStructureProgramNamedValueType", false, "name", nil, cID, "<CoreML/MLModelStructureProgramNamedValueType.h>", "14.4"},
	selUsagePreferred:   {"MLComputePlanDeviceUsage", false, "preferredComputeDevice", nil, cID, "<CoreML/MLComputePlanDeviceUsage.h>", "14.4"},
	selUsageSupported:   {"MLComputePlanDeviceUsage", false, "supportedComputeDevices", nil, cID, "<CoreML/MLComputePlanDeviceUsage.h>", "14.4"},
	// "The estimated workload of executing the operation over the total
	// model execution. The value is between [0.0, 1.0]."
	selCostWeight: {"MLComputePlanCost", false, "weight", nil, cDouble, "<CoreML/MLComputePlanCost.h>", "14.4"},
	// A device is an id<MLComputeDeviceProtocol>: its class says which.
	selIsKindOfClass: {"NSObject", false, "isKindOfClass:", []ctype{cID}, cBOOL, "<objc/NSObject.h>", ""},
}

// blockParams gives the parameters of the block each block argument is
// called with (the block's own first parameter, the block literal, left
// out), as the header declares them; calls_test.go checks them against
// the header and against the Go handler types below.
var blockParams = map[sel][]ctype{
	// void (^)(MLComputePlan * _Nullable computePlan, NSError * _Nullable error)
	selPlanLoad: {cID, cID},
}

// planCompletion is the Go side of selPlanLoad's block (without the block
// literal purego passes first): the plan or 0, and an NSError or 0.
type planCompletion func(plan, nserr uintptr)

// class is an Objective-C class the darwin code needs only on some macOS
// versions: it is looked up when the runtime opens and is 0 where the
// system lacks it.
type class struct {
	Name   string
	Header string
	Since  string
}

// optionalClasses are the classes of compute plans. The device classes are
// what isKindOfClass: tells apart.
var optionalClasses = [...]class{
	{"MLComputePlan", "<CoreML/MLComputePlan.h>", "14.4"},
	{"MLNeuralEngineComputeDevice", "<CoreML/MLNeuralEngineComputeDevice.h>", "14.0"},
	{"MLGPUComputeDevice", "<CoreML/MLGPUComputeDevice.h>", "14.0"},
	{"MLCPUComputeDevice", "<CoreML/MLCPUComputeDevice.h>", "14.0"},
}

// cfunc is one C function the darwin code looks up with dlsym in Lib.
type cfunc struct {
	Name   string
	Lib    string
	Args   []ctype
	Ret    ctype
	Header string
}

// The C functions, and the libraries they come from.
const (
	libobjcPath   = "/usr/lib/libobjc.A.dylib"
	coreMLPath    = "/System/Library/Frameworks/CoreML.framework/CoreML"
	coreVideoPath = "/System/Library/Frameworks/CoreVideo.framework/CoreVideo"

	fnMsgSend  = "objc_msgSend"
	fnPoolPush = "objc_autoreleasePoolPush"
	fnPoolPop  = "objc_autoreleasePoolPop"
)

// cfuncs lists the C functions the darwin code looks up itself (classes and
// selectors come from purego's objc package: objc_getClass and
// sel_registerName). objc_msgSend is declared variadic ("id self, SEL op,
// ..."), and message.h says it "must be cast to an appropriate function
// pointer type before being called": the darwin code registers it once per
// result kind (sendKinds), and purego passes the arguments of each call as
// that method's own prototype, never as C varargs.
//
// The CoreVideo functions make, lock and free the pixel buffers of
// IOSurface-backed buffers; each is a field of coreVideo, registered by its
// name, and calls_test.go checks each field's Go type against the entry.
var cfuncs = [...]cfunc{
	{fnMsgSend, libobjcPath, []ctype{cID, cSEL}, cID, "<objc/message.h>"},
	{fnPoolPush, libobjcPath, nil, cVoidPtr, "clang ARC: runtime support"},
	{fnPoolPop, libobjcPath, []ctype{cVoidPtr}, cVoid, "clang ARC: runtime support"},
	// CVReturn CVPixelBufferCreate(CFAllocatorRef allocator, size_t width,
	// size_t height, OSType pixelFormatType, CFDictionaryRef attributes,
	// CVPixelBufferRef *pixelBufferOut): the out-parameter gets a +1
	// reference (CV_RETURNS_RETAINED_PARAMETER).
	{"CVPixelBufferCreate", coreVideoPath, []ctype{cCFRef, cSizeT, cSizeT, cUInt32, cCFRef, cCFRefOut}, cInt32, "<CoreVideo/CVPixelBuffer.h>"},
	{"CVPixelBufferLockBaseAddress", coreVideoPath, []ctype{cCFRef, cUInt64}, cInt32, "<CoreVideo/CVPixelBuffer.h>"},
	{"CVPixelBufferUnlockBaseAddress", coreVideoPath, []ctype{cCFRef, cUInt64}, cInt32, "<CoreVideo/CVPixelBuffer.h>"},
	// "requires that the buffer base address be locked".
	{"CVPixelBufferGetBaseAddress", coreVideoPath, []ctype{cCFRef}, cVoidPtr, "<CoreVideo/CVPixelBuffer.h>"},
	{"CVPixelBufferGetBytesPerRow", coreVideoPath, []ctype{cCFRef}, cSizeT, "<CoreVideo/CVPixelBuffer.h>"},
	{"CVPixelBufferRelease", coreVideoPath, []ctype{cCFRef}, cVoid, "<CoreVideo/CVPixelBuffer.h>"},
}

// coreVideo holds the CoreVideo functions of cfuncs, one field per
// function, named after it; the darwin code registers every field with
// purego from the symbol of its name. The Go types follow the ctype rules
// above (goTypes in calls_test.go checks them).
type coreVideo struct {
	CVPixelBufferCreate            func(allocator, width, height uintptr, format uint32, attributes uintptr, out *uintptr) int32
	CVPixelBufferLockBaseAddress   func(pixelBuffer uintptr, flags uint64) int32
	CVPixelBufferUnlockBaseAddress func(pixelBuffer uintptr, flags uint64) int32
	CVPixelBufferGetBaseAddress    func(pixelBuffer uintptr) unsafe.Pointer
	CVPixelBufferGetBytesPerRow    func(pixelBuffer uintptr) uintptr
	CVPixelBufferRelease           func(pixelBuffer uintptr)
}

// cvar is a C global the darwin code reads: the symbol's address holds a
// value of type Type.
type cvar struct {
	Name   string
	Type   ctype
	Lib    string
	Header string
	Since  string
}

// cvars are the pixel buffer attribute keys (const CFStringRef).
var cvars = [...]cvar{
	// "presence requests buffer allocation via IOSurface"; its value is a
	// dictionary of IOSurface properties, empty here.
	{"kCVPixelBufferIOSurfacePropertiesKey", cCFRef, coreVideoPath, "<CoreVideo/CVPixelBuffer.h>", "10.6"},
	{"kCVPixelBufferMetalCompatibilityKey", cCFRef, coreVideoPath, "<CoreVideo/CVPixelBuffer.h>", "10.11"},
}

// Enum values passed to or read from Core ML and Foundation.
const (
	// MLComputeUnits (NS_ENUM(NSInteger)).
	mlComputeUnitsCPUOnly            = 0
	mlComputeUnitsCPUAndGPU          = 1
	mlComputeUnitsAll                = 2
	mlComputeUnitsCPUAndNeuralEngine = 3 // macOS 13

	// MLMultiArrayDataType (NS_ENUM(NSInteger)).
	mlMultiArrayDataTypeDouble  = 0x10000 | 64
	mlMultiArrayDataTypeFloat32 = 0x10000 | 32
	mlMultiArrayDataTypeFloat16 = 0x10000 | 16 // macOS 12
	mlMultiArrayDataTypeInt32   = 0x20000 | 32

	// MLFeatureType (NS_ENUM(NSInteger)).
	mlFeatureTypeMultiArray = 5

	// NSStringEncoding (NSUInteger).
	nsUTF8StringEncoding = 4

	// OSType 'L00h': "16 bit one component IEEE half-precision float,
	// 16-bit little-endian samples".
	cvPixelFormatOneComponent16Half = 'L'<<24 | '0'<<16 | '0'<<8 | 'h'
	// CVReturn.
	cvReturnSuccess = 0
)

// enumValues names the values above as the headers spell them, with the
// first macOS that has each, for the fixture check.
var enumValues = [...]struct {
	Name  string
	Value int
	Since string
}{
	{"MLComputeUnitsCPUOnly", mlComputeUnitsCPUOnly, ""},
	{"MLComputeUnitsCPUAndGPU", mlComputeUnitsCPUAndGPU, ""},
	{"MLComputeUnitsAll", mlComputeUnitsAll, ""},
	{"MLComputeUnitsCPUAndNeuralEngine", mlComputeUnitsCPUAndNeuralEngine, "13.0"},
	{"MLMultiArrayDataTypeDouble", mlMultiArrayDataTypeDouble, ""},
	{"MLMultiArrayDataTypeFloat32", mlMultiArrayDataTypeFloat32, ""},
	{"MLMultiArrayDataTypeFloat16", mlMultiArrayDataTypeFloat16, "12.0"},
	{"MLMultiArrayDataTypeInt32", mlMultiArrayDataTypeInt32, ""},
	{"MLFeatureTypeMultiArray", mlFeatureTypeMultiArray, ""},
	{"NSUTF8StringEncoding", nsUTF8StringEncoding, ""},
	{"kCVPixelFormatType_OneComponent16Half", cvPixelFormatOneComponent16Half, ""},
	{"kCVReturnSuccess", cvReturnSuccess, ""},
}

// enumSince returns the first macOS that has the enum value named name
// ("" = any), from enumValues.
func enumSince(name string) string {
	for _, e := range enumValues {
		if e.Name == name {
			return e.Since
		}
	}
	panic("mlcore: no enum value " + name + " in calls.go")
}

// sendKinds maps each send helper of the darwin code to the result types it
// may be used for; the helper is objc_msgSend registered with that Go result
// type. Both the darwin code (at run time) and calls_test.go (statically)
// check calls against it.
var sendKinds = map[string][]ctype{
	"sendID":       {cID},
	"sendVoid":     {cVoid},
	"sendInt":      {cNSInteger},
	"sendUint":     {cNSUInt},
	"sendLongLong": {cLongLong},
	"sendPtr":      {cVoidPtr, cCString},
	"sendBool":     {cBOOL},
	"sendDouble":   {cDouble},
}

// arg is one argument of a message, with the C type it is sent as. The
// darwin code makes every argument with one of the constructors below, so a
// call site says the C type of each argument it passes.
type arg struct {
	t ctype
	v any // the Go value purego passes: uintptr, unsafe.Pointer, int, uint, int64 or bool
}

// aID passes an object pointer (nil is 0).
func aID(id uintptr) arg { return arg{cID, id} }

// aIDs passes a C array of object pointers: the address of ids[0], or NULL
// for an empty slice. The slice must stay alive for the call.
func aIDs(ids []uintptr) arg {
	if len(ids) == 0 {
		return arg{cIDArray, unsafe.Pointer(nil)}
	}
	return arg{cIDArray, unsafe.Pointer(&ids[0])}
}

// aInt passes an NSInteger or an enum declared over NSInteger.
func aInt(v int) arg { return arg{cNSInteger, v} }

// aUint passes an NSUInteger (or NSStringEncoding).
func aUint(v uint) arg { return arg{cNSUInt, v} }

// aLongLong passes a long long.
func aLongLong(v int64) arg { return arg{cLongLong, v} }

// aBool passes a BOOL.
func aBool(v bool) arg { return arg{cBOOL, v} }

// aPtr passes a void * (host memory Core ML reads or writes).
func aPtr(p unsafe.Pointer) arg { return arg{cVoidPtr, p} }

// aErr passes an NSError ** out-parameter; *out is set to 0 first.
func aErr(out *uintptr) arg {
	*out = 0
	return arg{cErrOut, unsafe.Pointer(out)}
}

// aNilBlock passes a nil block (the header marks the block _Nullable).
func aNilBlock() arg { return arg{cBlock, uintptr(0)} }

// aBlock passes a block (objc.NewBlock's result, as a pointer).
func aBlock(b uintptr) arg { return arg{cBlock, b} }

// aCF passes a Core Foundation reference (a CVPixelBufferRef, ...).
func aCF(ref uintptr) arg { return arg{cCFRef, ref} }

// checkCall reports whether args and the result kind of helper fit method
// m: the arity, each argument's C type and the result type. It returns ""
// when they do, else what is wrong.
func checkCall(s sel, helper string, args []arg) string {
	if s < 0 || s >= numSels {
		return "selector index out of range"
	}
	m := methods[s]
	kinds, ok := sendKinds[helper]
	if !ok {
		return "unknown send helper " + helper
	}
	okRet := false
	for _, k := range kinds {
		okRet = okRet || k == m.Ret
	}
	if !okRet {
		return helper + " cannot return " + string(m.Ret) + " (" + m.Name + ")"
	}
	if len(args) != len(m.Args) {
		return m.Name + ": wrong number of arguments"
	}
	for i, a := range args {
		if a.t != m.Args[i] {
			return m.Name + ": argument " + string(rune('1'+i)) + " is " + string(a.t) + ", want " + string(m.Args[i])
		}
	}
	return ""
}
