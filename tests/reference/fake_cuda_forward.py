"""CUDA semantics without a GPU: real transformers + PEFT models run their training
forward on fake CUDA tensors (torch._subclasses.fake_tensor.FakeTensorMode, device
"cuda"); every storage allocated on the fake device is counted the way the CUDA caching
allocator counts it (rounded up to 512 B), and the live bytes at the end of the first
forward and the forward's peak are compared with `headroom simulate --gpu h100-80gb`
at the same points. Prints a table; exits 1 when a case is outside the bound.

    python3 fake_cuda_forward.py HEADROOM [--fast | --only-slow] [--only SUBSTR]
                                 [--bound-pct 0.5] [--trace] [--min-bytes N]

Each case runs in its own process, forked from one that imported torch and transformers
(`--serve`, fork_server.py). Only the forward runs: the
autograd engine asks the CUDA driver for a context, so backward cannot run on fake
CUDA tensors. What can be measured this way is what CUDA's forward allocates: the
autocast cast cache, the SDPA kernel the CUDA dispatcher picks (below), CUDA's
autocast op lists (layer_norm / softmax in fp32), native_dropout's 1-byte mask.
"""

import argparse
import contextlib
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The driverless CUDA device and CUDA's semantics, shared with headroom import.
sys.path.insert(1, os.path.join(HERE, "..", "..", "models", "import"))
import fake_cuda_semantics  # noqa: E402
import fork_server  # noqa: E402

ROUND = 512  # c10/cuda/CUDACachingAllocator.cpp: kMinBlockSize, every request rounded up


