"""`headroom train` against the training loop a transformers user writes, on the same
configurations, one thread each: tokens per second side by side, written to
bench/results/train_vs_hf.json. The two alternate for --rounds rounds and each keeps its
best: this machine's speed drifts by several percent between runs.

    python3 bench/train_vs_hf.py build/cli/headroom [--steps 16] [--rounds 3]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from cases import Case  # noqa: E402

CONFIGS = [
    Case("gpt2 fp32 adamw mb2 s128", "gpt2.json", attention="eager", micro_batch=2, seq_len=128),
    Case("gpt2 amp-bf16 adamw mb1 s64", "gpt2.json", precision="amp-bf16", attention="eager",
         seq_len=64),
    Case("gpt2 lora r16 fp32 mb2 s128", "gpt2.json", mode="lora", lora_rank=16,
         lora_targets=("c_attn",), attention="eager", micro_batch=2, seq_len=128),
]


def headroom_tokens_per_second(binary, case, config_path, steps):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "run.json")
        flags = case.plan_flags()
        # `train` runs its own stack; drop the flags only `plan` takes.
        for flag in ("--stack", "--optimizer-impl", "--base-dtype"):
            if flag in flags:
                i = flags.index(flag)
                del flags[i:i + 2]
        cmd = [binary, "train", "--model", config_path, *flags, "--steps", str(steps),
               "--report", report]
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            sys.exit(f"{' '.join(cmd)}\n{out.stderr}")
        with open(report) as f:
            return json.load(f)["tokens_per_second"]


def hf_tokens_per_second(case, config_dir, steps):
    """In a fresh process, like `train`: a warm heap in this one would favour later runs."""
    payload = dict(vars(case), config_dir=config_dir, threads=1, steps=steps)
    payload["lora_targets"] = list(case.lora_targets)
    code = ("import json, sys; import hf_training_run as h; "
            "print(h.run(json.loads(sys.argv[1]), h.Stopwatch()).seconds)")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               TRANSFORMERS_VERBOSITY="error",
               PYTHONPATH=os.path.join(ROOT, "tests", "reference"))
    out = subprocess.run([sys.executable, "-c", code, json.dumps(payload)], capture_output=True,
                         text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"HF loop failed:\n{out.stderr[-3000:]}")
    seconds = float(out.stdout.strip().splitlines()[-1])
    return steps * case.micro_batch * case.grad_accum * case.seq_len / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "train_vs_hf.json"))
    args = parser.parse_args()
    results = []
    for case in CONFIGS:
        with tempfile.TemporaryDirectory() as tmp:
            config_path = os.path.join(tmp, "config.json")
            with open(config_path, "w") as f:
                json.dump(case.hf_config(), f)
            ours = theirs = 0.0
            for _ in range(args.rounds):
                theirs = max(theirs, hf_tokens_per_second(case, tmp, args.steps))
                ours = max(ours, headroom_tokens_per_second(args.headroom, case, config_path,
                                                            args.steps))
        results.append({"config": case.name, "headroom_train_tokens_per_second": ours,
                        "hf_loop_tokens_per_second": theirs, "ratio": ours / theirs})
        print(f"{case.name:<32} train {ours:9.1f} tok/s   HF loop {theirs:9.1f} tok/s   "
              f"ratio {ours / theirs:.2f}x", flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"steps": args.steps, "rounds": args.rounds, "threads": 1, "results": results},
                  f, indent=2)
    print("results:", args.out)


if __name__ == "__main__":
    main()
