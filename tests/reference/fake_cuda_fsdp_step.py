"""FSDP2 on fake CUDA: rank 0 of an N-rank fully_shard run of a real transformers model,
the whole step (forward, backward, optimizer; 2 steps) on fake CUDA tensors with a fake
process group (torch.testing._internal.distributed.fake_pg), against the per-rank plan of
`headroom plan --gpu h100-80gb --gpus N --sharding fsdp|fsdp-no-reshard`.

    python3 fake_cuda_fsdp_step.py HEADROOM [--only SUBSTR] [--bound-pct 0.5]

It joins fake_cuda_step.py (the driverless device, CUDA's semantics, the counter and its
kernel-scratch columns) with fake_fsdp_step.py's FSDP2 counting (DTensor ops passed on to
the subclass so that the ops on the local shards are counted; UntypedStorage.resize_, with
which FSDP2 frees and restores unsharded parameters, counted), plus:
* torch.cuda's streams and events answered by the device's one stream
  (fake_cuda_device.answer_streams);
* the global-shape tensors DTensor's sharding propagation makes to compute an output's
  metadata (_sharding_prop.py _propagate_tensor_meta_non_cached, through
  _op_schema.py gen_fake_args) left out: on real tensors they are fake and hold no memory,
  on a fake run they share the model's FakeTensorMode. Counted, they read as gigabytes of
  foreach AdamW temporaries that a real run never holds (docs/cuda-semantics.md).
The model's build, unsharded, is not measured. NCCL's buffers are outside the caching
allocator, so no collective scratch is added.
"""

import argparse
import contextlib
import dataclasses
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The driverless CUDA device and CUDA's semantics, shared with headroom import.
sys.path.insert(1, os.path.join(HERE, "..", "..", "models", "import"))
import fork_server  # noqa: E402
import fake_cuda_step  # noqa: E402
from fake_cuda_step_cases import LLAMA_ALL, StepCase  # noqa: E402


@dataclasses.dataclass
class FsdpCase:
    case: StepCase
    sharding: str  # fsdp | fsdp-no-reshard
    gpus: int
    # FSDP2's MixedPrecisionPolicy: (param_dtype, reduce_dtype or None), e.g. ("bf16", None).
    mp: tuple = None

    @property
    def name(self):
        policy = f" mp {self.mp[0]}/{self.mp[1] or 'None'}" if self.mp else ""
        return f"{self.case.name} {self.sharding}{policy} x{self.gpus}"

    def plan_flags(self):
        flags = [*self.case.plan_flags(), "--gpus", str(self.gpus), "--sharding", self.sharding]
        if self.mp:
            flags += ["--fsdp-param-dtype", self.mp[0]]
            flags += ["--fsdp-reduce-dtype", self.mp[1]] if self.mp[1] else []
        return flags


def fsdp(name, config, sharding, gpus, mp=None, **fields):
    return FsdpCase(StepCase(name, config, slow=True, **fields), sharding, gpus, mp)


CASES = [
    # Qwen2.5-0.5B (tied embeddings), 4 ranks: the two AdamW implementations alike.
    fsdp("qwen2.5-0.5b fp32 adamw s512", "qwen2.5-0.5b.json", "fsdp", 4, seq_len=512,
         optimizer_impl="for-loop"),
    fsdp("qwen2.5-0.5b fp32 adamw-foreach s512", "qwen2.5-0.5b.json", "fsdp", 4, seq_len=512),
    # Llama-3-8B, 8 ranks.
    fsdp("llama-3-8b bf16 adamw-foreach s2048", "llama-3-8b.json", "fsdp", 8,
         precision="bf16", seq_len=2048),
    fsdp("llama-3-8b fp32 adamw-fused ckpt-all mb2 s1024", "llama-3-8b.json",
         "fsdp-no-reshard", 8, checkpoint="all", micro_batch=2, seq_len=1024,
         optimizer_impl="fused"),
    # Llama-3-70B, 16 ranks.
    fsdp("llama-3-70b bf16 adamw-foreach ckpt-all s2048", "llama-3-70b.json", "fsdp", 16,
         precision="bf16", checkpoint="all", seq_len=2048),
    # FSDP2's MixedPrecisionPolicy over fp32 shards: accelerate's for bf16 (bf16/bf16),
    # torchtitan's (bf16 gathers, fp32 reductions), torch's default reduce_dtype (None:
    # the shards' own); full fine-tunes and LoRA, Llama-3-8B and Llama-3-70B.
    fsdp("llama-3-8b fp32 adamw-fused s2048", "llama-3-8b.json", "fsdp", 8, mp=("bf16", "bf16"),
         seq_len=2048, optimizer_impl="fused"),
    fsdp("llama-3-8b fp32 lora adamw-foreach ckpt-all mb2 s2048", "llama-3-8b.json", "fsdp", 8,
         mp=("bf16", None), mode="lora", checkpoint="all", micro_batch=2, seq_len=2048),
    fsdp("llama-3-70b fp32 adamw-foreach ckpt-all s4096", "llama-3-70b.json", "fsdp", 32,
         mp=("bf16", "fp32"), checkpoint="all", seq_len=4096),
    fsdp("llama-3-70b fp32 lora adamw-foreach ckpt-all s2048", "llama-3-70b.json",
         "fsdp-no-reshard", 16, mp=("bf16", "bf16"), mode="lora", checkpoint="all",
         seq_len=2048),
    # QLoRA over FSDP2: bitsandbytes' 4-bit storage and allocations on fake tensors
    # (fake_nf4.py), the real PEFT and FSDP2 around them.
    fsdp("llama-3-8b bf16 qlora all adamw-foreach ckpt-all mb2 s2048", "llama-3-8b.json",
         "fsdp", 2, precision="bf16", mode="qlora", lora_targets=LLAMA_ALL, checkpoint="all",
         micro_batch=2, seq_len=2048),
    fsdp("llama-3-70b bf16 qlora adamw-foreach ckpt-all s2048", "llama-3-70b.json", "fsdp", 4,
         precision="bf16", mode="qlora", checkpoint="all", seq_len=2048),
]


