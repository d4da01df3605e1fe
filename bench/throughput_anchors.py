#!/usr/bin/env python3
"""The step-time model against published fine-tuning throughputs.

Each anchor is a measurement someone published (source, model, GPUs, settings) and the
`headroom plan` command that states the same run. Prints estimate / published for each
as a markdown table (docs/capacity.md holds it) and exits 1 when a ratio leaves
[0.75, 1.25], so ctest keeps the catalog's efficiency factors honest. Runs the model
does not describe (torch.compile fuses the elementwise kernels it prices one by one)
are printed with the reason and not held to the bound.

    python3 bench/throughput_anchors.py build/cli/headroom [--markdown]
"""
import json
import subprocess
import sys

ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

COMPILED = "torch.compile fuses the elementwise kernels the model prices one at a time (eager)"

# (name, source, published tokens/s over all GPUs, plan flags[, why it is not held to 25%])
ANCHORS = [
    ("Llama-3.2-3B LoRA r32 (q,v), 1x L40S, bf16, batch 4",
     "huggingface/peft method_comparison/MetaMathQA results lora--llama-3.2-3B-rank32.json "
     "(2025-06-19; mean of the run's tokens/sec; 210 tokens per sample on average, modelled "
     "as sequences of 256)",
     6778,
     ["--model", "llama-3.2-3b", "--gpu", "l40s", "--precision", "bf16", "--lora-rank", "32",
      "--lora-targets", "q_proj", "v_proj", "--seq-len", "256", "--micro-batch", "4"]),
    ("Llama-3.2-3B full, 1x L40S, bf16, batch 4",
     "huggingface/peft method_comparison/MetaMathQA results "
     "full-finetuning--llama-3.2-3B-lr_0.00001.json (2025-06-20; same data)",
     2316,
     ["--model", "llama-3.2-3b", "--gpu", "l40s", "--precision", "bf16", "--seq-len", "256",
      "--micro-batch", "4"]),
    ("Llama 3.1 8B full, FSDP on 8x H100, local batch 2, seq 8192",
     "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (2024-12; eager, "
     "selective activation checkpointing; 5,762 tokens/s per GPU on H100 96GB at 500 W; "
     "torchtitan's FSDP2 policy: fp32 shards, bf16 parameters, fp32 reductions; planned "
     "with no checkpointing, which recomputes less than selective AC: an upper bound)",
     8 * 5762,
     ["--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--precision", "fp32",
      "--fsdp-param-dtype", "bf16", "--fsdp-reduce-dtype", "fp32", "--seq-len", "8192",
      "--micro-batch", "2", "--gpus", "8", "--sharding", "fsdp", "--checkpoint", "none"],
     "an upper bound: selective AC recomputes some ops, and the published H100s were capped "
     "at 500 W where the catalog's H100 SXM runs at 700 W (no published figure gives the "
     "capped part's clocks)"),
    ("Llama 3.1 8B full, FSDP on 8x H100, as above, every block checkpointed",
     "the same run, planned with full recomputation (more than selective AC): a lower bound",
     8 * 5762,
     ["--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--precision", "fp32",
      "--fsdp-param-dtype", "bf16", "--fsdp-reduce-dtype", "fp32", "--seq-len", "8192",
      "--micro-batch", "2", "--gpus", "8", "--sharding", "fsdp", "--checkpoint", "all"]),
    ("Llama-2 70B QLoRA r64 (all linear), 4x H100 SXM, batch 8 per GPU, seq 2048",
     "AnswerDotAI/fsdp_qlora benchmarks_03_2024.md (2024-03; 1,024 samples x 2,048 tokens "
     "in 667 s; gradient checkpointing on; FSDP, planned here as DDP: same compute per GPU)",
     1024 * 2048 / 667,
     ["--model", "llama-2-70b", "--gpu", "h100-80gb", "--qlora", "--lora-rank", "64",
      "--lora-targets"] + ALL_LINEAR +
     ["--seq-len", "2048", "--micro-batch", "8", "--checkpoint", "all", "--gpus", "4",
      "--sharding", "ddp"]),
    ("Llama-2 70B QLoRA r64 (all linear), 8x A100 40GB, batch 4 per GPU, seq 2048",
     "AnswerDotAI/fsdp_qlora benchmarks_03_2024.md (2024-03; 1,024 x 2,048 tokens in 672 s)",
     1024 * 2048 / 672,
     ["--model", "llama-2-70b", "--gpu", "a100-40gb", "--qlora", "--lora-rank", "64",
      "--lora-targets"] + ALL_LINEAR +
     ["--seq-len", "2048", "--micro-batch", "4", "--checkpoint", "all", "--gpus", "8",
      "--sharding", "ddp"]),
    ("Llama 3.1 8B LoRA r8 (q,v), 1x RTX 4090, batch 2, packed 2048",
     "pytorch/torchtune README, Memory and training speed (PR #1664, 2024-09-24; "
     "torch.compile on; checkpointing, LoRA rank 8 and targets from its default configs: the table does not state them)",
     3083,
     ["--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--precision", "bf16", "--lora-rank", "8",
      "--lora-targets", "q_proj", "v_proj", "--seq-len", "2048", "--micro-batch", "2",
      "--checkpoint", "all"], COMPILED),
    ("Llama 3.1 8B LoRA r16 (all linear), 1x H100, batch 2, seq 4096, accumulation 16",
     "NVIDIA-NeMo/Automodel docs/performance-summary.mdx (row added 2025-12-16; DGX-H100, "
     "BF16, FSDP2 on one GPU, 12,472.87 tokens/s/GPU; kernels 'TE + triton'; recipe "
     "examples/llm_benchmark/llama3_1/llama3_1_8b_peft_benchmark.yaml, no checkpointing)",
     12472.87,
     ["--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--precision", "bf16", "--lora-rank",
      "16", "--lora-targets"] + ALL_LINEAR +
     ["--seq-len", "4096", "--micro-batch", "2", "--grad-accum", "16", "--checkpoint", "none"],
     "Transformer Engine's and Triton's fused kernels, which the model prices as eager "
     "PyTorch's one kernel at a time; eager, this plan does not fit 80 GB (102 GiB)"),
    ("Llama 3.1 8B QLoRA r8, 1x RTX 4090, batch 2, packed 2048",
     "pytorch/torchtune README (same table)",
     2413,
     ["--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--qlora", "--lora-rank", "8",
      "--lora-targets"] + ALL_LINEAR +
     ["--seq-len", "2048", "--micro-batch", "2", "--checkpoint", "all"], COMPILED),
]


def estimate(cli, flags):
    out = subprocess.run([cli, "plan", *flags, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"plan failed: {' '.join(flags)}\n{out.stderr}")
    return json.loads(out.stdout)["estimate"]["tokens_per_second"]


def main():
    cli = sys.argv[1]
    markdown = "--markdown" in sys.argv
    bad = 0
    print("| run | published tokens/s | estimate | estimate / published | source |")
    print("|---|---:|---:|---:|---|")
    for name, source, published, flags, *why_not in ANCHORS:
        est = estimate(cli, flags)
        ratio = est / published
        held = not why_not
        bad += held and not 0.75 <= ratio <= 1.25
        mark = "" if held else f" (not held to 25%: {why_not[0]})"
        print(f"| {name} | {published:,.0f} | {est:,.0f} | {ratio:.2f}{mark} | "
              f"{source if markdown else ''} |")
    print(f"{bad} of the held anchors outside 25%", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
