"""FSDP2 at real size on fake tensors: one rank of an N-rank fully_shard run, with no memory.

distributed_run.py trains FSDP2 on N real gloo processes, which caps it at tiny models.
This harness runs rank 0 of the same run alone: a fake process group of world size N
(torch.testing._internal.distributed.fake_pg: every collective returns at once and moves
no data), the model built, wrapped (distributed_run.wrap: fully_shard per decoder block,
then the root) and trained (the loop of distributed_run.rank_main: K micro-batches, 2
optimizer steps) inside FakeTensorMode on the CPU, every storage an ATen op makes counted
by fake_cpu_step.StorageCounter. The build is not measured. The peak is compared with
`headroom plan --device cpu --cpu-bf16 aten --gpus N --sharding fsdp|fsdp-no-reshard`
(peak.per_rank.allocated_bytes: the busiest rank, rank 0 under FSDP2: it owns a full
dim-0 chunk of every parameter, so the largest unpadded Adam states).

    python3 fake_fsdp_step.py HEADROOM [--only SUBSTR] [--bound-pct 1] [--markdown FILE]
                              [--check-real] [--live-at-peak] [--rank R]

--check-real first runs run_distributed_suite's small FSDP cases for real (N gloo
processes, PeakMeter) and on fake tensors, and prints fake, real and predicted side by side.
--live-at-peak reruns each case and lists the storages live at the peak (phase, op,
dtype, shape), summed by origin. Each case runs in a child forked from one `--serve`
process that has imported torch, transformers and torch._dynamo once (see fake_cpu_step's
preload: the child counts what a fresh `--case NAME` process counts).

What the fake run represents, and what it adds to make the CPU prediction comparable:
* FSDP2's own storages, all of them: the padded shards, the all-gather outputs (flat
  buffer, copy-in under mixed precision), the unsharded parameters and their
  storage.resize_ (counted here: UntypedStorage.resize_ is no ATen op, see
  _counting_storage_resize), the reduce-scatter inputs and outputs, and everything DTensor
  runs on the local shards (the optimizer): DTensor ops are passed on to the DTensor
  subclass so that the counter sees the ops on the local tensors (_ShardCounter).
* Not gloo's own scratch: a real gloo all-gather makes a transient copy of its output,
  a reduce-scatter clones its whole input (+12 B of scalars), both freed before the
  collective returns (seen in the allocator traces of distributed_run.py's runs), which
  `plan --device cpu` models. The fake group makes neither. The harness records, at each collective, live
  bytes + that scratch, outside the counter: "fake" is the fake group's peak (a backend
  with no scratch), "fake+gloo" = max(fake, those) is the run on gloo, which is compared.
* Not a kernel's own scratch inside one ATen op (see fake_cpu_step.py): bf16 is planned
  with --cpu-bf16 aten, the kernel that allocates no matmul scratch.
"""

import argparse
import collections
import contextlib
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily  # noqa: E402

import fork_server  # noqa: E402
from fake_cpu_cases import LLAMA_ALL, LLAMA_QKVO, FakeCase  # noqa: E402
from cases import write_config  # noqa: E402
import fake_cpu_step  # noqa: E402
from fake_cpu_step import StorageCounter, FakeMeter, fake_tensor_artefacts_patched  # noqa: E402
from run_distributed_suite import CASES as REAL_DISTRIBUTED_CASES  # noqa: E402
from run_distributed_suite import DistributedCase  # noqa: E402
from run_reference_suite import predict, suite_env  # noqa: E402


def fsdp(case, sharding, gpus):
    return DistributedCase(case, sharding, gpus)


