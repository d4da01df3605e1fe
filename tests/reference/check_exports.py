"""The exports of sharded plans run in (or are accepted by) the engines they are for.

    python3 check_exports.py HEADROOM [--only torchrun|accelerate-launch|deepspeed|accelerate|hf]

* torchrun: the exported launch line starts 2 gloo ranks of distributed_run.py (the
  `train.py` of the line) on a tiny Llama under FSDP2; each rank's measured peak must be
  within 1% of `plan --json`'s per-rank prediction;
* accelerate-launch: `accelerate launch` with the exported accelerate-FSDP config trains
  the same tiny Llama for 2 steps on 2 gloo processes (accelerate_run.py); each rank's
  measured peak must be within 3% of the plan for accelerate's wrap (--fsdp-wrap
  accelerate, what the export plans);
* deepspeed: DeepSpeed's own config class (deepspeed.runtime.config.DeepSpeedConfig)
  accepts the exported config for the plan's data-parallel size, and reads back the
  stage, batch sizes and buckets;
* accelerate: accelerate's config loader reads the exported YAML as an FSDP2 cluster
  config with the plan's processes, machines and resharding;
* hf: transformers.TrainingArguments constructs from the exported fields.

The 70B cases are the plan of `plan --model llama-3-70b --gpu h100-80gb --gpus auto
--precision mixed-bf16 --seq-len 4096 --global-batch 64`.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cases import TINY_LLAMA, Case  # noqa: E402
from run_reference_suite import suite_env  # noqa: E402

LLAMA_70B = ["--model", "llama-3-70b", "--gpu", "h100-80gb", "--gpus", "auto",
             "--precision", "mixed-bf16", "--seq-len", "4096", "--global-batch", "64"]


def headroom(binary, args, env=None):
    out = subprocess.run([binary, "plan", *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"headroom plan {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def tiny_llama_on_two_ranks(tmp, name):
    """A tiny Llama's config.json in its own directory, and the flags that plan it on 2
    FSDP2 ranks."""
    case = Case("tiny-llama fp32 adamw sdpa mb2", "llama-3.2-1b.json", TINY_LLAMA, micro_batch=2)
    config_dir = os.path.join(tmp, name)
    os.makedirs(config_dir)
    with open(os.path.join(config_dir, "config.json"), "w") as f:
        json.dump(case.hf_config(), f)
    flags = ["--model", os.path.join(config_dir, "config.json"), *case.plan_flags(),
             "--gpus", "2", "--sharding", "fsdp"]
    return case, config_dir, flags


def ranks_within(argv, env, launcher, predicted, bound_pct):
    """Runs the launcher; each rank's `RANK_RESULT {json}` line against the prediction."""
    out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=HERE)
    ranks = [json.loads(l.split(" ", 1)[1]) for l in out.stdout.splitlines()
             if l.startswith("RANK_RESULT ")]
    if out.returncode != 0 or len(ranks) != 2:
        raise RuntimeError(f"{launcher} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    ok = True
    for r in sorted(ranks, key=lambda r: r["rank"]):
        error = 100.0 * (predicted - r["measured_peak_bytes"]) / r["measured_peak_bytes"]
        ok &= abs(error) <= bound_pct
        units = f"{r['fsdp_units']} FSDP modules, " if "fsdp_units" in r else ""
        print(f"  rank {r['rank']}: {units}peak in {r['phase']}, measured "
              f"{r['measured_peak_bytes']:,}, predicted {predicted:,} ({error:+.3f}%)")
    return ok


def check_torchrun(binary, tmp):
    case, config_dir, flags = tiny_llama_on_two_ranks(tmp, "llama")
    env = suite_env(default_path=False)
    line = headroom(binary, flags + ["--emit", "torchrun"], env).strip()
    predicted = json.loads(headroom(binary, flags + ["--json"], env))["peak"]["per_rank"]
    payload = dict(vars(case), config_dir=config_dir, sharding="fsdp", gpus=2,
                   lora_targets=list(case.lora_targets))
    script = [os.path.join(HERE, "distributed_run.py"), "--under-launcher", json.dumps(payload)]
    argv = [sys.executable, "-m", "torch.distributed.run",
            *shlex.split(line)[1:-1], *script]  # the exported line, train.py replaced
    print("running:", line.replace("train.py", "distributed_run.py --under-launcher ..."))
    return ranks_within(argv, env, "torchrun", predicted["allocated_bytes"], 1.0)


def check_accelerate_launch(binary, tmp):
    """`accelerate launch` with the exported config trains 2 steps on 2 gloo processes
    (accelerate_run.py); each rank within 3% of the plan for accelerate's wrap."""
    import socket
    case, config_dir, flags = tiny_llama_on_two_ranks(tmp, "llama-accelerate")
    env = suite_env(default_path=False)
    config = os.path.join(tmp, "accelerate-launch.yaml")
    with open(config, "w") as f:
        f.write(headroom(binary, flags + ["--emit", "accelerate-fsdp"], env))
    plan = json.loads(headroom(binary, flags + ["--fsdp-wrap", "accelerate", "--json"], env))
    payload = dict(vars(case), config_dir=config_dir, lora_targets=list(case.lora_targets))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config,
            "--main_process_port", str(port), os.path.join(HERE, "accelerate_run.py"),
            json.dumps(payload)]
    print("running: accelerate launch --config_file <exported> accelerate_run.py ...")
    return ranks_within(argv, env, "accelerate launch",
                        plan["peak"]["per_rank"]["allocated_bytes"], 3.0)


