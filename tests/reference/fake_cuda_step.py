"""The whole training step on fake CUDA tensors, with CUDA's semantics and no GPU: real
transformers + PEFT models run forward, backward and the optimizer, K micro-batches and 2
optimizer steps (the lazy optimizer states and the steady step both count), inside
FakeTensorMode on a fake CUDA device (fake_cuda_device.py), every storage an op returns
counted while it lives, rounded to 512 B as the caching allocator rounds it (the fake-CPU
step's StorageCounter; --meter memtracker uses PyTorch's MemTracker instead, which keeps
some tensors alive through its hooks: docs/cuda-semantics.md). The peak is compared with
`headroom plan --gpu h100-80gb --stack pytorch --json`. Prints a table; exits 1 when a
case is outside the bound.

    python3 fake_cuda_step.py HEADROOM [--fast | --only-slow] [--only SUBSTR] [--imported]
                              [--bound-pct 0.5] [--meter counter|memtracker] [--trace]

CUDA's semantics, as on an H100 with this wheel:
* the SDPA kernel the CUDA dispatcher picks (fake_cuda_semantics.install_sdpa), whose
  backward runs as its own ATen op;
* torch.autocast("cuda"): its CUDA lists and cast cache (amp-bf16, amp-fp16), also in
  checkpointing's recomputation; native_dropout's bool mask;
* torch.optim's foreach and fused AdamW on CUDA. A fake parameter's type is FakeTensor, so
  `_default_to_fused_or_foreach` would pick the for-loop: each case names its
  implementation, as a real CUDA run's default is foreach;
* GradScaler for amp-fp16: scale, unscale_ and the scale update run as on CUDA. Its step
  reads found_inf with .item(), which a fake tensor cannot answer: the step is taken (the
  case of every step that overflows nowhere).

Kernel scratch that fake tensors cannot see (a meta kernel returns only an op's outputs)
is added from the cost rules' cited sizes and printed as its own column, so that the
comparison stays exact: the cuBLAS workspaces (2 × 32 MiB on sm90, made at the first matmul) and
the backward scratch of the flash and memory-efficient kernels at each of their backward
ops (kernel_scratch below). cuDNN's backward workspace is sized by cuDNN at run time; the
planner does not model it (op_cost.cc), so neither does this column.

Each case runs in a child forked from one `--serve` process (fork_server.py) that has
imported torch and transformers and installed the fake device once. --trace lists the
storages live at the measured peak, by where they were made.
"""

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The driverless CUDA device and CUDA's semantics, shared with headroom import.
sys.path.insert(1, os.path.join(HERE, "..", "..", "models", "import"))
import fork_server  # noqa: E402

ROUND = 512                      # c10/cuda/CUDACachingAllocator.cpp kMinBlockSize
# sm90's 32 MiB (planner/core/gpu_catalog.cc kCublasWorkspaceHopper) for each of the step's
# two cuBLAS handles: the caller's thread and the autograd engine's CUDA thread
# (DeviceSpec::CublasWorkspaceBytes).
CUBLAS_WORKSPACE = 2 * 32 * 2 ** 20
MATMULS = ("mm", "addmm", "bmm", "baddbmm", "_grouped_mm", "addmv", "mv")


