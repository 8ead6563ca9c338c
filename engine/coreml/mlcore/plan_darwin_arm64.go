package mlcore

// The compute plan walk on a Mac: +[MLComputePlan
// loadContentsOfURL:configuration:completionHandler:], then
// plan.modelStructure.program.functions[name].block.operations, recursing
// into each operation's blocks, asking the plan for each operation's
// device usage and cost. Type-checked on Linux by the darwin vet; run only
// on a Mac (macOS 14.4 or later).

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/ebitengine/purego/objc"
)

// Bounds on a plan walk, so that a malformed or unexpected structure
// cannot run unbounded: nesting of blocks (loops and conditionals; the
// converter's programs have none) and operations per model (CoreML-LLM's
// largest E2B chunk has 1,847).
const (
	maxPlanDepth = 32
	maxPlanOps   = 1 << 20
)

// ComputePlan implements Planner.
func (c *coreML) ComputePlan(ctx context.Context, compiled string, units ComputeUnits) (*ComputePlan, error) {
	r := c.r
	if err := requireMethod(r.os, selPlanLoad, "reading where operations run (MLComputePlan)"); err != nil {
		return nil, err
	}
	if r.classes["MLComputePlan"] == 0 {
		return nil, fmt.Errorf("mlcore: the class MLComputePlan is missing on macOS %v", r.os)
	}
	mlUnits, since, err := units.mlComputeUnits()
	if err != nil {
		return nil, err
	}
	if since != "" {
		if err := requireSince(r.os, since, "compute units "+units.String()); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(compiled)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// The completion handler runs once, on a Core ML queue (a thread Go
	// did not start). It retains the plan and hands it over; if the caller
	// has given up by then, it releases it instead.
	type result struct {
		plan uintptr
		err  error
	}
	done := make(chan result, 1)
	var mu sync.Mutex
	abandoned := false
	var handler planCompletion = func(plan, nserr uintptr) {
		res := result{}
		if plan == 0 {
			res.err = r.fail(selPlanLoad, abs, nserr)
		} else {
			res.plan = r.sendID(plan, selRetain)
		}
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			r.release(res.plan)
			return
		}
		select {
		case done <- res:
		default: // called twice: keep the first
			r.release(res.plan)
		}
	}
	block := objc.NewBlock(func(_ objc.Block, plan, nserr uintptr) { handler(plan, nserr) })
	err = r.withPool(func() error {
		url, err := r.fileURL(abs, true)
		if err != nil {
			return err
		}
		cfg := r.newObject("MLModelConfiguration")
		defer r.release(cfg)
		r.sendVoid(cfg, selConfigSetComputeUnits, aInt(mlUnits))
		r.sendVoid(r.classes["MLComputePlan"], selPlanLoad, aID(url), aID(cfg), aBlock(uintptr(block)))
		return nil
	})
	// Core ML copied the block (it outlives this call); ours goes.
	block.Release()
	if err != nil {
		return nil, err
	}
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		mu.Lock()
		abandoned = true
		select {
		case late := <-done:
			r.release(late.plan)
		default:
		}
		mu.Unlock()
		return nil, fmt.Errorf("mlcore: the compute plan of %s: %w", abs, ctx.Err())
	}
	if res.err != nil {
		return nil, res.err
	}
	defer r.withPool(func() error {
		r.release(res.plan)
		return nil
	})
	var plan *ComputePlan
	err = r.withPool(func() error {
		var err error
		plan, err = r.walkPlan(res.plan, abs)
		return err
	})
	return plan, err
}

// walkPlan reads every function of the plan's program.
func (r *objcRuntime) walkPlan(plan uintptr, subject string) (*ComputePlan, error) {
	program := r.sendID(r.sendID(plan, selPlanModelStructure), selStructureProgram)
	if program == 0 {
		return nil, fmt.Errorf("mlcore: %s is not an ML Program (no per-operation plan)", subject)
	}
	funcs := r.sendID(program, selProgramFunctions)
	keys := r.sendID(funcs, selDictionaryAllKeys)
	out := &ComputePlan{Functions: map[string][]PlanOp{}}
	total := 0
	for i := range int(r.sendUint(keys, selArrayCount)) {
		key := r.sendID(keys, selArrayObjectAtIndex, aUint(uint(i)))
		fn := r.sendID(funcs, selDictionaryObjectForKey, aID(key))
		var ops []PlanOp
		if err := r.walkBlock(plan, r.sendID(fn, selFunctionBlock), 0, &total, &ops); err != nil {
			return nil, fmt.Errorf("mlcore: %s: function %s: %w", subject, r.goString(key), err)
		}
		out.Functions[r.goString(key)] = ops
	}
	return out, nil
}

// walkBlock appends the operations of block (and of their nested blocks)
// to ops.
func (r *objcRuntime) walkBlock(plan, block uintptr, depth int, total *int, ops *[]PlanOp) error {
	if block == 0 {
		return nil
	}
	if depth > maxPlanDepth {
		return fmt.Errorf("blocks nested more than %d deep", maxPlanDepth)
	}
	list := r.sendID(block, selBlockOperations)
	for i := range int(r.sendUint(list, selArrayCount)) {
		if *total++; *total > maxPlanOps {
			return fmt.Errorf("more than %d operations", maxPlanOps)
		}
		op := r.sendID(list, selArrayObjectAtIndex, aUint(uint(i)))
		p := PlanOp{Operator: r.goString(r.sendID(op, selOperationName))}
		if outs := r.sendID(op, selOperationOutputs); outs != 0 && r.sendUint(outs, selArrayCount) > 0 {
			p.Output = r.goString(r.sendID(r.sendID(outs, selArrayObjectAtIndex, aUint(0)), selNamedValueName))
		}
		if usage := r.sendID(plan, selPlanDeviceUsage, aID(op)); usage != 0 {
			p.Preferred = r.device(r.sendID(usage, selUsagePreferred))
			if sup := r.sendID(usage, selUsageSupported); sup != 0 {
				for j := range int(r.sendUint(sup, selArrayCount)) {
					p.Supported = append(p.Supported, r.device(r.sendID(sup, selArrayObjectAtIndex, aUint(uint(j)))))
				}
			}
		}
		if cost := r.sendID(plan, selPlanCost, aID(op)); cost != 0 {
			p.Cost, p.HasCost = r.sendDouble(cost, selCostWeight), true
		}
		*ops = append(*ops, p)
		if blocks := r.sendID(op, selOperationBlocks); blocks != 0 {
			for j := range int(r.sendUint(blocks, selArrayCount)) {
				if err := r.walkBlock(plan, r.sendID(blocks, selArrayObjectAtIndex, aUint(uint(j))), depth+1, total, ops); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// device classifies an id<MLComputeDeviceProtocol> by its class, as
// Chromium's WebNN and CoreML-LLM's audit do.
func (r *objcRuntime) device(d uintptr) Device {
	if d == 0 {
		return DeviceNone
	}
	for _, c := range []struct {
		class string
		dev   Device
	}{{"MLNeuralEngineComputeDevice", DeviceNeuralEngine}, {"MLGPUComputeDevice", DeviceGPU}, {"MLCPUComputeDevice", DeviceCPU}} {
		if cls := r.classes[c.class]; cls != 0 && r.sendBool(d, selIsKindOfClass, aID(cls)) {
			return c.dev
		}
	}
	return DeviceUnknown
}
