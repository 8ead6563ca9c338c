"""python -m anebundle MODEL OUT [flags]: convert a checkpoint to a bundle."""
import argparse
import json
import logging
import os
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="anebundle", description=(
        "Convert a gemma4 Hugging Face directory or a llama GGUF file into an anechat Core ML bundle "
        "(chunked multifunction .mlpackage files, INT8 embedding sidecars, manifest.json)."))
    p.add_argument("model", help="a directory with config.json and *.safetensors (gemma4), or a .gguf file (llama)")
    p.add_argument("out", nargs="?",
                   help="the bundle directory to write (written atomically; must not exist unless --force)")
    p.add_argument("--width", type=int, default=8, help="width K of the generation function (default 8)")
    p.add_argument("--prefill", type=int, default=64, help="width N of the prefill function (default 64)")
    p.add_argument("--context", type=int, default=2048,
                   help="KV positions of the bundle (default 2048, at most the model's)")
    p.add_argument("--chunk-mb", type=float, default=950.0,
                   help="weight bytes per package in MiB, at most (default 950, ANEMLL's limit)")
    p.add_argument("--max-ops", type=int, default=1800,
                   help="ops per function, constants not counted, at most (default 1800, CoreML-LLM's largest "
                        "working chunk)")
    p.add_argument("--chunks", help="explicit layer ranges per chunk, e.g. 0-7,8-24,25-34 (checked against the limits)")
    p.add_argument("--plan", action="store_true",
                   help="print the chunk plan as JSON and exit: reads config.json (or a GGUF header) only, "
                        "no weights and no OUT")
    p.add_argument("--weights", default="lut4",
                   help="weight storage of the linear layers: lut4 (default: a 16-entry fp16 palette per 16 rows, "
                        "coremltools' per_grouped_channel palettisation), lut6 (64 entries), int8 (per output "
                        "channel), fp16")
    p.add_argument("--head-weights", default=None,
                   help="weight storage of the output projection (same choices; default: as --weights)")
    p.add_argument("--palette", default="kmeans", choices=["kmeans", "uniform"],
                   help="how lutN palettes are made: kmeans (optimal 1-D k-means, default) or uniform (evenly "
                        "spaced between each group's min and max)")
    p.add_argument("--workers", type=int, default=1, help="processes palettising a chunk's matrices (default 1)")
    p.add_argument("--sidecars", default="int8", choices=["int8", "fp16"],
                   help="embedding sidecars: int8 rows with per-row fp16 scales (default), or fp16 rows")
    p.add_argument("--argmax-block", type=int, default=None,
                   help="ids per block of the in-graph argmax (default: the largest divisor of the vocabulary "
                        "up to 16384; it must divide the vocabulary)")
    p.add_argument("--force", action="store_true", help="replace an existing bundle directory")
    args = p.parse_args(argv)
    if args.out is None and not args.plan:
        p.error("OUT is required (or --plan to print the chunk plan)")
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("TQDM_DISABLE", "1")
    from .bundle import Options, convert, plan_json
    from .checkpoint import CheckpointError
    opt = Options(width=args.width, prefill=args.prefill, context=args.context, chunk_mb=args.chunk_mb,
                  max_ops=args.max_ops, chunks=args.chunks, weights=args.weights, head_weights=args.head_weights,
                  palette=args.palette, workers=args.workers, sidecars=args.sidecars,
                  force=args.force, argmax_block=args.argmax_block)
    try:
        if args.plan:
            json.dump(plan_json(args.model, opt), sys.stdout, indent=1)
            sys.stdout.write("\n")
            return 0
        m = convert(args.model, args.out, opt)
    except CheckpointError as e:
        print(f"anebundle: {e}", file=sys.stderr)
        return 2
    print(f"anebundle: wrote {args.out}: {len(m['chunks'])} chunk(s), functions "
          f"{', '.join(f['name'] for f in m['chunks'][0]['functions'])}, {m['conversion_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
