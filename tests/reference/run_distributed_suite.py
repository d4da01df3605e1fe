"""Measured against predicted, per rank: real transformers + PEFT training under DDP,
ZeRO-1 (DDP + ZeroRedundancyOptimizer), FSDP2 and DeepSpeed ZeRO-2/3 on 2 and 4 CPU
processes (gloo), each rank measured by PeakMeter (distributed_run.py), against
`headroom plan --gpus N --sharding S --json`, whose peak is its busiest rank's. The
busiest measured rank must be within --bound-pct of it; every other rank within
--rank-bound-pct of the plan for that rank (`--rank r`: ZeRO-1's and ZeRO-2's ranks own
different partitions). Prints the table; exits 1 when a rank is outside.

    python3 run_distributed_suite.py HEADROOM [--bound-pct 1] [--rank-bound-pct 3]
                                     [--only SUBSTR] [--markdown FILE]

Runs on the pinned CPU path of run_reference_suite.py (ONEDNN_MAX_CPU_ISA=AVX512_CORE,
one thread per rank).
"""
import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fork_server  # noqa: E402
from cases import LLAMA_ALL as ALL_LINEAR  # noqa: E402
from cases import LLAMA_QKVO as QKVO  # noqa: E402
from cases import TINY_GPT2, TINY_LLAMA, TINY_QWEN2, Case, write_config  # noqa: E402
from run_reference_suite import predict, suite_env  # noqa: E402


@dataclasses.dataclass
class DistributedCase:
    case: Case
    sharding: str  # ddp | ddp-bucket-view | zero1 | zero2 | zero3 | fsdp | fsdp-no-reshard
    gpus: int
    # DeepSpeed: zero_optimization values given to `headroom plan` (and so written into
    # the config it exports and DeepSpeed runs), e.g. {"reduce_bucket_size": 40000}.
    deepspeed: dict = dataclasses.field(default_factory=dict)
    # FSDP2's MixedPrecisionPolicy: (param_dtype, reduce_dtype or None), e.g. ("bf16", None).
    mp: tuple = None

    @property
    def name(self):
        knobs = "".join(f" {KNOB_NAMES[k]}{v:g}" for k, v in self.deepspeed.items())
        policy = f" mp {self.mp[0]}/{self.mp[1] or 'None'}" if self.mp else ""
        return f"{self.case.name} {self.sharding}{knobs}{policy} x{self.gpus}"

    def plan_flags(self):
        scheme = "ddp" if self.sharding == "ddp-bucket-view" else self.sharding
        flags = ["--gpus", str(self.gpus), "--sharding", scheme]
        if self.mp:
            flags += ["--fsdp-param-dtype", self.mp[0]]
            if self.mp[1]:
                flags += ["--fsdp-reduce-dtype", self.mp[1]]
        for key, value in self.deepspeed.items():
            flags += ["--ds-" + key.replace("_", "-"), str(value)]
        return flags + (["--ddp-bucket-view"] if self.sharding == "ddp-bucket-view" else [])


# Short names of DeepSpeed's knobs in the table.
KNOB_NAMES = {"reduce_bucket_size": "reduce", "stage3_prefetch_bucket_size": "prefetch",
              "stage3_max_live_parameters": "live",
              "stage3_param_persistence_threshold": "persist"}

GPT2 = ("gpt2.json", TINY_GPT2)
LLAMA = ("llama-3.2-1b.json", TINY_LLAMA)
QWEN2 = ("qwen2.5-0.5b.json", TINY_QWEN2)
WIDE_LLAMA = ("llama-3.2-1b.json", dict(TINY_LLAMA, hidden_size=512, num_attention_heads=8,
                                        num_key_value_heads=4, head_dim=64,
                                        intermediate_size=2048))


def case(family, name, **kw):
    config, overrides = family
    kw.setdefault("micro_batch", 2)
    return Case(name, config, overrides, **kw)