CASES = [
    # Llama-3-8B (8.03B, untied), 8 ranks.
    fsdp(FakeCase("llama-3-8b bf16 adamw s2048", "llama-3-8b.json", precision="bf16",
                  seq_len=2048), "fsdp", 8),
    fsdp(FakeCase("llama-3-8b fp32 adamw ckpt-all mb2 s1024", "llama-3-8b.json",
                  checkpoint="all", micro_batch=2, seq_len=1024), "fsdp-no-reshard", 8),
    # Llama-3-70B (70.6B, untied, 80 layers), 8 and 16 ranks.
    # Peak in layers.1.input_layernorm's backward: at pow's backward an RMSNorm holds 5
    # fp32 temporaries of x's size while its incoming grad and saved normalized output are
    # freed; this case found plan 64 MiB low (-0.08%) for a bf16 x before the rule counted
    # the two freed tensors at their own size (CostRule<kRmsNorm>::Backward).
    fsdp(FakeCase("llama-3-70b bf16 adamw ckpt-all s2048", "llama-3-70b.json",
                  precision="bf16", checkpoint="all", seq_len=2048), "fsdp", 8),
    fsdp(FakeCase("llama-3-70b bf16 adamw ckpt-all mb2 s1024", "llama-3-70b.json",
                  precision="bf16", checkpoint="all", micro_batch=2, seq_len=1024),
         "fsdp-no-reshard", 16),
    fsdp(FakeCase("llama-3-70b fp32 adamw ckpt-all s1024", "llama-3-70b.json",
                  checkpoint="all", seq_len=1024), "fsdp", 16),
    fsdp(FakeCase("llama-3-70b fp32 lora ckpt-all mb2 s1024", "llama-3-70b.json",
                  mode="lora", checkpoint="all", micro_batch=2, seq_len=1024),
         "fsdp-no-reshard", 8),
]

# Three more (about 4 minutes on 2 cores), with --all: CI's time goes to the 8B and 70B
# cases above.
MORE_CASES = [
    # Qwen2.5-7B (qkv bias, untied; 152064-row vocabulary, 3584 wide: 28 heads), 8 ranks.
    fsdp(FakeCase("qwen2.5-7b bf16 adamw mb2 s1024 k2", "qwen2.5-7b.json", precision="bf16",
                  micro_batch=2, seq_len=1024, grad_accum=2), "fsdp", 8),
    fsdp(FakeCase("llama-3-8b bf16 lora r16 all-linear ckpt-all mb2 s2048 k2",
                  "llama-3-8b.json", precision="bf16", mode="lora", lora_rank=16,
                  lora_targets=LLAMA_ALL, checkpoint="all", micro_batch=2, seq_len=2048,
                  grad_accum=2), "fsdp", 8),
    fsdp(FakeCase("llama-3-70b bf16 lora qkvo s512", "llama-3-70b.json", precision="bf16",
                  mode="lora", lora_targets=LLAMA_QKVO, seq_len=512), "fsdp", 16),
]

# The small FSDP configurations run_distributed_suite.py measures for real on gloo.
SMALL_CASES = [dc for dc in REAL_DISTRIBUTED_CASES if dc.sharding.startswith("fsdp")]


def fake_flags(dc):
    """plan flags after case.plan_flags(--device cpu): the sharding, and bf16 matmuls as
    the kernel with no scratch (fake tensors see none)."""
    return ["--cpu-bf16", "aten", *dc.plan_flags()]


