"""One distributed reference run: N CPU processes on gloo train a transformers model under
DDP, ZeRO-1 (DDP + ZeroRedundancyOptimizer) or FSDP2 (fully_shard), written the way a
PyTorch user writes it, and each rank measures its own peak with PeakMeter.

    python3 distributed_run.py '{"config": ..., "sharding": "ddp", "gpus": 2, ...}'

prints one JSON line: {"ranks": [{"measured_peak_bytes", "phase", ...}, ...]}. The keys
are those of cases.Case plus `sharding` (ddp | ddp-bucket-view | zero1 | fsdp |
fsdp-no-reshard) and `gpus` (the world size).
"""

import json
import os
import socket
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def mp_policy(param, reduce):
    """FSDP2's MixedPrecisionPolicy(param_dtype, reduce_dtype) from dtype names."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    return MixedPrecisionPolicy(param_dtype=dtypes[param], reduce_dtype=dtypes.get(reduce))


def wrap(model, case, world):
    """The model as each scheme trains it: DDP's reducer, or FSDP2 units of one decoder
    block each plus the root (the embeddings, final norm and head), the layout
    torchtitan and accelerate's transformer-layer policy use."""
    scheme = case["sharding"]
    if scheme in ("ddp", "ddp-bucket-view", "zero1"):
        from torch.nn.parallel import DistributedDataParallel as DDP
        # init_sync=False: every rank builds the same weights from the same seed, and the
        # broadcast that would check it frees its flat buffer on gloo's worker thread,
        # where the profiler does not see the free (the meter would count it for good).
        return DDP(model, gradient_as_bucket_view=scheme == "ddp-bucket-view", init_sync=False)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    settle_collectives()
    mesh = init_device_mesh("cpu", (world,))
    # fsdp: the defaults (blocks resharded after forward; the root, left at None, kept
    # unsharded to the end of backward); fsdp-no-reshard: nothing resharded until backward.
    reshard = {} if scheme == "fsdp" else {"reshard_after_forward": False}
    if case.get("mp"):  # the same MixedPrecisionPolicy on every unit
        reshard["mp_policy"] = mp_policy(*case["mp"])
    for block in decoder_blocks(model):
        fully_shard(block, mesh=mesh, **reshard)
    fully_shard(model, mesh=mesh, **reshard)
    return model


def settle_collectives():
    """Each collective waited for at once, and then until the process's other threads
    (gloo's workers) are no longer running: a worker that completes a collective drops its
    reference to the work, and the buffers the work holds, only after the caller's wait()
    returns. If the caller lets go first, the worker frees the buffer, where the profiler
    records no free, and the meter would count it for the rest of the run (PeakMeter's
    collective_frees covers the buffers made inside a collective; this covers the ones
    handed to it). A fixed pause was not enough on 2 cores shared by 4 ranks."""
    import time

    import torch.distributed as dist

    def settled(collective):
        def run(*args, **kwargs):
            work = collective(*args, **kwargs)
            if work is not None:
                work.wait()
            wait_for_other_threads()
            return work
        return run

    for name in ("all_gather_single", "reduce_scatter_single",  # FSDP2
                 "all_reduce", "reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
                 "broadcast"):
        if hasattr(dist, name):
            setattr(dist, name, settled(getattr(dist, name)))


def wait_for_other_threads(timeout_s=0.05):
    """Until no thread of this process but the calling one is running or runnable (state R
    in /proc), at most `timeout_s`."""
    import threading
    import time
    me = str(threading.get_native_id())
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.0005)
        busy = False
        for tid in os.listdir("/proc/self/task"):
            if tid == me:
                continue
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    busy = f.read().rsplit(")", 1)[1].split()[0] == "R"
            except OSError:
                continue
            if busy:
                break
        if not busy:
            return


def decoder_blocks(model):
    for module in model.modules():
        if type(module).__name__.endswith(("DecoderLayer", "Block")) and not isinstance(
                module, torch.nn.ModuleList):
            yield module


def deepspeed_engine(model, case):
    """DeepSpeed ZeRO-2/3 around the model and the optimizer the case plans (torch's
    AdamW or SGD, which ZeRO wraps as it wraps HF Trainer's when the config names no
    optimizer), with the config headroom exports, its "auto" values filled in the way
    HF Trainer fills them."""
    import deepspeed
    import hf_training_run
    settle_collectives()  # DeepSpeed's bucket reductions hand gloo temporaries too
    skip_deepspeed_shm_op()
    config = json.loads(json.dumps(case["deepspeed_config"]))
    config.pop("optimizer", None)
    config["zero_allow_untested_optimizer"] = True
    config["steps_per_print"] = 1 << 30
    params = [p for p in model.parameters() if p.requires_grad]
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=hf_training_run.build_optimizer(case, params), config=config,
        dist_init_required=False)
    return engine


def skip_deepspeed_shm_op():
    """DeepSpeed's CPU backend JIT-compiles a shared-memory op (deepspeed/comm/torch.py,
    build_shm_op) that only inference_all_reduce uses, never ZeRO's training collectives:
    80 s of compiling on a fresh 2-core machine, for nothing these runs measure."""
    import deepspeed.comm.torch  # noqa: F401 - loads the module; the package's `torch`
    # attribute is torch itself, so the module is taken from sys.modules
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None


