"""Writes the tiny Core ML packages the darwin tests of mlcore run.

    python3 -m venv /tmp/ct && /tmp/ct/bin/pip install coremltools==9.0
    /tmp/ct/bin/python engine/coreml/mlcore/testdata/make_fixtures.py

add.mlpackage      one function (macOS 13): y = x + 1, x and y float16 [2, 3]
multi.mlpackage    two functions (macOS 15): add_one (the default, y = x + 1)
                   and times_two (y = x * 2), same input and output

coremltools builds and saves packages on any platform; only running them
needs a Mac. No torch: the programs are written in MIL directly.
"""

import os
import shutil
import tempfile

import coremltools as ct
import numpy as np
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = [mb.TensorSpec(shape=(2, 3), dtype=types.fp16)]


def convert(prog, target):
    m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=target,
                   compute_precision=ct.precision.FLOAT16)
    m.user_defined_metadata.pop("com.github.apple.coremltools.conversion_date", None)
    return m


def replace(path, write):
    if os.path.exists(path):
        shutil.rmtree(path)
    write(path)


def main():
    @mb.program(input_specs=SPEC, opset_version=ct.target.macOS13)
    def add(x):
        return mb.add(x=x, y=np.float16(1.0), name="y")

    replace(os.path.join(HERE, "add.mlpackage"), convert(add, ct.target.macOS13).save)

    @mb.program(input_specs=SPEC, opset_version=ct.target.macOS15)
    def add_one(x):
        return mb.add(x=x, y=np.float16(1.0), name="y")

    @mb.program(input_specs=SPEC, opset_version=ct.target.macOS15)
    def times_two(x):
        return mb.mul(x=x, y=np.float16(2.0), name="y")

    with tempfile.TemporaryDirectory() as tmp:
        desc = ct.utils.MultiFunctionDescriptor()
        for name, prog in (("add_one", add_one), ("times_two", times_two)):
            path = os.path.join(tmp, name + ".mlpackage")
            convert(prog, ct.target.macOS15).save(path)
            desc.add_function(path, src_function_name="main", target_function_name=name)
        desc.default_function_name = "add_one"
        replace(os.path.join(HERE, "multi.mlpackage"), lambda p: ct.utils.save_multifunction(desc, p))


if __name__ == "__main__":
    main()