def check_deepspeed(binary, _tmp):
    exported = json.loads(headroom(binary, LLAMA_70B + ["--emit", "deepspeed"]))
    plan = json.loads(headroom(binary, LLAMA_70B + ["--json"]))["plan"]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", RANK="0", WORLD_SIZE="1",
                      LOCAL_RANK="0", DS_ACCELERATOR="cpu")
    import deepspeed
    from deepspeed.runtime.config import DeepSpeedConfig

    import distributed_run
    distributed_run.skip_deepspeed_shm_op()
    deepspeed.init_distributed(dist_backend="gloo", verbose=False)
    ranks = exported["train_batch_size"] // (exported["train_micro_batch_size_per_gpu"] *
                                            exported["gradient_accumulation_steps"])

    class DataParallel:  # the plan's data-parallel group, as DeepSpeed asks an mpu
        def get_data_parallel_world_size(self):
            return ranks

    parsed = DeepSpeedConfig(exported, mpu=DataParallel())
    print(f"  DeepSpeed {deepspeed.__version__} read: stage {parsed.zero_optimization_stage}, "
          f"micro-batch {parsed.train_micro_batch_size_per_gpu} x "
          f"{parsed.gradient_accumulation_steps} x {ranks} ranks = {parsed.train_batch_size}, "
          f"bf16 {parsed.bfloat16_config.enabled}, reduce_bucket_size "
          f"{parsed.zero_config.reduce_bucket_size:.0f}, prefetch "
          f"{parsed.zero_config.prefetch_bucket_size:.0f}")
    print(f"  headroom's --emit plan: {ranks} ranks; `plan --json` (solver free to checkpoint "
          f"per block): {plan['gpus']} ranks, {plan['sharding']}")
    return (parsed.zero_optimization_stage == 3 and parsed.bfloat16_config.enabled
            and parsed.train_batch_size == exported["train_batch_size"]
            and parsed.zero_config.reduce_bucket_size == 5e8)


def check_accelerate(binary, tmp):
    path = os.path.join(tmp, "accelerate.yaml")
    with open(path, "w") as f:
        f.write(headroom(binary, LLAMA_70B + ["--emit", "accelerate-fsdp"]))
    from accelerate.commands.config.config_args import load_config_from_file
    c = load_config_from_file(path)
    print(f"  accelerate read: {type(c).__name__} {c.distributed_type}, {c.num_processes} "
          f"processes on {c.num_machines} machines, fsdp_config {c.fsdp_config}")
    return (str(c.distributed_type).endswith("FSDP") and c.fsdp_config["fsdp_version"] == 2
            and c.num_processes % c.num_machines == 0 and c.num_processes > 1)


def check_hf(binary, tmp):
    import transformers
    ok = True
    for sharding in ("fsdp", "zero1", "zero2", "zero3"):
        args = json.loads(headroom(binary, ["--model", "gpt2", "--gpu", "a100-80gb", "--gpus",
                                            "8", "--sharding", sharding, "--seq-len", "1024",
                                            "--global-batch", "64", "--emit", "hf"]))
        # use_cpu: this machine has no GPU, which bf16=True would otherwise ask for.
        targs = transformers.TrainingArguments(output_dir=os.path.join(tmp, sharding),
                                               use_cpu=True, **args)
        print(f"  TrainingArguments ({sharding}): fsdp={targs.fsdp} "
              f"deepspeed={'set' if targs.deepspeed else None} "
              f"batch {targs.per_device_train_batch_size} x {targs.gradient_accumulation_steps}")
        ok &= bool(targs.fsdp) if sharding == "fsdp" else bool(targs.deepspeed)
    # Activation offload: the kwargs Trainer pops `offload` from (trainer.py).
    args = json.loads(headroom(binary, ["--model", "gpt2", "--gpu", "a100-80gb", "--gpus", "8",
                                        "--sharding", "zero2", "--seq-len", "1024",
                                        "--global-batch", "64", "--checkpoint", "all",
                                        "--activation-offload", "--emit", "hf"]))
    targs = transformers.TrainingArguments(output_dir=os.path.join(tmp, "offload"),
                                           use_cpu=True, **args)
    print(f"  TrainingArguments (zero2, offload): activation_checkpointing="
          f"{targs.activation_checkpointing} kwargs {targs.activation_checkpointing_kwargs}")
    ok &= bool(targs.activation_checkpointing) and targs.activation_checkpointing_kwargs == {
        "offload": True}
    return ok


CHECKS = {"torchrun": check_torchrun, "accelerate-launch": check_accelerate_launch,
          "deepspeed": check_deepspeed,
          "accelerate": check_accelerate, "hf": check_hf}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom")
    parser.add_argument("--only", choices=sorted(CHECKS))
    args = parser.parse_args()
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, check in CHECKS.items():
            if args.only and name != args.only:
                continue
            print(f"{name}:", flush=True)
            if not check(os.path.abspath(args.headroom), tmp):
                failed.append(name)
    print("all exports accepted" if not failed else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