def shard_counter(meter_class):
    """The counter with DTensor ops passed on and DTensor's propagation tensors left out."""

    class ShardCounter(meter_class):
        in_propagation = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            from torch.distributed.tensor import DTensor
            if any(issubclass(t, DTensor) for t in types):
                return NotImplemented
            return super().__torch_dispatch__(func, types, args, kwargs)

        def track(self, t):
            if not self.in_propagation:
                super().track(t)

    return ShardCounter


@contextlib.contextmanager
def propagation_left_out(counter):
    from torch.distributed.tensor import _sharding_prop
    propagator = _sharding_prop.ShardingPropagator
    original = propagator._propagate_tensor_meta_non_cached

    def propagate(self, *args, **kwargs):
        counter.in_propagation += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            counter.in_propagation -= 1

    propagator._propagate_tensor_meta_non_cached = propagate
    try:
        yield
    finally:
        propagator._propagate_tensor_meta_non_cached = original


def measure(payload):
    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import distributed_run
    import fake_cuda_device
    import fake_cuda_semantics
    from fake_fsdp_step import _counting_storage_resize

    import transformers.generation.continuous_batching  # noqa: F401 - reads torch.cuda.Stream

    fake_cuda_device.install()
    fake_cuda_device.answer_streams()
    torch.set_num_threads(1)
    counter = shard_counter(fake_cuda_step.counter_class())()
    fake_cuda_semantics.patch_find_packed_sequence_indices(counter.op_of)
    fake_cuda_semantics.patch_device_capability()
    kernels = {}
    fake_cuda_semantics.install_sdpa(kernels)
    world = payload["gpus"]
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    with unset_fake_temporarily():  # the mesh reads its rank tensor with .tolist()
        mesh = init_device_mesh("cuda", (world,))
    reshard = {} if payload["sharding"] == "fsdp" else {"reshard_after_forward": False}
    if payload.get("mp"):
        reshard["mp_policy"] = distributed_run.mp_policy(*payload["mp"])
    start = time.time()
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    with _counting_storage_resize(counter), propagation_left_out(counter), fake, counter:
        model, hf_config = fake_cuda_step.build_model(payload, contextlib.nullcontext())
        for block in distributed_run.decoder_blocks(model):
            fully_shard(block, mesh=mesh, **reshard)
        fully_shard(model, mesh=mesh, **reshard)
        counter.reset_peak()  # the unsharded build is not measured
        with torch.device("cuda"):
            fake_cuda_step.train(payload, model, hf_config, counter, contextlib.nullcontext())
    dist.destroy_process_group()
    return {"peak_bytes": counter.peak_bytes, "phase": counter.peak_phase,
            "op": counter.peak_op, "scratch": counter.peak_scratch,
            "matmul_ran": counter.matmul_ran, "kernels": kernels,
            "seconds": time.time() - start}


def serve():
    import fake_cuda_device
    fake_cuda_device.install()
    fork_server.serve(measure, (*fork_server.TRANSFORMERS, "torch._subclasses.fake_tensor",
                                "torch.distributed.fsdp", "fake_cpu_step"))


def main():
    if sys.argv[1:] == ["--serve"]:
        return serve()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom", help="path to the headroom binary")
    parser.add_argument("--only", default="", help="cases whose name contains this")
    parser.add_argument("--bound-pct", type=float, default=0.5)
    args = parser.parse_args()
    from cases import write_config
    from fake_cpu_step import predict
    cases = [c for c in CASES if args.only in c.name]
    print(f"{'configuration (rank 0)':<60} {'predicted':>16} {'fake':>16} {'+attn':>9}"
          f" {'+cuBLAS':>10} {'error':>8}", flush=True)
    server = fake_cuda_step.case_server(__file__)
    failures, worst, begin = 0, 0.0, time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for i, fc in enumerate(cases):
            config_dir, config_path = write_config(fc.case, tmp, i)
            try:
                m, _ = server.run(dict(fc.case.payload(config_dir), gpus=fc.gpus,
                                       sharding=fc.sharding, mp=fc.mp))
            except RuntimeError as e:
                print(f"{fc.name:<60} ERROR\n{e}", flush=True)
                failures += 1
                continue
            plan = predict(args.headroom, config_path, fc.plan_flags())
            row = fake_cuda_step.compare(m, {"peak": plan["peak"]["per_rank"]})
            ok = abs(row["error"]) <= args.bound_pct
            failures += not ok
            worst = max(worst, abs(row["error"]))
            print(f"{fc.name:<60} {row['predicted']:>16,} {row['fake']:>16,}"
                  f" {row['attention_scratch']:>9,} {row['cublas']:>10,} {row['error']:>+7.3f}%"
                  f"  ({m['seconds']:.0f} s){'' if ok else '  OUT OF BOUND'}", flush=True)
            print(f"{'':<4}peak: measured {m['phase']} ({m['op']}), predicted"
                  f" {plan['peak']['phase']}", flush=True)
    server.close()
    print(f"{len(cases) - failures} of {len(cases)} cases within {args.bound_pct}%"
          f" (max |error| {worst:.3f}%), {time.time() - begin:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