CASES = [
    DistributedCase(case(GPT2, "tiny-gpt2 fp32 adamw eager mb2", attention="eager"), "ddp", 2),
    DistributedCase(case(GPT2, "tiny-gpt2 fp32 adamw eager mb2", attention="eager"),
                    "ddp-bucket-view", 2),
    DistributedCase(case(GPT2, "tiny-gpt2 fp32 adamw eager mb2", attention="eager"), "zero1", 2),
    DistributedCase(case(GPT2, "tiny-gpt2 fp32 adamw eager mb2", attention="eager"), "zero1", 4),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw sdpa mb2 k2", grad_accum=2), "ddp", 4),
    DistributedCase(case(LLAMA, "tiny-llama fp32 lora adamw sdpa mb2", mode="lora"), "ddp", 2),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw ckpt-all sdpa mb2", checkpoint="all"),
                    "zero1", 2),
    DistributedCase(case(QWEN2, "tiny-qwen2 fp32 adamw sdpa mb2"), "ddp-bucket-view", 4),
    DistributedCase(case(QWEN2, "tiny-qwen2 fp32 lora adamw sdpa mb2", mode="lora"), "zero1", 4),
    DistributedCase(case(GPT2, "tiny-gpt2 fp32 adamw eager mb2", attention="eager"), "fsdp", 2),
    DistributedCase(case(GPT2, "tiny-gpt2 fp32 adamw eager mb2", attention="eager"),
                    "fsdp-no-reshard", 4),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw sdpa mb2 k2", grad_accum=2), "fsdp", 4),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw ckpt-all sdpa mb2", checkpoint="all"),
                    "fsdp", 2),
    DistributedCase(case(LLAMA, "tiny-llama fp32 lora adamw sdpa mb2", mode="lora"),
                    "fsdp-no-reshard", 2),
    DistributedCase(case(QWEN2, "tiny-qwen2 fp32 adamw sdpa mb2"), "fsdp-no-reshard", 2),
    DistributedCase(case(QWEN2, "tiny-qwen2 fp32 lora adamw ckpt-all sdpa mb2", mode="lora",
                         checkpoint="all"), "fsdp", 4),
    DistributedCase(case(QWEN2, "tiny-qwen2 bf16 adamw sdpa mb2", precision="bf16"), "fsdp", 2),
    DistributedCase(case(GPT2, "tiny-gpt2 amp-bf16 adamw eager mb2", precision="amp-bf16",
                         attention="eager"), "fsdp", 2),
    # FSDP2 with a MixedPrecisionPolicy: fp32 shards cast to bf16 and gathered, computing
    # in bf16; reduce-scatter in the shards' dtype (None: torch 2.15 follows grad_dtype),
    # in bf16 (accelerate's) with the cast back to fp32, or in fp32 (torchtitan's); LoRA
    # over an fp32 base, autocast on top, recomputation, accumulation.
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw sdpa mb2"), "fsdp", 2, mp=("bf16", None)),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw sdpa mb2"), "fsdp", 4,
                    mp=("bf16", "bf16")),
    DistributedCase(case(QWEN2, "tiny-qwen2 fp32 adamw sdpa mb2"), "fsdp-no-reshard", 2,
                    mp=("bf16", "fp32")),
    DistributedCase(case(GPT2, "tiny-gpt2 fp32 adamw eager mb2", attention="eager"), "fsdp", 2,
                    mp=("bf16", "bf16")),
    DistributedCase(case(LLAMA, "tiny-llama fp32 lora adamw sdpa mb2", mode="lora"), "fsdp", 2,
                    mp=("bf16", None)),
    DistributedCase(case(LLAMA, "tiny-llama amp-bf16 adamw sdpa mb2", precision="amp-bf16"),
                    "fsdp", 2, mp=("bf16", "bf16")),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw ckpt-all sdpa mb2", checkpoint="all"),
                    "fsdp", 4, mp=("bf16", "bf16")),
    DistributedCase(case(QWEN2, "tiny-qwen2 fp32 lora adamw ckpt-all sdpa mb2", mode="lora",
                         checkpoint="all"), "fsdp", 4, mp=("bf16", None)),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw sdpa mb2 k2", grad_accum=2), "fsdp", 2,
                    mp=("bf16", "bf16")),
    # QLoRA over FSDP2 as PEFT + accelerate run it: bitsandbytes' NF4 base with bf16 quant
    # storage (CPU backend), sharded and gathered per block like any bf16 parameter, its
    # QuantState whole on every rank; LoRA adapters in fp32.
    DistributedCase(case(LLAMA, "tiny-llama bf16 qlora adamw sdpa mb2", precision="bf16",
                         mode="qlora"), "fsdp", 2),
    DistributedCase(case(LLAMA, "tiny-llama bf16 qlora all ckpt-all sdpa mb2", precision="bf16",
                         mode="qlora", lora_targets=ALL_LINEAR, checkpoint="all"), "fsdp", 4),
    DistributedCase(case(QWEN2, "tiny-qwen2 bf16 qlora qkvo sdpa mb2 k2", precision="bf16",
                         mode="qlora", lora_targets=QKVO, grad_accum=2), "fsdp-no-reshard", 2),
    DistributedCase(case(LLAMA, "tiny-llama amp-bf16 qlora sdpa mb2", precision="amp-bf16",
                         mode="qlora"), "fsdp", 2, mp=("bf16", "fp32")),
    # Wide and short, so that the 4-bit shards and gathers outweigh the activations.
    DistributedCase(case(WIDE_LLAMA, "wide-llama bf16 qlora all sdpa mb1 s16", precision="bf16",
                         mode="qlora", lora_targets=ALL_LINEAR, micro_batch=1, seq_len=16),
                    "fsdp", 4),
    DistributedCase(case(WIDE_LLAMA, "wide-llama bf16 qlora sdpa mb1 s16", precision="bf16",
                         mode="qlora", micro_batch=1, seq_len=16), "fsdp-no-reshard", 2),
    # DeepSpeed ZeRO-2 with the config headroom exports: its defaults (the 5e8-element
    # gradient bucket dominates a tiny model), and buckets small enough that the model's
    # own gradients, partitions and reductions decide the peak.
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw sdpa mb2"), "zero2", 2),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw sdpa mb2"), "zero2", 2,
                    {"reduce_bucket_size": 40000}),
    DistributedCase(case(GPT2, "tiny-gpt2 fp32 adamw eager mb2", attention="eager"), "zero2", 4,
                    {"reduce_bucket_size": 30000}),
    DistributedCase(case(QWEN2, "tiny-qwen2 fp32 lora adamw sdpa mb2", mode="lora"), "zero2", 4,
                    {"reduce_bucket_size": 3000}),
    DistributedCase(case(QWEN2, "tiny-qwen2 bf16 adamw sdpa mb2", precision="bf16"), "zero2", 2,
                    {"reduce_bucket_size": 40000}),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw ckpt-all sdpa mb2", checkpoint="all"),
                    "zero2", 4, {"reduce_bucket_size": 50000}),
    # DeepSpeed ZeRO-3 on short sequences, where the gathered parameters, partitions and
    # buckets weigh against the activations: parameters persistent or not, gathered all
    # at once by the first prefetch or a few at a time (prefetch and live limits), with
    # biases (coalesced gathers), frozen LoRA bases, bf16, and recomputation.
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw sdpa mb1 s8", micro_batch=1, seq_len=8),
                    "zero3", 2, {"reduce_bucket_size": 40000,
                                 "stage3_param_persistence_threshold": 0}),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw sdpa mb1 s8", micro_batch=1, seq_len=8),
                    "zero3", 2, {"reduce_bucket_size": 40000}),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw sdpa mb1 s8", micro_batch=1, seq_len=8),
                    "zero3", 2, {"reduce_bucket_size": 40000,
                                 "stage3_param_persistence_threshold": 0,
                                 "stage3_prefetch_bucket_size": 20000,
                                 "stage3_max_live_parameters": 60000}),
    DistributedCase(case(GPT2, "tiny-gpt2 fp32 adamw eager mb1 s8", attention="eager",
                         micro_batch=1, seq_len=8),
                    "zero3", 4, {"reduce_bucket_size": 30000,
                                 "stage3_param_persistence_threshold": 1000}),
    DistributedCase(case(QWEN2, "tiny-qwen2 fp32 lora adamw sdpa mb1 s8", mode="lora",
                         micro_batch=1, seq_len=8),
                    "zero3", 2, {"reduce_bucket_size": 20000,
                                 "stage3_param_persistence_threshold": 0}),
    DistributedCase(case(QWEN2, "tiny-qwen2 bf16 adamw sdpa mb1 s16", precision="bf16",
                         micro_batch=1, seq_len=16),
                    "zero3", 2, {"reduce_bucket_size": 40000,
                                 "stage3_param_persistence_threshold": 2000}),
    DistributedCase(case(LLAMA, "tiny-llama fp32 adamw ckpt-all sdpa mb2 s16", checkpoint="all",
                         seq_len=16),
                    "zero3", 2, {"reduce_bucket_size": 50000,
                                 "stage3_param_persistence_threshold": 0,
                                 "stage3_prefetch_bucket_size": 10000}),
]