def cuda_bytes(nbytes):
    return 0 if nbytes <= 0 else -(-nbytes // ROUND) * ROUND


def round_up(x, m):
    return -(-x // m) * m


def kernel_scratch(name, args):
    """Bytes an attention backward kernel allocates inside its ATen op, from the planner's
    rules (op_cost.cc CostRule<kSdpa>::Backward), each buffer rounded as the caching
    allocator rounds it. q, k, v are [b, h, s, d] as the SDPA op got them."""
    if name not in ("_scaled_dot_product_flash_attention_backward",
                    "_scaled_dot_product_efficient_attention_backward"):
        return 0
    q, k = args[1], args[2]
    b, h, s, d = q.shape
    q_numel = b * h * s * d
    # Under GQA, K/V gradients at every query head before the sum over each group.
    expanded_kv = 2 * cuda_bytes(q_numel * q.element_size()) if k.shape[1] != h else 0
    if name.startswith("_scaled_dot_product_flash"):
        # flash mha_bwd: dq_accum fp32 [b, round128(s), h, d rounded to 32 (64 past 128)],
        # softmax_d fp32 [b, h, round128(s)].
        s128 = round_up(s, 128)
        d_round = round_up(d, 32 if d <= 128 else 64)
        return cuda_bytes(4 * b * s128 * h * d_round) + cuda_bytes(4 * b * h * s128) + expanded_kv
    # memory-efficient: gQ's fp32 staging (split keys) and dK/dV per query head.
    return cuda_bytes(4 * q_numel) + expanded_kv


# ---------------------------------------------------------------------------------------
# The measuring child process.
# ---------------------------------------------------------------------------------------

def note_position_ids(made_by, func, name, out):
    """Records the int64 tensors arange and add make: transformers' position ids, which
    fake_cuda_semantics.patch_find_packed_sequence_indices checks (through op_of)."""
    import torch
    if name in ("arange", "add") and isinstance(out, torch.Tensor) and out.dtype == torch.int64:
        made_by[id(out.untyped_storage())] = str(func)


def counter_class():
    """The storage counter of the fake-CPU step (fake_cpu_step.StorageCounter: every
    storage an op returns, while its storage lives) on the cuda device, each storage
    rounded to 512 B, plus the kernel scratch of each attention backward op while it runs,
    whether a matmul ran (the cuBLAS workspace), and the int64 tensors made by arange or
    add (the position-ids check of fake_cuda_semantics)."""
    import torch
    from fake_cpu_step import StorageCounter

    class CudaStorageCounter(StorageCounter):
        device_type = "cuda"
        round_to = ROUND

        def __init__(self, trace=False):
            super().__init__()
            self.scratch = self.peak_scratch = 0
            self.matmul_ran = False
            self.made_by = {}
            self.peak_live = []
            self.trace = trace
            if trace:  # StorageCounter records each storage's origin while this is set
                self.snapshot_at = float("inf")

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            self.scratch = kernel_scratch(name, args)
            self.matmul_ran |= name in MATMULS
            try:
                out = super().__torch_dispatch__(func, types, args, kwargs)
            finally:
                self.scratch = 0
            note_position_ids(self.made_by, func, name, out)
            return out

        def _update_peak(self):
            total = self.live_bytes + self.scratch
            if total > self.peak_bytes:
                self.peak_bytes, self.peak_phase, self.peak_op = total, self.phase, self.op
                self.peak_scratch = self.scratch
                if self.trace:
                    self.peak_live = [(n, *(self.origin.get(k) or ("before", "", "", ())))
                                      for k, (_, n) in self.live.items()]

        def op_of(self, tensor):
            return self.made_by.get(id(tensor.untyped_storage()))

    return CudaStorageCounter


def memtracker_class():
    """PyTorch's MemTracker (torch/distributed/_tools/mem_tracker.py), for --meter
    memtracker: the peak and its phase and op, the attention backward scratch, whether a
    matmul ran. Its ModTracker keeps hooks on module inputs that require grad; with PEFT's
    input-require-grads hook under checkpointing that keeps the previous step's embedding
    output and its gradient alive (docs/cuda-semantics.md), which a plain loop frees."""
    import torch
    from torch.distributed._tools.mem_tracker import MemTracker, _TOTAL_KEY

    cuda = torch.device("cuda", 0)

    class NoHook:
        def remove(self):
            pass

    class StepMemTracker(MemTracker):
        def __init__(self):
            super().__init__()
            self.phase = "setup"
            self.peak_bytes, self.peak_phase, self.peak_op, self.peak_scratch = 0, "", "", 0
            self.matmul_ran = False
            self.made_by = {}
            self.peak_live = []

        def skip_frozen(self, model):
            """MemTracker's forward pre-hook registers a gradient hook on every parameter
            of a module, which a frozen one refuses (LoRA's base): mark those as hooked."""
            for p in model.parameters():
                if not p.requires_grad:
                    self._param_to_grad_hook_handles[p] = (NoHook(), NoHook())

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = super().__torch_dispatch__(func, types, args, kwargs)
            name = func.overloadpacket.__name__
            self.matmul_ran |= name in MATMULS
            note_position_ids(self.made_by, func, name, out)
            scratch = kernel_scratch(name, args)
            snap = self._curr_mem_snap.get(cuda)
            total = (snap[_TOTAL_KEY] if snap else 0) + scratch
            if total > self.peak_bytes:
                self.peak_bytes, self.peak_phase, self.peak_op = total, self.phase, name
                self.peak_scratch = scratch
            return out

        def op_of(self, tensor):
            return self.made_by.get(id(tensor.untyped_storage()))

    return StepMemTracker


def build_optimizer(case, params):
    import torch
    if case["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=1e-3, foreach=case["optimizer_impl"] == "foreach")
    impl = case["optimizer_impl"]
    return torch.optim.AdamW(params, lr=1e-4, foreach=impl == "foreach", fused=impl == "fused")


def grad_scaler():
    """torch.amp.GradScaler("cuda") on the fake device (fake_cuda_device answers that CUDA
    AMP is available). Its step reads found_inf with .item(), which a fake tensor cannot
    answer: the step is taken, as when no gradient overflowed."""
    import torch
    scaler = torch.amp.GradScaler("cuda")
    scaler._maybe_opt_step = (lambda optimizer, optimizer_state, *args, **kwargs:
                              optimizer.step(*args, **kwargs))
    return scaler


def build_model(case, fake):
    import torch
    import transformers

    import fake_cuda_semantics
    from fake_cpu_step import fake_init_and_checks_patched
    from hf_training_run import prepare_for_training

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    hf_config = transformers.AutoConfig.from_pretrained(case["config_dir"])
    auto = (transformers.AutoModelForSequenceClassification if case["task"] == "seq-cls"
            else transformers.AutoModelForCausalLM)
    with fake_cuda_semantics.fake_module_apply(), fake_init_and_checks_patched(), fake, \
            torch.device("cuda"):
        torch.manual_seed(0)
        model = auto.from_config(hf_config, attn_implementation=case["attention"],
                                 dtype=dtypes[case["base_dtype"]])
        if case["mode"] == "qlora":  # bitsandbytes' storage and allocations (fake_nf4.py)
            import fake_nf4
            model = fake_nf4.quantize_linears(model)
        return prepare_for_training(model, case), hf_config


def train(case, model, hf_config, meter, measuring):
    from fake_cpu_step import fake_init_and_checks_patched
    from hf_training_run import gemma3_image_batch

    with fake_init_and_checks_patched():
        _train(case, model, hf_config, meter, measuring, gemma3_image_batch)


def _train(case, model, hf_config, meter, measuring, gemma3_image_batch):
    """K micro-batches and an optimizer step, case["steps"] times, as hf_training_run.run
    does, with CUDA's autocast and GradScaler for amp-fp16, inside `measuring` (a context);
    meter.phase names each part."""
    import torch

    amp = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(case["precision"])
    optimizer = build_optimizer(case, [p for p in model.parameters() if p.requires_grad])
    scaler = grad_scaler() if case["precision"] == "amp-fp16" else None
    if hasattr(meter, "track_external"):
        meter.track_external(model, optimizer)
        meter.skip_frozen(model)
    b, s, accum = case["micro_batch"], case["seq_len"], case["grad_accum"]
    with measuring:
        for _ in range(case["steps"]):
            for _ in range(accum):
                if hasattr(meter, "reset_mod_stats"):
                    meter.reset_mod_stats()  # MemTracker refuses a module's second call
                meter.phase = "forward"
                ids = torch.randint(0, hf_config.get_text_config().vocab_size, (b, s))
                images = (gemma3_image_batch(hf_config, ids, case["images"], None)
                          if case.get("images") else {})
                labels = (torch.randint(0, hf_config.num_labels, (b,))
                          if case["task"] == "seq-cls" else ids)
                # A training loop sets no default device: save_on_cpu's host copies
                # (offload) are made on the CPU, where torch.empty puts them without one.
                host = torch.device("cpu") if case.get("offload") else contextlib.nullcontext()
                with host, torch.autocast("cuda", dtype=amp or torch.float16, enabled=bool(amp)):
                    loss = model(input_ids=ids, labels=labels, **images).loss / accum
                meter.phase = "backward"
                with host:
                    (scaler.scale(loss) if scaler else loss).backward()
                del loss, ids, labels, images
            meter.phase = "optimizer step"
            if scaler:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            meter.phase = "zero_grad"
            optimizer.zero_grad(set_to_none=True)


def measure(case):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    import fake_cuda_device
    import fake_cuda_semantics

    fake_cuda_device.install()
    torch.set_num_threads(1)
    memtracker = case.get("meter") == "memtracker"
    meter = memtracker_class()() if memtracker else counter_class()(bool(case.get("trace")))
    fake_cuda_semantics.patch_find_packed_sequence_indices(meter.op_of)
    fake_cuda_semantics.patch_device_capability()
    kernels = {}
    fake_cuda_semantics.install_sdpa(kernels)

    # A kernel package's own Python, its Triton launches skipped, where the user's install
    # has it: transformers calls it instead of its reference code (hub_kernels.py).
    packages = case.get("kernels") or []
    if packages:
        from kernel_paths import import_kernel_packages
        import_kernel_packages(packages, 90)

    def bound(model):
        from kernel_paths import kernel_packages_bound
        return kernel_packages_bound(model, packages)
    start = time.time()
    fake = FakeTensorMode(allow_non_fake_inputs=False)
    if memtracker:  # MemTracker counts what exists before it from track_external
        model, hf_config = build_model(case, fake)
        with fake, torch.device("cuda"), bound(model):
            train(case, model, hf_config, meter, meter)
    else:  # the counter counts the model's storages as they are made
        with fake, meter:
            model, hf_config = build_model(case, contextlib.nullcontext())
            with torch.device("cuda"), bound(model):
                train(case, model, hf_config, meter, contextlib.nullcontext())
    return {"peak_bytes": meter.peak_bytes, "phase": meter.peak_phase, "op": meter.peak_op,
            "scratch": meter.peak_scratch, "matmul_ran": meter.matmul_ran, "kernels": kernels,
            "seconds": time.time() - start, "peak_live": meter.peak_live}


def serve():
    import fake_cuda_device
    fake_cuda_device.install()  # built (or loaded from its cache) once, before any fork
    fork_server.serve(measure, (*fork_server.TRANSFORMERS, "torch._subclasses.fake_tensor",
                                "torch.distributed._tools.mem_tracker", "fake_cpu_step"))


# ---------------------------------------------------------------------------------------
# The driver.
# ---------------------------------------------------------------------------------------

def run_case(case, headroom, server, tmp, i, trace=False, meter="counter"):
    from cases import write_config
    from fake_cpu_step import predict  # `plan ... --json`, waiting out a rebuild
    config_dir, config_path = write_config(case, tmp, i)
    start = time.time()
    try:
        measured, _ = server.run(dict(case.payload(config_dir), trace=trace, meter=meter))
    except RuntimeError as e:
        raise RuntimeError(f"{case.name}: measurement failed:\n{e}") from None
    plan = predict(headroom, config_path, case.plan_flags())
    return measured, plan, time.time() - start


def print_live(live):
    """The storages live at the peak, grouped by where they were made."""
    groups = {}
    for nbytes, phase, op, dtype, shape in live:
        key = (phase, op, dtype, str(list(shape)))
        count, total = groups.get(key, (0, 0))
        groups[key] = (count + 1, total + nbytes)
    for key, (count, total) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"{'':<6}{total:>16,} {count:>5}x  {' '.join(key)}")


def case_server(script):
    """The fork server of a fake-CUDA harness (`script --serve`), with no real CUDA device
    visible (fake_cuda_device refuses to patch next to one)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               TOKENIZERS_PARALLELISM="false", CUDA_VISIBLE_DEVICES="")
    return fork_server.ForkServer([sys.executable, os.path.abspath(script), "--serve"], env)


def compare(measured, plan):
    """The fake peak plus the kernel scratch it cannot see, against the plan's allocated
    peak. The error leaves out the cuBLAS workspaces on both sides: a constant 64 MiB that
    would hide a tiny model's error."""
    cublas = CUBLAS_WORKSPACE if measured["matmul_ran"] else 0
    predicted = plan["peak"]["allocated_bytes"]
    total = measured["peak_bytes"] + cublas
    error = 100.0 * (predicted - total) / (total - cublas)
    fake = measured["peak_bytes"] - measured["scratch"]
    return {"predicted": predicted, "fake": fake, "attention_scratch": measured["scratch"],
            "cublas": cublas, "measured": total, "error": error}


def main():
    if sys.argv[1:] == ["--serve"]:
        return serve()
    from fake_cuda_step_cases import CASES, IMPORTED_CASES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom", help="path to the headroom binary")
    parser.add_argument("--fast", action="store_true", help="only the tiny models")
    parser.add_argument("--only-slow", action="store_true", help="only the real sizes")
    parser.add_argument("--only", default="", help="cases whose name contains this")
    parser.add_argument("--bound-pct", type=float, default=0.5)
    parser.add_argument("--meter", choices=("counter", "memtracker"), default="counter",
                        help="count storages (default) or use PyTorch's MemTracker")
    parser.add_argument("--trace", action="store_true",
                        help="print the storages live at the measured peak, by origin")
    parser.add_argument("--imported", action="store_true",
                        help="the families headroom imports (plans import on fake CUDA; set "
                             "HEADROOM_CACHE to keep the graphs)")
    args = parser.parse_args()
    cases = [c for c in (IMPORTED_CASES if args.imported else CASES) if args.only in c.name and not (args.fast and c.slow)
             and not (args.only_slow and not c.slow)]
    print(f"{'configuration':<56} {'kernel':<10} {'predicted':>16} {'fake':>16}"
          f" {'+attn':>11} {'+cuBLAS':>10} {'measured':>16} {'error':>8}", flush=True)
    server = case_server(__file__)
    failures, worst, begin = 0, 0.0, time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            try:
                m, plan, secs = run_case(case, args.headroom, server, tmp, i, args.trace,
                                         args.meter)
            except RuntimeError as e:
                print(f"{case.name:<56} ERROR\n{e}", flush=True)
                failures += 1
                continue
            row = compare(m, plan)
            ok = abs(row["error"]) <= args.bound_pct
            failures += not ok
            worst = max(worst, abs(row["error"]))
            kernel = ",".join(sorted(m["kernels"])) or "-"
            print(f"{case.name:<56} {kernel:<10} {row['predicted']:>16,} {row['fake']:>16,}"
                  f" {row['attention_scratch']:>11,} {row['cublas']:>10,} {row['measured']:>16,}"
                  f" {row['error']:>+7.3f}%  ({secs:.0f} s){'' if ok else '  OUT OF BOUND'}",
                  flush=True)
            print(f"{'':<4}peak: measured {m['phase']} ({m['op']}), predicted"
                  f" {plan['peak']['phase']}", flush=True)
            if args.trace:
                print_live(m["peak_live"])
    server.close()
    print(f"{len(cases) - failures} of {len(cases)} cases within {args.bound_pct}%"
          f" (max |error| {worst:.3f}%), {time.time() - begin:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
