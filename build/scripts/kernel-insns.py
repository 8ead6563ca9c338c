#!/usr/bin/env python3
"""Counts the instructions in the inner loops of the CPU backend's kernels
(engine/cpu), for amd64 and arm64, from the assembled test binaries
(GNU objdump), and prints them per 32 weights per token.

qemu says nothing about speed, so BENCHMARKS.md compares the two
architectures' kernels by these counts (issue 17). Usage, from the
repository root:

    python3 build/scripts/kernel-insns.py [MODEL.gguf ...]

With GGUF files it also estimates decode tok/s on an M1 (68 GB/s) and an
M3 Pro (150 GB/s): the weight bytes a decode step streams against the
bandwidth, and the row kernels' instructions per token against the cores.

A loop is a backward branch and the instructions from its target to it;
the innermost loop of a kernel is the one no other loop lies inside. A row
kernel's loop body handles one block (32 weights) of 8 rows for G tokens
(amd64), or of 4 rows (arm64, which runs the 8 rows as two halves of 4), so
its count per 32 weights per token is body / (rows * G).
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

DUMP = {'amd64': 'objdump', 'arm64': 'aarch64-linux-gnu-objdump'}
BRANCH = re.compile(r'^(j[a-z]+|b|b\.[a-z]+|cbn?z|tbn?z)$')


def objdump(goarch, pattern):
    """Disassembles the engine/cpu test binary for goarch with GNU objdump
    (binutils; binutils-aarch64-linux-gnu for arm64: Go's own objdump does
    not decode VEX or SDOT) and returns {kernel: [(address, instruction)]}
    for the functions whose name matches pattern."""
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, 'cpu.test')
        env = dict(os.environ, GOARCH=goarch)
        subprocess.check_call(['go', 'test', '-c', '-o', binary, './engine/cpu'], env=env)
        out = subprocess.check_output([DUMP[goarch], '-d', '--no-show-raw-insn', binary]).decode()
    funcs, name = {}, None
    for line in out.splitlines():
        head = re.match(r'^[0-9a-f]+ <anechat/engine/cpu\.(\w+)\.abi0>:$', line)
        if head:
            name = head.group(1) if re.match(pattern, head.group(1)) else None
            if name:
                funcs[name] = []
            continue
        if line.startswith('0') or not line.strip():
            name = None if line.startswith('0') else name
            continue
        m = re.match(r'^\s+([0-9a-f]+):\s+(.*?)\s*$', line)
        if name and m:
            funcs[name].append((int(m.group(1), 16), m.group(2)))
    return funcs


def inner_loops(insns):
    """Returns the instruction counts of the innermost loops."""
    addrs = [a for a, _ in insns]
    loops = []
    for i, (a, text) in enumerate(insns):
        op = text.split()[0]
        if not BRANCH.match(op):
            continue
        m = re.search(r'\b([0-9a-f]+) <', text)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target < a and target in addrs:
            loops.append((addrs.index(target), i))
    inner = [l for l in loops if not any(o != l and l[0] <= o[0] and o[1] <= l[1] for o in loops)]
    return [j - i + 1 for i, j in inner]


# GGUF type ids: (name, values per block, bytes per block).
GGUF_TYPES = {0: ('F32', 1, 4), 1: ('F16', 1, 2), 2: ('Q4_0', 32, 18), 3: ('Q4_1', 32, 20), 6: ('Q5_0', 32, 22),
              7: ('Q5_1', 32, 24), 8: ('Q8_0', 32, 34), 10: ('Q2_K', 256, 84), 11: ('Q3_K', 256, 110),
              12: ('Q4_K', 256, 144), 13: ('Q5_K', 256, 176), 14: ('Q6_K', 256, 210), 30: ('BF16', 1, 2)}


def gguf_tensors(path):
    """Returns [(name, type name, elements, bytes)] of a GGUF file's tensors."""
    with open(path, 'rb') as f:
        def u(fmt):
            return struct.unpack('<' + fmt, f.read(struct.calcsize(fmt)))[0]

        def string():
            return f.read(u('Q')).decode('utf-8', 'replace')

        sizes = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}

        def value(t):
            if t == 8:
                return string()
            if t == 9:
                et, n = u('I'), u('Q')
                return [value(et) for _ in range(n)]
            return u(sizes[t])

        if f.read(4) != b'GGUF':
            raise SystemExit('%s: not a GGUF file' % path)
        u('I')
        nt, nkv = u('Q'), u('Q')
        for _ in range(nkv):
            string()
            value(u('I'))
        out = []
        for _ in range(nt):
            name = string()
            dims = [u('Q') for _ in range(u('I'))]
            t = u('I')
            u('Q')
            n = 1
            for d in dims:
                n *= d
            tn, bs, bb = GGUF_TYPES.get(t, ('type%d' % t, 1, 0))
            out.append((name, tn, n, n // bs * bb))
        return out


# The formats with row kernels (a '-' where an architecture has none: amd64
# has no Q2_K or Q3_K kernels) and their weight bytes per 32 weights.
ROW_TYPES = ['Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q8_0', 'Q2_K', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K']
BYTES_PER_32 = {'Q4_0': 18, 'Q4_1': 20, 'Q5_0': 22, 'Q5_1': 24, 'Q8_0': 34, 'Q2_K': 10.5, 'Q3_K': 13.75, 'Q4_K': 18,
                'Q5_K': 22, 'Q6_K': 26.25}


# The machines of the issue: memory bandwidth, performance cores and clock,
# and an assumed sustained IPC of the kernels (4: the four 128-bit NEON
# pipes of a Firestorm/Everest core, an upper bound; loads and scalar
# bookkeeping share the issue width).
MACS = [('M1', 68e9, 4, 3.2e9), ('M3 Pro', 150e9, 6, 4.05e9)]
IPC = 4


def estimate(path, per32):
    """Prints the weight bytes one decode step streams for a GGUF model and
    the decode tok/s they allow on each Mac, with the instructions the
    arm64 row kernels need per token and the tok/s those allow (the lower
    of the two is the estimate)."""
    ts = gguf_tensors(path)
    names = {n for n, _, _, _ in ts}
    streamed = []
    for name, tn, n, b in ts:
        if n < 4096 or name.endswith('norm.weight') or 'norm' in name and tn == 'F32':
            continue
        if name == 'token_embd.weight' and 'output.weight' in names:
            continue  # an untied embedding is read one row per token
        streamed.append((name, tn, n, b))
    total = sum(b for _, _, _, b in streamed)
    print()
    print('%s: %.1f MB of weights per decode step (%s)' % (os.path.basename(path), total / 1e6,
          ', '.join('%s %.1f MB' % (t, sum(b for _, tn, _, b in streamed if tn == t) / 1e6)
                    for t in sorted({tn for _, tn, _, _ in streamed}))))
    for width in [1, 4, 8]:
        insns, missing = 0.0, set()
        for _, tn, n, _ in streamed:
            k = per32.get(('neon', tn, width))
            if k is None:
                missing.add(tn)
                continue
            insns += n / 32 * k * width
        cells = []
        for mac, bw, cores, hz in MACS:
            mem = width * bw / total
            cpu = width * cores * hz * IPC / insns if insns else float('inf')
            cells.append('%s: memory %6.0f, kernels %6.0f' % (mac, mem, cpu))
        note = ' (no NEON row kernel for %s: not counted)' % ', '.join(sorted(missing)) if missing else ''
        print('  width %d: %.0f M row-kernel instructions per call; tok/s %s%s' % (width, insns / 1e6, '; '.join(cells), note))


def main():
    amd = objdump('amd64', r'(rows|dot|wsum|axpy|quantizeQ8|siluMul|expShifted|geluMul)')
    arm = objdump('arm64', r'(rows|dot|wsum|axpy|quantizeQ8|siluMul|expShifted|geluMul)')
    print('Row kernels: instructions per 32 weights per token (inner loop / (rows x tokens))')
    print('%-6s %-5s %22s %22s %22s' % ('type', 'width', 'amd64 VNNI', 'amd64 AVX2', 'arm64 NEON+SDOT'))
    per32 = {}
    for typ in ROW_TYPES:
        t = typ.replace('_', '')
        # A K kernel's loop body is one block of 256 weights (8 blocks of
        # 32); arm64 runs a width of 8 as two passes of 4 tokens for the K
        # formats, Q5_0 and Q5_1.
        blocks = 8 if typ.endswith('_K') else 1
        for g in [1, 2, 4, 8]:
            cells = []
            for arch, funcs, name, rows in [('vnni', amd, 'rows%sx%d' % (t, g), 8), ('avx2', amd, 'rows%sx%dA' % (t, g), 8),
                                            ('neon', arm, 'rows%sx%dN' % (t, g), 4)]:
                loops = inner_loops(funcs.get(name, []))
                if not loops:
                    cells.append('-')
                    continue
                body = max(loops)
                toks = min(g, 4) if arch == 'neon' and (blocks == 8 or typ.startswith('Q5_')) else g
                per32[(arch, typ, g)] = body / (rows * toks * blocks)
                cells.append('%4d / %3d = %5.2f' % (body, rows * toks * blocks, per32[(arch, typ, g)]))
            print('%-6s %-5d %22s %22s %22s' % (typ, g, *cells))
    print()
    print('Weight GB/s a call of width G can stream through the arm64 row kernels at IPC %d on all' % IPC)
    print('performance cores (bytes per 32 weights x instructions/s / (instructions per 32 weights')
    print('per token x G)); below the memory bandwidth the call is bound by the kernels, not memory')
    print('%-6s %-5s %s' % ('type', 'width', '  '.join('%16s' % ('%s (%.0f GB/s)' % (m, bw / 1e9)) for m, bw, _, _ in MACS)))
    for typ in ROW_TYPES:
        bpw = BYTES_PER_32[typ]
        for g in [1, 4, 8]:
            k = per32.get(('neon', typ, g))
            if k:
                print('%-6s %-5d %s' % (typ, g, '  '.join('%16.0f' % (bpw * cores * hz * IPC / (k * g) / 1e9) for _, _, cores, hz in MACS)))
    print()
    print('Float and activation kernels: inner loop instructions (elements per iteration)')
    pairs = [('dotAVX2', 'dotNEON', 32), ('dot3AVX2', 'dot3NEON', 32), ('dot2BF16', 'dot2BF16N', 32),
             ('dot1BF16', 'dot1BF16N', 32), ('dot2F16', 'dot2F16N', 32), ('dotRowsAVX2', 'dotRowsNEON', 32),
             ('wsumAVX2', 'wsumNEON', 32), ('quantizeQ8AVX2', 'quantizeQ8NEON', 32),
             ('quantizeQ8KAVX2', 'quantizeQ8KNEON', 32),
             ('siluMulAVX2', 'siluMulNEON', 4), ('expShiftedAVX2', 'expShiftedNEON', 4), ('geluMulAVX2', 'geluMulNEON', 4)]
    print('%-16s %8s %16s %8s %8s' % ('amd64', 'insns', 'arm64', 'insns', 'elems'))
    for a, b, n in pairs:
        la, lb = inner_loops(amd.get(a, [])), inner_loops(arm.get(b, []))
        print('%-16s %8s %16s %8s %8d' % (a, max(la) if la else '-', b, max(lb) if lb else '-', n))
    for path in sys.argv[1:]:
        estimate(path, per32)


if __name__ == '__main__':
    sys.exit(main())