def exported_deepspeed_config(dc, headroom, config_path, env):
    """The DeepSpeed config `headroom plan --emit deepspeed` writes for this plan, with
    HF Trainer's "auto" values filled in as the Trainer fills them."""
    import subprocess
    cmd = [headroom, "plan", "--model", config_path, *dc.case.plan_flags(), *dc.plan_flags(),
           "--emit", "deepspeed"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{out.stderr.strip()}")
    return json.loads(out.stdout)


def check_ranks(ranks, predicted, own, args):
    """Per rank: the prediction it is held to, the error in percent, and whether it is
    within bound (the busiest measured rank against the plan's peak, --bound-pct; the
    others against the plan for their own rank, --rank-bound-pct)."""
    busiest = max(r["measured_peak_bytes"] for r in ranks)
    out = []
    for r in ranks:
        is_busiest = r["measured_peak_bytes"] == busiest
        target = predicted if is_busiest else own[r["rank"]]
        error = 100.0 * (target - r["measured_peak_bytes"]) / r["measured_peak_bytes"]
        out.append((target, error, abs(error) <= (args.bound_pct if is_busiest
                                                  else args.rank_bound_pct)))
    return out


def measure(payload):
    import distributed_run
    return distributed_run.launch(payload)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom", help="path to the headroom binary")
    parser.add_argument("--bound-pct", type=float, default=1.0,
                        help="for the busiest measured rank")
    parser.add_argument("--rank-bound-pct", type=float, default=3.0, help="for every rank")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:  # the measuring side: ranks forked from one process per case
        return fork_server.serve(measure)
    env = suite_env(default_path=False)
    server = fork_server.ForkServer(
        [sys.executable, os.path.abspath(__file__), args.headroom, "--serve"], env)
    cases = [c for c in CASES if args.only in c.name]
    print(f"{'configuration':<52} {'predicted':>12} {'rank':>4} {'measured':>12} {'error':>8}")
    rows, failures = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, dc in enumerate(cases):
            config_dir, config_path = write_config(dc.case, tmp, i)
            start = time.time()
            payload = dict(vars(dc.case), config_dir=config_dir, sharding=dc.sharding,
                           gpus=dc.gpus, lora_targets=list(dc.case.lora_targets), mp=dc.mp)
            if dc.sharding in ("zero2", "zero3"):
                payload["deepspeed_config"] = exported_deepspeed_config(
                    dc, args.headroom, config_path, env)
            plan = predict(dc.case, args.headroom, config_path, dc.plan_flags(), None, env)
            predicted = plan["peak"]["per_rank"]["allocated_bytes"]
            # ZeRO-1 and ZeRO-2 ranks own different partitions: each is compared with the
            # plan for that rank (--rank), the busiest with the plan's own.
            own = [predicted] * dc.gpus
            if dc.sharding in ("zero1", "zero2"):
                own = [predict(dc.case, args.headroom, config_path,
                               dc.plan_flags() + ["--rank", str(r)], None,
                               env)["peak"]["per_rank"]["allocated_bytes"]
                       for r in range(dc.gpus)]
            ranks = server.run(payload)[0]["ranks"]
            checked = check_ranks(ranks, predicted, own, args)
            for r, (target, error, ok) in zip(ranks, checked):
                failures += not ok
                rows.append((dc.name, target, r["rank"], r["measured_peak_bytes"], error,
                             r["phase"], plan["peak"]["phase"]))
                print(f"{dc.name:<52} {target:>12,} {r['rank']:>4} "
                      f"{r['measured_peak_bytes']:>12,} {error:>+7.2f}%  {r['phase']} / "
                      f"{plan['peak']['phase']}{'' if ok else '  OUT OF BOUND'}", flush=True)
            print(f"    ({time.time() - start:.1f} s)", flush=True)
    server.close()
    print(f"{len(rows) - failures} of {len(rows)} ranks in {len(cases)} configurations within "
          f"bounds ({args.bound_pct}% the busiest, {args.rank_bound_pct}% every rank; max "
          f"|error| {max((abs(r[4]) for r in rows), default=0):.3f}%)")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| configuration | rank | predicted bytes (busiest rank) | measured bytes "
                    "| error | peak: measured / predicted |\n|---|---:|---:|---:|---:|---|\n")
            for name, p, rank, m, e, mp, pp in rows:
                f.write(f"| {name} | {rank} | {p:,} | {m:,} | {e:+.3f}% | {mp} / {pp} |\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
