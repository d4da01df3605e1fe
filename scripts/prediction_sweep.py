#!/usr/bin/env python3
"""Runs `headroom plan` over a sweep of configurations and records or compares what it prints.

A refactoring must not change a prediction. Record the sweep before it, compare after:

    python3 scripts/prediction_sweep.py record build/cli/headroom /tmp/before.json
    python3 scripts/prediction_sweep.py compare build/cli/headroom /tmp/before.json

JSON outputs may gain fields but every recorded field must keep its value; text outputs
(the plan file, exports) must be byte-identical.
"""
import itertools
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

MODELS = {  # model -> (gpu, seq_len)
    "tiny-gpt2": ("a100-80gb", 128),
    "tiny-bert": ("a100-80gb", 128),
    "tiny-llama": ("a100-80gb", 128),
    "gpt2": ("a100-40gb", 512),
    "bert-base": ("l4", 512),
    "qwen2.5-0.5b": ("a100-80gb", 1024),
    "llama-3.2-1b": ("h100-80gb", 1024),
    "llama-3-8b": ("h100-80gb", 2048),
    "tests/data/tiny-llama-config.json": ("a100-80gb", 64),
}
PRECISIONS = ["fp32", "amp-bf16", "bf16", "mixed-bf16"]
TUNES = {"full": [], "lora": ["--lora-rank", "8"], "qlora": ["--qlora"]}
CHECKPOINTS = ["none", "all", "every:2"]
CPU_BF16_KERNELS = os.environ.get("SWEEP_CPU_BF16", "avx512-bf16,emulated,aten").split(",")


def cases():
    for model, (gpu, seq) in MODELS.items():
        base = ["--model", model, "--gpu", gpu, "--seq-len", str(seq)]
        for precision, (tune, tune_flags), checkpoint in itertools.product(PRECISIONS, TUNES.items(), CHECKPOINTS):
            if tune == "qlora" and precision == "fp32":
                continue
            fixed = base + ["--precision", precision, "--checkpoint", checkpoint, "--micro-batch", "2",
                            "--grad-accum", "2"] + tune_flags
            yield " ".join(fixed), fixed
        for tune, tune_flags in TUNES.items():
            for stack in ["pytorch", "hf-trainer", "headroom"]:
                auto = base + ["--auto", "--global-batch", "8", "--stack", stack] + tune_flags
                yield " ".join(auto), auto
    yield "cpu", ["--model", "tiny-gpt2", "--device", "cpu", "--seq-len", "64", "--micro-batch", "3",
                  "--precision", "bf16", "--cpu-bf16", "emulated", "--checkpoint", "layers:0"]
    # The CPU's bf16 kernels, each with its own scratch rule, at the thread counts measured.
    for model, kernel, threads, precision, (tune, tune_flags), checkpoint in itertools.product(
            ["tiny-gpt2", "tiny-bert", "tiny-llama", "gpt2"], CPU_BF16_KERNELS, [1, 2, 4],
            ["bf16", "amp-bf16"], list(TUNES.items())[:2], ["none", "all"]):
        cpu = ["--model", model, "--device", "cpu", "--seq-len", "64", "--micro-batch", "2",
               "--precision", precision, "--cpu-bf16", kernel, "--cpu-threads", str(threads),
               "--checkpoint", checkpoint] + tune_flags
        yield " ".join(cpu), cpu
    yield "optimizers", ["--model", "gpt2", "--gpu", "l4", "--optimizer", "adafactor", "--micro-batch", "1"]
    yield "adamw-8bit", ["--model", "gpt2", "--gpu", "l4", "--optimizer", "adamw-8bit", "--micro-batch", "1",
                         "--attention", "eager"]


def run(binary, args):
    proc = subprocess.run([binary, "plan", *args], capture_output=True, text=True)
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def record_one(binary, args):
    out = {"json": run(binary, args + ["--json"])}
    out["json"]["stdout"] = json.loads(out["json"]["stdout"]) if out["json"]["rc"] == 0 else out["json"]["stdout"]
    out["text"] = run(binary, args)
    out["emit_hf"] = run(binary, args + ["--emit", "hf"])
    out["emit_deepspeed"] = run(binary, args + ["--emit", "deepspeed"])
    plan_path = f"/tmp/headroom_sweep_plan_{os.getpid()}_{abs(hash(tuple(args)))}.yaml"
    run(binary, args + ["-o", plan_path])
    if os.path.exists(plan_path):
        with open(plan_path) as f:
            out["plan_file"] = f.read()
        os.remove(plan_path)
    return out


def without_timings(value):
    """The solver's wall time differs run to run; everything else must not."""
    if isinstance(value, str):
        return re.sub(r"solver: [0-9.]+ s", "solver: <time> s", value)
    if isinstance(value, dict):
        out = {k: without_timings(v) for k, v in value.items()}
        if isinstance(out.get("solver"), dict):
            out["solver"].pop("seconds", None)
        return out
    return value


def same(before, after, where, diffs):
    """Every value in `before` is in `after`, unchanged; `after` may add dictionary keys."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key, value in before.items():
            if key not in after:
                diffs.append(f"{where}.{key}: missing")
            else:
                same(value, after[key], f"{where}.{key}", diffs)
    elif before != after:
        diffs.append(f"{where}: {str(before)[:200]!r} -> {str(after)[:200]!r}")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("record", "compare"):
        sys.exit(__doc__)
    mode, binary, path = sys.argv[1:]
    todo = list(cases())
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        outputs = pool.map(lambda case: record_one(binary, case[1]), todo)
        results = {name: out for (name, _), out in zip(todo, outputs)}
    if mode == "record":
        with open(path, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
        print(f"recorded {len(results)} configurations to {path}")
        return
    with open(path) as f:
        baseline = json.load(f)
    diffs = []
    for name, before in baseline.items():
        if name not in results:
            diffs.append(f"{name}: not run")
            continue
        for kind, value in before.items():
            # Text outputs gain no fields: compare them whole. JSON may gain fields.
            same(without_timings(value), without_timings(results[name][kind]), f"[{name}] {kind}", diffs)
    for line in diffs[:40]:
        print(line)
    print(f"{len(baseline)} configurations compared, {len(diffs)} differences")
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