def build_optimizer(case, model):
    import hf_training_run
    params = [p for p in model.parameters() if p.requires_grad]
    if case["sharding"] != "zero1":
        return hf_training_run.build_optimizer(case, params)
    from torch.distributed.optim import ZeroRedundancyOptimizer
    impl = case["optimizer_impl"]
    if case["optimizer"] == "sgd":
        return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.SGD, lr=1e-3)
    return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, lr=1e-4,
                                   foreach=impl == "foreach", fused=impl == "fused")


def train_steps(meter, case, hf_config, gen, model, backward, optimizer):
    """The loop a PyTorch user writes, each part in its meter phase: per micro-step a
    forward (under autocast for amp-bf16) and `backward(loss)`, then the optimizer's
    step and zero_grad(set_to_none=True)."""
    b, s, accum = case["micro_batch"], case["seq_len"], case["grad_accum"]
    autocast = case["precision"] == "amp-bf16"
    for _ in range(case["steps"]):
        for _ in range(accum):
            with meter.phase("forward"):
                ids = torch.randint(0, hf_config.vocab_size, (b, s), generator=gen)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                    loss = model(input_ids=ids, labels=ids).loss / accum
            with meter.phase("backward"):
                backward(loss)
            del loss, ids
        with meter.phase("optimizer step"):
            optimizer.step()
        with meter.phase("zero_grad"):
            optimizer.zero_grad(set_to_none=True)


def deepspeed_steps(meter, case, hf_config, gen, engine):
    """DeepSpeed's loop: the engine scales the loss for accumulation and steps (and zeroes
    the gradients) on the last micro-step of each step."""
    b, s, accum = case["micro_batch"], case["seq_len"], case["grad_accum"]
    for _ in range(case["steps"]):
        for micro in range(accum):
            with meter.phase("forward"):
                ids = torch.randint(0, hf_config.vocab_size, (b, s), generator=gen)
                loss = engine(input_ids=ids, labels=ids).loss
            with meter.phase("backward"):
                engine.backward(loss)
            del loss, ids
            with meter.phase("optimizer step" if micro == accum - 1 else "backward"):
                engine.step()


def rank_main(case):
    import torch.distributed as dist
    import transformers

    import hf_training_run
    from peak_meter import PeakMeter

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    hf_config = transformers.AutoConfig.from_pretrained(case["config_dir"])
    gen = torch.Generator().manual_seed(1 + rank)
    deepspeed = case["sharding"] in ("zero2", "zero3")
    meter = PeakMeter(keep_trace=bool(case.get("trace")), unmeasured_phase="build",
                      collective_frees=True)
    dist.barrier()
    # The wrappers' buffers (DDP's buckets) live in C++ where the live scan cannot see
    # them, and fully_shard frees the whole weights it replaces: build and wrap inside
    # the profiled region so that the profiler sees both, outside the measured peak.
    with meter:
        with meter.phase("build"):
            if deepspeed:
                model = deepspeed_engine(hf_training_run.build_model(case, hf_config), case)
            else:
                model = wrap(hf_training_run.build_model(case, hf_config), case, world)
                optimizer = build_optimizer(case, model)
        if deepspeed:
            deepspeed_steps(meter, case, hf_config, gen, model)
        else:
            train_steps(meter, case, hf_config, gen, model, lambda loss: loss.backward(),
                        optimizer)
    result = {"rank": rank, "measured_peak_bytes": meter.peak_bytes, "phase": meter.peak_phase,
              "live_before_bytes": meter.live_before_bytes}
    if case.get("trace"):
        result["trace"] = [(e["args"]["Bytes"], e["args"]["Total Allocated"])
                           for e in meter.last_trace if e.get("name") == "[memory]"]
    dist.destroy_process_group()
    return result


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(case):
    """Forks `gpus` rank processes from this one (torch and transformers imported once,
    nothing live: each rank starts as a fresh process would) on one free port, and
    gathers their results."""
    world = int(case["gpus"])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                      WORLD_SIZE=str(world))
    children = []
    for r in range(world):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            code = 0
            try:
                os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(r)
                result = rank_main(case)
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                result, code = {"rank": r, "error": f"{type(e).__name__}: {e}"}, 1
            os.write(write_fd, json.dumps(result).encode())
            os._exit(code)
        os.close(write_fd)
        children.append((pid, read_fd))
    ranks = []
    for pid, read_fd in children:
        with os.fdopen(read_fd, "rb") as f:
            data = f.read()
        _, status = os.waitpid(pid, 0)
        result = json.loads(data) if data else {"error": f"rank process ended ({status})"}
        if "error" in result:
            raise RuntimeError(f"rank {result.get('rank', '?')}: {result['error']}")
        ranks.append(result)
    return {"ranks": sorted(ranks, key=lambda r: r["rank"])}


def main():
    if sys.argv[1] == "--under-launcher":  # one rank, started by torchrun / accelerate
        result = rank_main(json.loads(sys.argv[2]))
        # One write: the ranks share the launcher's pipe, and print() writes the line and
        # its newline apart, which another rank's line can land between.
        sys.stdout.write("RANK_RESULT " + json.dumps(result) + "\n")
        sys.stdout.flush()
        return
    print(json.dumps(launch(json.loads(sys.argv[1]))))


if __name__ == "__main__":
    main()