class _ShardCounter(StorageCounter):
    """StorageCounter for DTensor programs. A dispatch mode sees a DTensor op before the
    DTensor subclass does, and while the mode runs it is off the stack: the ops DTensor
    then runs on the local shards (the optimizer's exp_avg, sqrt, ...) would go uncounted,
    and the DTensor's own storage (a wrapper: the GLOBAL shape's bytes) counted instead.
    Passing DTensor ops on (NotImplemented, as FakeTensorMode does for subclasses) lets
    DTensor run them, with this mode still on the stack to count its local ops."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.distributed.tensor import DTensor
        if any(issubclass(t, DTensor) for t in types):
            return NotImplemented
        return super().__torch_dispatch__(func, types, args, kwargs)


@contextlib.contextmanager
def _counting_storage_resize(counter):
    """FSDP2 frees an unsharded parameter with storage.resize_(0) and brings it back with
    storage.resize_(n) (_fsdp_param.py free_storage / alloc_storage): a storage method,
    no ATen op, so no dispatch mode sees it. Count it as the allocator does."""
    original = torch.UntypedStorage.resize_

    def resize_(self, size):
        out = original(self, size)
        entry = counter.live.get(id(self))
        if entry is not None and entry[0]() is self and entry[1] != self.nbytes():
            counter.live_bytes += self.nbytes() - entry[1]
            counter.live[id(self)] = (entry[0], self.nbytes())
            counter.op = "storage.resize_"
            counter._update_peak()
        return out

    torch.UntypedStorage.resize_ = resize_
    try:
        yield
    finally:
        torch.UntypedStorage.resize_ = original


class GlooScratch:
    """Live bytes at each collective plus what gloo would hold inside it (all-gather: a
    copy of the output; reduce-scatter: a clone of the input + 12 B of scalars), kept out
    of the counter: the fake group itself makes neither."""

    def __init__(self, counter):
        self.counter = counter
        self.measuring = False
        self.peak_bytes = 0
        self.peak_phase = ""
        self.collectives = collections.Counter()

    def install(self):
        import torch.distributed as dist
        all_gather, reduce_scatter = dist.all_gather_single, dist.reduce_scatter_single

        def all_gather_single(output_tensor, input_tensor, *args, **kwargs):
            self.at("all-gather", output_tensor.numel() * output_tensor.element_size())
            return all_gather(output_tensor, input_tensor, *args, **kwargs)

        def reduce_scatter_single(output, input, *args, **kwargs):
            self.at("reduce-scatter", input.numel() * input.element_size() + 12)
            return reduce_scatter(output, input, *args, **kwargs)

        dist.all_gather_single = all_gather_single
        dist.reduce_scatter_single = reduce_scatter_single

    def at(self, what, scratch):
        self.collectives[what] += 1
        if self.measuring and self.counter.live_bytes + scratch > self.peak_bytes:
            self.peak_bytes = self.counter.live_bytes + scratch
            self.peak_phase = f"{self.counter.phase}, gloo {what} scratch {scratch:,} B"


def fake_fsdp_run(payload, rank=0, snapshot_at=None):
    """Rank `rank` of distributed_run.rank_main on fake tensors and a fake group."""
    import torch.distributed as dist
    import torch.distributed.device_mesh as device_mesh
    import transformers
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import distributed_run
    import hf_training_run

    world = int(payload["gpus"])
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    hf_config = transformers.AutoConfig.from_pretrained(payload["config_dir"])
    b, s, accum = payload["micro_batch"], payload["seq_len"], payload["grad_accum"]
    autocast = payload["precision"] == "amp-bf16"

    counter = _ShardCounter()
    # Origins are recorded from the start (the build makes the shards), the snapshot
    # armed only once the build is over (the whole model, built unsharded, is larger).
    counter.snapshot_at = None if snapshot_at is None else float("inf")
    meter = FakeMeter(counter)
    gloo = GlooScratch(counter)
    gloo.install()
    original_mesh = device_mesh.init_device_mesh

    def init_device_mesh(*args, **kwargs):
        # The mesh turns its rank tensor into a list (.tolist()): a real tensor, as in
        # the real run (arange(N) int32, counted: the counter sees ops on real tensors).
        with unset_fake_temporarily():
            return original_mesh(*args, **kwargs)

    device_mesh.init_device_mesh = init_device_mesh
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    start = time.time()
    with fake_tensor_artefacts_patched(counter), _counting_storage_resize(counter), \
            fake_mode, counter:
        with meter.phase("build"):
            model = distributed_run.wrap(hf_training_run.build_model(payload, hf_config),
                                         payload, world)
            optimizer = distributed_run.build_optimizer(payload, model)
        build_seconds = time.time() - start
        gen = torch.Generator().manual_seed(1 + rank)
        with meter:
            gloo.measuring = True
            if snapshot_at is not None:
                counter.snapshot_at = snapshot_at
            for step in range(payload["steps"]):
                for micro in range(accum):
                    where = f"step {step + 1}, %s, micro-batch {micro + 1}/{accum}"
                    with meter.phase(where % "forward"):
                        ids = torch.randint(0, hf_config.vocab_size, (b, s), generator=gen)
                        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                            loss = model(input_ids=ids, labels=ids).loss / accum
                    with meter.phase(where % "backward"):
                        loss.backward()
                    del loss, ids
                with meter.phase(f"step {step + 1}, optimizer step"):
                    optimizer.step()
                with meter.phase(f"step {step + 1}, zero_grad"):
                    optimizer.zero_grad(set_to_none=True)
            gloo.measuring = False
    dist.destroy_process_group()
    result = {"fake_peak_bytes": meter.peak_bytes, "phase": meter.peak_phase,
              "op": meter.peak_op, "live_before_bytes": meter.live_before_bytes,
              "gloo_peak_bytes": max(meter.peak_bytes, gloo.peak_bytes),
              "gloo_phase": (gloo.peak_phase if gloo.peak_bytes > meter.peak_bytes
                             else "(as fake)"),
              "collectives": dict(gloo.collectives),
              "build_seconds": build_seconds, "seconds": time.time() - start}
    if counter.snapshot is not None:
        live = collections.Counter()
        for nbytes, origin in counter.snapshot:
            live[tuple(origin) if origin else ("?",)] += nbytes
        result["live_at_peak"] = sorted(([n, list(o)] for o, n in live.items()), reverse=True)
    return result


def all_cases():
    return CASES + MORE_CASES + SMALL_CASES


def payload_of(dc, config_dir):
    return dict(vars(dc.case), config_dir=config_dir, sharding=dc.sharding, gpus=dc.gpus,
                lora_targets=list(dc.case.lora_targets), threads=1, device="cpu")


def case_result(name, rank, snapshot_at):
    """One fake case, in the process that measures it (fresh or forked)."""
    dc = next(c for c in all_cases() if c.name == name)
    with tempfile.TemporaryDirectory() as tmp:
        config_dir, _ = write_config(dc.case, tmp, 0)
        return fake_fsdp_run(payload_of(dc, config_dir), rank, snapshot_at)


def run_one_case(name, rank, snapshot_at):
    """Child process: one fake case (a fresh process so nothing carries over)."""
    print(json.dumps(case_result(name, rank, snapshot_at)))


# What fake_fsdp_run imports before its counter starts, besides fake_cpu_step's list.
IMPORTED_BEFORE_COUNTING = ("torch.distributed", "torch.distributed.device_mesh",
                            "transformers", "torch.testing._internal.distributed.fake_pg",
                            "distributed_run", "hf_training_run")
# Imported under the counter by a fresh process (distributed_run.wrap), checked by
# fake_cpu_step.preload to make no tensor.
IMPORTED_WHILE_COUNTING = ("torch.distributed.fsdp",)


def serve():
    """Fake cases in children forked from this process (fork_server.py), torch,
    transformers and torch._dynamo imported once. Payload: {"case", "rank", "snapshot_at"}."""
    fake_cpu_step.preload(fake_cpu_step.IMPORTED_BEFORE_COUNTING + IMPORTED_BEFORE_COUNTING,
                          fake_cpu_step.IMPORTED_WHILE_COUNTING + IMPORTED_WHILE_COUNTING)
    fork_server.serve(lambda p: case_result(p["case"], p["rank"], p["snapshot_at"]),
                      preload=())


_servers = {}  # env -> the case server (fork_server.ForkServer) started with it


def child(name, rank, env, snapshot_at=None):
    """One case, forked from a case server (serve()) started on first use."""
    key = json.dumps(env, sort_keys=True)
    if key not in _servers:
        _servers[key] = fork_server.ForkServer(
            [sys.executable, os.path.abspath(__file__), "--serve"], env)
    result, _ = _servers[key].run({"case": name, "rank": rank, "snapshot_at": snapshot_at})
    return result


def close_servers():
    for server in _servers.values():
        server.close()
    _servers.clear()


def print_live(result, limit=40):
    print(f"    live at the fake peak ({result['fake_peak_bytes']:,} B), by origin "
          f"(phase, op, dtype, shape):")
    for nbytes, origin in result["live_at_peak"][:limit]:
        print(f"    {nbytes:>16,}  {' | '.join(map(str, origin))}")
    rest = result["live_at_peak"][limit:]
    if rest:
        print(f"    {sum(n for n, _ in rest):>16,}  ({len(rest)} more origins)")


def check_real(headroom, only, rank, env):
    """The small FSDP cases: fake, real (gloo, PeakMeter) and predicted."""
    server = fork_server.ForkServer(
        [sys.executable, os.path.join(HERE, "run_distributed_suite.py"), headroom, "--serve"], env)
    print(f"{'small FSDP case (rank ' + str(rank) + ')':<52} {'real gloo':>11} {'fake':>11}"
          f" {'fake+gloo':>11} {'pred(suite)':>11} {'pred(aten)':>11}  fake+gloo-real")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, dc in enumerate(c for c in SMALL_CASES if only in c.name):
            config_dir, config_path = write_config(dc.case, tmp, i)
            real, _ = server.run(payload_of(dc, config_dir))
            real_bytes = real["ranks"][rank]["measured_peak_bytes"]
            fake = child(dc.name, rank, env)
            suite = predict(dc.case, headroom, config_path, dc.plan_flags(), None, env)
            no_scratch = predict(dc.case, headroom, config_path, fake_flags(dc), None, env)
            row = (dc.name, real_bytes, fake["fake_peak_bytes"], fake["gloo_peak_bytes"],
                   suite["peak"]["per_rank"]["allocated_bytes"],
                   no_scratch["peak"]["per_rank"]["allocated_bytes"])
            rows.append(row)
            print(f"{row[0]:<52} {row[1]:>11,} {row[2]:>11,} {row[3]:>11,} {row[4]:>11,}"
                  f" {row[5]:>11,}  {row[3] - row[1]:>+8,}  {fake['phase']} ({fake['op']})",
                  flush=True)
    server.close()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom", nargs="?", help="path to the headroom binary")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--bound-pct", type=float, default=1.0)
    parser.add_argument("--all", action="store_true",
                        help="also Qwen2.5-7B and the two longer LoRA cases (MORE_CASES)")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--rank", type=int, default=0, help="the rank simulated (default 0)")
    parser.add_argument("--check-real", action="store_true",
                        help="first compare fake, real gloo and predicted on the small cases")
    parser.add_argument("--live-at-peak", action="store_true",
                        help="rerun each case and list the storages live at its peak")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # child process: one case
    parser.add_argument("--snapshot-at", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_one_case(args.case, args.rank, args.snapshot_at)
        return 0
    if args.serve:
        serve()
        return 0
    if not args.headroom:
        parser.error("HEADROOM is required")
    env = suite_env(default_path=False)
    if args.check_real:
        check_real(args.headroom, args.only, args.rank, env)
    cases = [c for c in CASES + (MORE_CASES if args.all else []) if args.only in c.name]
    failures, rows = 0, []
    begin = time.time()
    print(f"{'configuration (rank ' + str(args.rank) + ')':<66} {'predicted':>16}"
          f" {'fake+gloo':>16} {'error':>8} {'fake (no scratch)':>17}"
          f"  peak: fake+gloo / predicted", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for i, dc in enumerate(cases):
            _, config_path = write_config(dc.case, tmp, i)
            start = time.time()
            fake = child(dc.name, args.rank, env)
            plan = predict(dc.case, args.headroom, config_path, fake_flags(dc), None, env)
            predicted = plan["peak"]["per_rank"]["allocated_bytes"]
            measured = fake["gloo_peak_bytes"]
            error = 100.0 * (predicted - measured) / measured
            ok = abs(error) <= args.bound_pct
            failures += not ok
            phase = fake["phase"] + f" ({fake['op']})"
            if fake["gloo_phase"] != "(as fake)":
                phase = fake["gloo_phase"]
            rows.append((dc.name, predicted, measured, error, fake["fake_peak_bytes"], phase,
                         plan["peak"]["phase"], time.time() - start))
            print(f"{dc.name:<66} {predicted:>16,} {measured:>16,} {error:>+7.3f}%"
                  f" {fake['fake_peak_bytes']:>17,}  {phase} / {plan['peak']['phase']}"
                  f"  ({rows[-1][-1]:.0f} s, build {fake['build_seconds']:.0f} s)"
                  f"{'' if ok else '  OUT OF BOUND'}", flush=True)
            if args.live_at_peak:
                print_live(child(dc.name, args.rank, env, fake["fake_peak_bytes"]))
    print(f"{len(cases) - failures} of {len(cases)} cases within {args.bound_pct}%"
          f" (max |error| {max((abs(r[3]) for r in rows), default=0):.3f}%),"
          f" {time.time() - begin:.0f} s")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| configuration | predicted bytes | measured (fake+gloo) | error "
                    "| fake, no gloo scratch | peak: measured / predicted | seconds |\n"
                    "|---|---:|---:|---:|---:|---|---:|\n")
            for name, p, m, e, fk, mp, pp, sec in rows:
                f.write(f"| {name} | {p:,} | {m:,} | {e:+.3f}% | {fk:,} | {mp} / {pp} "
                        f"| {sec:.0f} |\n")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        code = main()
    finally:
        close_servers()
    sys.exit(code)