def cuda_bytes(nbytes):
    return 0 if nbytes == 0 else ((nbytes + ROUND - 1) // ROUND) * ROUND


# ---------------------------------------------------------------------------------------
# The measuring child process.
# ---------------------------------------------------------------------------------------

def measure(case):
    import torch
    from hf_training_run import prepare_for_training
    torch.set_num_threads(1)
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils import _pytree as pytree
    import transformers

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

    class Counter(TorchDispatchMode):
        """Every storage an op returns on the fake cuda device, with the op that made it
        and the module running it; freed when the storage dies (a weakref finalizer on
        the storage, whose Python object lives as long as the StorageImpl)."""

        def __init__(self):
            super().__init__()
            self.live = {}          # StorageImpl address -> (bytes, op, module, category)
            self.known = set()      # storages that existed before (parameters, buffers)
            self.current = self.peak = 0
            self.host_current = self.host_peak = 0
            self.peak_snapshot = None
            self.modules = []
            self.trace = [] if case.get("trace") else None

        def _free(self, key):
            entry = self.live.pop(key, None)
            if entry is None:
                return
            self.current -= entry[0]
            if self.trace is not None:
                self.trace.append(("free", entry[0], self.current, entry[1], entry[2]))

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            # save_on_cpu's host copy (offload): torch.empty(..., pin_memory=is_pinnable) on
            # the CPU, pinned on a machine with CUDA (here the fake device has no driver).
            if "pin_memory" in (kwargs or {}) and out.device.type == "cpu":
                self.count_pinned(out)
            inputs = None
            for t in pytree.tree_leaves(out):
                if not isinstance(t, torch.Tensor) or t.device.type != "cuda":
                    continue
                st = t.untyped_storage()
                key = st._cdata
                if key in self.live or key in self.known:
                    continue
                if inputs is None:  # a view of an input made no storage
                    inputs = {x.untyped_storage()._cdata
                              for x in pytree.tree_leaves((args, kwargs))
                              if isinstance(x, torch.Tensor)}
                if key in inputs:
                    continue
                nbytes = cuda_bytes(st.nbytes())
                if nbytes == 0:
                    continue
                category = "activations"
                if (func is torch.ops.aten._to_copy.default and args
                        and isinstance(args[0], torch.nn.Parameter)):
                    category = "weight_casts"
                module = self.modules[-1] if self.modules else ""
                self.live[key] = (nbytes, str(func), module, category)
                weakref.finalize(st, self._free, key)
                self.current += nbytes
                if self.trace is not None:
                    self.trace.append(("alloc", nbytes, self.current, str(func), module))
                if self.current > self.peak:
                    self.peak = self.current
                    self.peak_snapshot = self.by_category()
            return out

        def count_pinned(self, t):
            """A pinned host tensor: CachingHostAllocator rounds it up to a power of two
            (aten/src/ATen/core/CachingHostAllocator.h, allocate)."""
            st = t.untyped_storage()
            nbytes = 1 << max(0, (st.nbytes() - 1).bit_length())
            self.host_current += nbytes
            self.host_peak = max(self.host_peak, self.host_current)

            def free(n=nbytes):
                self.host_current -= n
            weakref.finalize(st, free)

        def by_category(self):
            cats = {}
            for nbytes, _, _, category in self.live.values():
                cats[category] = cats.get(category, 0) + nbytes
            return cats

        def op_of(self, tensor):
            entry = self.live.get(tensor.untyped_storage()._cdata)
            return entry[1] if entry else None

    counter = Counter()

    fake_cuda_semantics.patch_find_packed_sequence_indices(counter.op_of)
    fake_cuda_semantics.patch_device_capability()
    kernels = {}
    fake_cuda_semantics.install_sdpa(kernels)

    # --- the model, built on the fake device -----------------------------------------
    hf_config = transformers.AutoConfig.from_pretrained(case["config_dir"])
    auto = (transformers.AutoModelForSequenceClassification if case["task"] == "seq-cls"
            else transformers.AutoModelForCausalLM)
    fake = FakeTensorMode(allow_non_fake_inputs=False)
    torch.manual_seed(0)
    t0 = time.time()

    with fake_cuda_semantics.fake_module_apply(), fake, torch.device("cuda"):
        model = auto.from_config(hf_config, attn_implementation=case["attention"],
                                 dtype=dtypes[case["base_dtype"]])
        model = prepare_for_training(model, case)
    build_s = time.time() - t0
    weights = sum(cuda_bytes(p.untyped_storage().nbytes()) for p in model.parameters())
    buffers = sum(cuda_bytes(b.untyped_storage().nbytes()) for b in model.buffers())

    counter.known = {t.untyped_storage()._cdata
                     for t in [*model.parameters(), *model.buffers()]}
    names = {m: n for n, m in model.named_modules()}

    def pre(mod, _):
        counter.modules.append(names.get(mod, type(mod).__name__))

    def post(mod, _, __):
        if counter.modules:
            counter.modules.pop()
    h1 = torch.nn.modules.module.register_module_forward_pre_hook(pre)
    h2 = torch.nn.modules.module.register_module_forward_hook(post)

    b, s = case["micro_batch"], case["seq_len"]
    amp = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(case["precision"])
    t0 = time.time()
    with fake, torch.device("cuda"), counter:
        ids = torch.randint(0, hf_config.vocab_size, (b, s))
        labels = (torch.randint(0, hf_config.num_labels, (b,)) if case["task"] == "seq-cls"
                  else ids)
        # torch.autocast("cuda") turns itself off without a CUDA device: its state is set
        # directly, as torch.autocast.__enter__/__exit__ do (the cast cache is cleared when
        # the nesting drops to 0).
        if amp is not None:
            prev = fake_cuda_semantics.autocast_enter(amp)
        # A training loop sets no default device: save_on_cpu's host copies (offload) are
        # made where torch.empty puts them without one, the CPU.
        with torch.device("cpu") if case.get("offload") else contextlib.nullcontext():
            loss = model(input_ids=ids, labels=labels).loss
        in_forward_end = counter.current
        if amp is not None:
            fake_cuda_semantics.autocast_exit(prev)
        end = counter.current
        end_cats = counter.by_category()
    forward_s = time.time() - t0
    h1.remove()
    h2.remove()
    result = {"end_bytes": end, "end_before_autocast_exit": in_forward_end,
              "peak_bytes": counter.peak, "end_categories": end_cats,
              "host_pinned_end_bytes": counter.host_current,
              "peak_categories": counter.peak_snapshot, "kernels": kernels,
              "weights_bytes": weights, "buffers_bytes": buffers,
              "build_s": build_s, "forward_s": forward_s, "loss_dtype": str(loss.dtype)}
    if counter.trace is not None:
        result["trace"] = counter.trace
        # Still live at the end of the forward, grouped by (op, module kind, bytes).
        result["live_at_end"] = [list(v) for v in counter.live.values()]
    return result


# ---------------------------------------------------------------------------------------
# The driver.
# ---------------------------------------------------------------------------------------

def simulate(case, headroom, config_path, tmp):
    csv_path = os.path.join(tmp, "t.csv")
    cmd = [headroom, "simulate", "--model", config_path, *case.simulate_flags(),
           "--csv", csv_path, "--svg", os.path.join(tmp, "t.svg")]
    for attempt in range(6):
        if os.path.exists(headroom):
            break
        time.sleep(30)  # the binary is rebuilt now and then
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"{case.name}: {' '.join(cmd)}\n{out.stderr.strip()}")
    workspace = 0
    end = peak = None
    end_row = peak_row = None
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            if row["phase"] == "setup":
                workspace = int(row["temporaries_bytes"])
                continue
            if row["step"] != "1" or row["micro_batch"] != "1" or row["phase"] != "forward":
                continue
            live = int(row["allocated_bytes"]) - int(row["weights_bytes"]) - workspace
            end, end_row = live, row
            if peak is None or live > peak:
                peak, peak_row = live, row
    return {"end_bytes": end, "peak_bytes": peak, "workspace": workspace,
            "end_row": end_row, "peak_row": peak_row, "csv": csv_path, "cmd": cmd}


