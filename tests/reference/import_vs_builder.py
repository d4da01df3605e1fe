"""Imported graphs against the hand-written builders: for families headroom builds,
the graph `headroom import` records from transformers' own code must predict what the
builder predicts (within --bound-pct, 0.1% by default). Where they differ, one of them
is wrong, and the fake and real references say which.

    python3 import_vs_builder.py HEADROOM [--only SUBSTR] [--bound-pct 0.1] [--gpu h100-80gb]

Each case is planned twice with the same flags: from its config.json (the builder) and
from the graph file models/import/headroom_import.py writes for the case's regime: on
this CPU (--device cpu --cpu-bf16 aten), or with --gpu for that GPU, the import then
recording on the fake CUDA device (CUDA's autocast lists and SDPA kernels), the
difference taken relative to the peak less the cuBLAS workspaces.
Not here: BERT (a classifier; the import records causal language models).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The importer runs in this process (torch and transformers imported once, not per case).
sys.path.insert(1, os.path.join(HERE, "..", "..", "models", "import"))
import headroom_import  # noqa: E402

from cases import (Case, TINY_GEMMA2, TINY_GPT2, TINY_LLAMA, TINY_MIXTRAL,  # noqa: E402
                   TINY_PHI3, TINY_QWEN2, TINY_QWEN3, TINY_QWEN3_MOE, write_config)

QKVO = ("q_proj", "k_proj", "v_proj", "o_proj")
ALL_LINEAR = QKVO + ("gate_proj", "up_proj", "down_proj")

CASES = [
    Case("tiny-llama fp32 adamw mb2", "llama-3.2-1b.json", TINY_LLAMA, micro_batch=2),
    Case("tiny-llama bf16 lora qkvo s96", "llama-3.2-1b.json", TINY_LLAMA, precision="bf16",
         mode="lora", lora_targets=QKVO, seq_len=96),
    Case("tiny-llama amp-bf16 adamw ckpt-all mb2", "llama-3.2-1b.json", TINY_LLAMA,
         precision="amp-bf16", checkpoint="all", micro_batch=2),
    Case("tiny-llama amp-bf16 lora all-linear eager mb3", "llama-3.2-1b.json", TINY_LLAMA,
         precision="amp-bf16", mode="lora", lora_targets=ALL_LINEAR, attention="eager",
         micro_batch=3),
    Case("tiny-qwen2 bf16 adamw mb2", "qwen2.5-0.5b.json", TINY_QWEN2, precision="bf16",
         micro_batch=2),
    Case("tiny-qwen3 fp32 lora qkvo ckpt-all", "qwen3-0.6b.json", TINY_QWEN3, mode="lora",
         lora_targets=QKVO, checkpoint="all"),
    Case("tiny-phi3 fp32 adamw mb2", "phi-3-mini.json", TINY_PHI3, micro_batch=2),
    Case("tiny-gemma2 bf16 adamw eager", "gemma-2-2b.json", TINY_GEMMA2, precision="bf16",
         attention="eager"),
    Case("tiny-mixtral fp32 adamw mb2", "mixtral-8x7b.json", TINY_MIXTRAL, micro_batch=2),
    Case("tiny-qwen3-moe bf16 lora qkvo", "qwen3-30b-a3b.json", TINY_QWEN3_MOE, precision="bf16",
         mode="lora", lora_targets=QKVO),
    Case("tiny-gpt2 fp32 adamw eager mb2", "gpt2.json", TINY_GPT2, attention="eager",
         micro_batch=2),
]


# The compute capability of the GPUs --gpu takes (planner/core/catalog/gpus.yaml), and
# the cuBLAS workspaces both plans hold (2 x 32 MiB on sm90, planner/core/gpu_catalog.cc):
# left out of the difference's denominator, where they would hide a tiny model's error.
GPU_SM = {"h100-80gb": 90, "h200": 90}
CUBLAS_WORKSPACES = 2 * 32 * 2 ** 20


def importer_flags(case, gpu):
    flags = ["--precision", case.precision, "--attention", case.attention]
    if gpu:
        flags += ["--device", "cuda", "--sm", str(GPU_SM[gpu])]
    if case.mode == "lora":
        flags += ["--lora-rank", str(case.lora_rank), "--lora-targets", ",".join(case.lora_targets)]
        if case.precision == "amp-bf16":
            flags += ["--base-dtype", case.base_dtype]
    if case.checkpoint != "none":
        flags += ["--checkpointing"]
    cfg = case.hf_config()
    reached = [cfg.get(k) or 0 for k in ("sliding_window", "attention_chunk_size")]
    reached = [v for v in reached if 0 < v <= case.seq_len]
    if reached:  # transformers builds the window's masks from there on
        flags += ["--min-seq-len", str(max(reached))]
    return flags


def plan(headroom, model, case, gpu):
    device = ("--gpu", gpu) if gpu else ("--device", "cpu", "--cpu-bf16", "aten")
    cmd = [headroom, "plan", "--model", model, *case.plan_flags(device), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{out.stderr.strip()}")
    return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom")
    parser.add_argument("--only", default="")
    parser.add_argument("--bound-pct", type=float, default=0.1)
    parser.add_argument("--gpu", choices=sorted(GPU_SM),
                        help="plan for this GPU, the import recording on fake CUDA")
    args = parser.parse_args()
    failures = 0
    cases = [c for c in CASES if args.only in c.name]
    print(f"{'configuration':<48} {'builder':>12} {'imported':>12} {'difference':>11}"
          f"  {'params':>9}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            start = time.time()
            _, config = write_config(case, tmp, i)
            graph = os.path.join(tmp, f"case{i}", "graph.json")
            status = headroom_import.main([config, "--out", graph, "--quiet",
                                           *importer_flags(case, args.gpu)])
            if status != 0:
                raise RuntimeError(f"{case.name}: the import exited {status}")
            built = plan(args.headroom, config, case, args.gpu)
            imported = plan(args.headroom, graph, case, args.gpu)
            b, m = built["peak"]["allocated_bytes"], imported["peak"]["allocated_bytes"]
            error = 100.0 * (m - b) / (b - (CUBLAS_WORKSPACES if args.gpu else 0))
            same_params = built["params"]["total"] == imported["params"]["total"]
            ok = abs(error) <= args.bound_pct and same_params
            failures += not ok
            print(f"{case.name:<48} {b:>12,} {m:>12,} {error:>+10.3f}%"
                  f"  {'same' if same_params else 'DIFFERENT':>9}"
                  f"  ({time.time() - start:.1f} s){'' if ok else '  OUT OF BOUND'}", flush=True)
    print(f"{len(cases) - failures} of {len(cases)} imported graphs within {args.bound_pct}% "
          f"of the builders")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