def plan_host_pinned(case, headroom, config_path):
    """The plan's pinned host bytes for --activation-offload (plan --json)."""
    cmd = [headroom, "plan", "--model", config_path, *case.simulate_flags(), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if not out.stdout.strip():
        raise RuntimeError(f"{case.name}: {' '.join(cmd)}\n{out.stderr.strip()}")
    return json.loads(out.stdout)["peak"]["host_pinned_bytes"]


def run_case(case, headroom, server, trace=False):
    """Measures `case` in a child of `server` (fork_server.py) and simulates it."""
    from fake_cuda_cases import FakeCase  # noqa: F401
    with tempfile.TemporaryDirectory() as tmp:
        config_dir = os.path.join(tmp, "cfg")
        os.makedirs(config_dir)
        config_path = os.path.join(config_dir, "config.json")
        with open(config_path, "w") as f:
            json.dump(case.hf_config(), f)
        payload = {"config_dir": config_dir, "task": case.task, "precision": case.precision,
                   "mode": case.mode, "lora_rank": case.lora_rank,
                   "lora_targets": list(case.lora_targets), "checkpoint": case.checkpoint,
                   "attention": case.attention, "micro_batch": case.micro_batch,
                   "seq_len": case.seq_len, "base_dtype": case.effective_base_dtype(),
                   "offload": case.offload, "trace": trace}
        start = time.time()
        try:
            measured, _ = server.run(payload)
        except RuntimeError as e:
            raise RuntimeError(f"{case.name}: measurement failed:\n{e}") from None
        predicted = simulate(case, headroom, config_path, tmp)
        if case.offload:
            predicted["host_pinned_bytes"] = plan_host_pinned(case, headroom, config_path)
        if trace:
            with open(predicted["csv"]) as f:
                predicted["rows"] = [r for r in csv.DictReader(f)
                                     if r["step"] == "1" and r["micro_batch"] == "1"
                                     and r["phase"] == "forward"]
        return measured, predicted, time.time() - start


def pct(p, m):
    return 100.0 * (p - m) / m if m else float("inf")


def main():
    if sys.argv[1:] == ["--serve"]:
        fork_server.serve(measure, (*fork_server.TRANSFORMERS, "torch._subclasses.fake_tensor"))
        return 0
    from fake_cuda_cases import CASES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom", help="path to the headroom binary")
    parser.add_argument("--fast", action="store_true", help="only the tiny models")
    parser.add_argument("--only-slow", action="store_true", help="only the real sizes")
    parser.add_argument("--only", default="", help="cases whose name contains this")
    parser.add_argument("--bound-pct", type=float, default=0.5)
    parser.add_argument("--trace", action="store_true",
                        help="print every measured allocation (op, module) and the simulator's rows")
    parser.add_argument("--min-bytes", type=int, default=0, help="with --trace: smaller ones left out")
    args = parser.parse_args()
    cases = [c for c in CASES if args.only in c.name and not (args.fast and c.slow)
             and not (args.only_slow and not c.slow)]
    hdr = (f"{'configuration':<52} {'kernel':<14} {'end: predicted':>15} {'measured':>15}"
           f" {'error':>8} {'peak: predicted':>15} {'measured':>15} {'error':>8}")
    print(hdr, flush=True)
    failures = 0
    worst = 0.0
    server = fork_server.ForkServer(
        [sys.executable, os.path.abspath(__file__), "--serve"],
        dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
             TOKENIZERS_PARALLELISM="false", CUDA_VISIBLE_DEVICES=""))
    for case in cases:
        try:
            m, p, secs = run_case(case, args.headroom, server, args.trace)
        except RuntimeError as e:
            print(f"{case.name:<52} ERROR\n{e}", flush=True)
            failures += 1
            continue
        e_end, e_peak = pct(p["end_bytes"], m["end_bytes"]), pct(p["peak_bytes"], m["peak_bytes"])
        ok = abs(e_end) <= args.bound_pct and abs(e_peak) <= args.bound_pct
        host_line = ""
        if case.offload:  # the pinned host copies at the forward's end, against the plan's
            e_host = pct(p["host_pinned_bytes"], m["host_pinned_end_bytes"])
            ok = ok and abs(e_host) <= args.bound_pct
            worst = max(worst, abs(e_host))
            host_line = (f"{'':<4}pinned host at the forward's end: predicted "
                         f"{p['host_pinned_bytes']:,}, measured {m['host_pinned_end_bytes']:,}"
                         f" ({e_host:+.3f}%)")
        failures += not ok
        worst = max(worst, abs(e_end), abs(e_peak))
        kernel = ",".join(sorted(m["kernels"])) or "-"
        print(f"{case.name:<52} {kernel:<14} {p['end_bytes']:>15,} {m['end_bytes']:>15,}"
              f" {e_end:>+7.3f}% {p['peak_bytes']:>15,} {m['peak_bytes']:>15,} {e_peak:>+7.3f}%"
              f"  ({secs:.0f} s){'' if ok else '  OUT OF BOUND'}", flush=True)
        if host_line:
            print(host_line, flush=True)
        print(f"{'':<4}measured by category: end {m['end_categories']}, peak {m['peak_categories']};"
              f" predicted peak at {p['peak_row']['op']}, end row {p['end_row']['event']}"
              f" ({p['end_row']['op']}): weight_casts {p['end_row']['weight_casts_bytes']}",
              flush=True)
        if args.trace:
            print("  measured allocations (kind, bytes, running total, op, module):")
            for ev in m["trace"]:
                if ev[1] >= args.min_bytes:
                    print(f"    {ev[0]:<5} {ev[1]:>14,} {ev[2]:>15,}  {ev[3]}  [{ev[4]}]")
            print("  simulated step-1 forward rows (kind, bytes, live non-weight, op, category):")
            for r in p["rows"]:
                if int(r["bytes"]) >= args.min_bytes:
                    live = int(r["allocated_bytes"]) - int(r["weights_bytes"]) - p["workspace"]
                    print(f"    {r['kind']:<5} {int(r['bytes']):>14,} {live:>15,}  {r['op']}  {r['category']}")
    server.close()
    print(f"{len(cases) - failures} of {len(cases)} cases within {args.bound_pct}%"
          f" (max |error| {worst:.3f}%)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
