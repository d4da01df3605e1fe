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
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
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
    from transformers import masking_utils

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

        def by_category(self):
            cats = {}
            for nbytes, _, _, category in self.live.values():
                cats[category] = cats.get(category, 0) + nbytes
            return cats

        def op_of(self, tensor):
            entry = self.live.get(tensor.untyped_storage()._cdata)
            return entry[1] if entry else None

    counter = Counter()

    # --- fake-tensor artefacts neutralised -------------------------------------------
    # transformers/masking_utils.py find_packed_sequence_indices (~line 735-764) reads the
    # position ids (`(packed_sequence_mask[:, -1] == 0).all()`), guarded by `not
    # is_tracing(...)`; utils/import_utils.py is_tracing() is True for a FakeTensor, so on
    # fake tensors it returns the packed-sequence mask, which disables the is_causal skip
    # and materialises a [b, 1, s, s] bool mask whenever there is no cache
    # (checkpointing, use_cache=False). On real tensors with plain arange positions it
    # returns None. Here: the same tensors are computed (they are real allocations), and
    # None is returned after checking that the position ids came from aten.arange (the
    # harness never passes position ids: transformers makes them with arange, plus the
    # past length).
    def find_packed_sequence_indices(position_ids):
        first_dummy_value = position_ids[:, :1] - 1
        position_diff = torch.diff(position_ids, prepend=first_dummy_value, dim=-1)
        packed_sequence_mask = (position_diff != 1).cumsum(-1)
        # transformers makes them as arange(...) + past length (aten.add): still consecutive.
        made_by = counter.op_of(position_ids) or ""
        if "arange" not in made_by and "aten.add.Tensor" not in made_by:
            raise RuntimeError(f"position ids not from arange ({made_by}): cannot decide")
        del first_dummy_value, position_diff, packed_sequence_mask
        return None
    masking_utils.find_packed_sequence_indices = find_packed_sequence_indices
    # The other is_tracing() guards in masking_utils (lines ~280, 283, 317, 353, 1521) only
    # look at a padding mask / an attention_mask / a tensor q_offset, none of which this
    # harness passes (no attention_mask, DynamicCache offsets are ints); generic.py's only
    # guard logging. Checked: none of them changes an allocation here.

    # transformers' grouped_mm experts path asks the device for its compute capability
    # (integrations/moe.py _can_use_grouped_mm: SM80+); there is no driver here: an H100's.
    torch.cuda.get_device_capability = lambda device=None: (9, 0)

    # --- SDPA: the kernel PyTorch 2.15's CUDA dispatcher would pick on an H100 ---------
    kernels = {}

    def pick_kernel(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa):
        """cuda/sdp_utils.cpp select_sdp_backend for sm90 with this wheel (cu132, cuDNN
        9.26): check_prefer_cudnn_attention() is true for major 9 and cuDNN > 9.15, so
        the order is cudnn, flash, efficient, math (Context.h default order otherwise;
        facts collected in /tmp/sdpa_facts.md from the 2.15 headers and sdp_utils.cpp)."""
        d_qk, d_v = q.shape[-1], v.shape[-1]
        hq, hk, hv = q.shape[1], k.shape[1], v.shape[1]
        low = q.dtype in (torch.float16, torch.bfloat16)
        grad = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
        if enable_gqa:
            heads_ok = hk == hv and hq % hk == 0
        else:
            heads_ok = hq == hk == hv or (hk == hv == 1)
        # cuDNN (can_use_cudnn_attention): fp16/bf16; mask 2-D/4-D not requiring grad;
        # d_qk, d_v multiples of 8, <= 128 (256 only with a new enough cudnn-frontend:
        # not assumed); backward needs d <= 128; s_k != 1; dropout a multiple of 1/16;
        # GQA allowed (heads need not be equal, both divide H_q).
        mask_ok = attn_mask is None or (attn_mask.dim() in (2, 4) and not attn_mask.requires_grad)
        cudnn_heads = hk > 0 and hv > 0 and hq % hk == 0 and hq % hv == 0
        if (low and mask_ok and d_qk % 8 == 0 and d_v % 8 == 0 and d_qk <= 128 and d_v <= 128
                and k.shape[2] != 1 and abs(dropout_p * 16 - round(dropout_p * 16)) < 1e-9
                and not (dropout_p > 0 and q.shape[2] == 1) and cudnn_heads):
            return "cudnn"
        # Flash (can_use_flash_attention): no mask; d <= 256 (padded to 8); fp16/bf16;
        # causal needs s_q == s_k; GQA with enable_gqa; dropout ok.
        if (low and attn_mask is None and d_qk == d_v <= 256 and heads_ok
                and not (is_causal and q.shape[2] != k.shape[2])):
            return "flash"
        # Memory-efficient (can_use_mem_efficient_attention): d_qk == d_k, multiple of
        # 8 (16-bit) / 4 (fp32) on sm >= 80; fp16/fp32/bf16; mask and dropout ok; GQA via
        # check_batch_size_and_num_heads_dense<supports_gqa=true> on CUDA (2.15's kernels
        # read grouped K/V: kernel_forward.h q_heads_per_kv).
        align = 8 if low else 4
        if (q.dtype in (torch.float16, torch.float32, torch.bfloat16) and d_qk == k.shape[-1]
                and d_qk % align == 0 and heads_ok):
            return "efficient"
        return "math"

    def convert_boolean_attn_mask(mask, dtype, fill=-math.inf):
        # attention.cpp convert_boolean_attn_mask_(mask, dtype, neg_inf):
        # where(mask, 0.0, scalar_tensor(neg_inf, dtype)), one [b, 1, s, s] tensor of q's
        # dtype (the CPU trace of the same function shows nothing else).
        if mask is None or mask.dtype != torch.bool:
            return mask
        return torch.where(mask, 0.0, torch.scalar_tensor(fill, dtype=dtype, device=mask.device))

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
        # CUDA autocast: scaled_dot_product_attention is in the lower-precision list
        # (autocast_mode.cpp): cached_cast of every floating tensor argument (q, k, v and a
        # float mask; not cached: they are not leaves).
        if torch.is_autocast_enabled("cuda"):
            dt = torch.get_autocast_dtype("cuda")

            def cast(x):
                if (x is not None and x.is_floating_point() and x.dtype != dt
                        and x.dtype != torch.float64):
                    return x.to(dt)
                return x
            query, key, value, attn_mask = map(cast, (query, key, value, attn_mask))
        kernel = pick_kernel(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
        kernels[kernel] = kernels.get(kernel, 0) + 1
        # The kernels run below autocast (the autocast wrapper excludes its key).
        was = torch.is_autocast_enabled("cuda")
        torch.set_autocast_enabled("cuda", False)
        try:
            grad = torch.is_grad_enabled() and any(x.requires_grad for x in (query, key, value))
            if kernel == "cudnn":
                mask = convert_boolean_attn_mask(attn_mask, query.dtype, fill=-65504.0)
                return torch.ops.aten._scaled_dot_product_cudnn_attention(
                    query, key, value, mask, grad, dropout_p, is_causal, False, scale=scale)[0]
            if kernel == "flash":
                d = query.shape[-1]
                if scale is None:
                    scale = 1.0 / math.sqrt(d)
                if d % 8:
                    # pad_last_dim<8>: padded copies of q, k, v; the output sliced back.
                    pad = 8 - d % 8
                    query, key, value = (torch.nn.functional.pad(x, (0, pad))
                                         for x in (query, key, value))
                out = torch.ops.aten._scaled_dot_product_flash_attention(
                    query, key, value, dropout_p, is_causal, False, scale=scale)[0]
                return out[..., :d] if d % 8 else out
            if kernel == "efficient":
                mask = convert_boolean_attn_mask(attn_mask, query.dtype)
                if mask is not None:
                    # preprocess_mask: pad_bias<8> when the last dim is not aligned, then
                    # expand to [B, H, L, S] (a view).
                    last = mask.shape[-1]
                    if last % 8:
                        mask = torch.nn.functional.pad(mask, (0, 8 - last % 8))[..., :last]
                    mask = mask.expand(query.shape[0], query.shape[1], query.shape[2],
                                       key.shape[2])
                return torch.ops.aten._scaled_dot_product_efficient_attention(
                    query, key, value, mask, grad, dropout_p, is_causal, scale=scale)[0]
            mask = convert_boolean_attn_mask(attn_mask, query.dtype)
            return torch.ops.aten._scaled_dot_product_attention_math(
                query, key, value, mask, dropout_p, is_causal, None, scale=scale,
                enable_gqa=enable_gqa)[0]
        finally:
            torch.set_autocast_enabled("cuda", was)

    torch.nn.functional.scaled_dot_product_attention = sdpa

    # --- the model, built on the fake device -----------------------------------------
    hf_config = transformers.AutoConfig.from_pretrained(case["config_dir"])
    auto = (transformers.AutoModelForSequenceClassification if case["task"] == "seq-cls"
            else transformers.AutoModelForCausalLM)
    fake = FakeTensorMode(allow_non_fake_inputs=False)
    torch.manual_seed(0)
    t0 = time.time()

    # Module.to() cannot swap a fake parameter (module.py _apply: swap_tensors of a
    # FakeTensor fails), and PEFT's _move_adapter_to_device_of_base_layer
    # (tuners_utils.py ~2210) calls item.to(device, dtype) on every adapter. While the
    # model is built, _apply replaces each parameter by a new Parameter of fn(param):
    # the values a real .to() gives (only the Python object differs; nothing is counted
    # before the forward).
    def fake_apply(self, fn, recurse=True):
        if recurse:
            for child in self.children():
                child._apply(fn)
        for key, param in self._parameters.items():
            if param is not None:
                with torch.no_grad():
                    applied = fn(param)
                self._parameters[key] = torch.nn.Parameter(applied,
                                                           requires_grad=param.requires_grad)
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self
    real_apply = torch.nn.Module._apply
    torch.nn.Module._apply = fake_apply
    with fake, torch.device("cuda"):
        model = auto.from_config(hf_config, attn_implementation=case["attention"],
                                 dtype=dtypes[case["base_dtype"]])
        model = prepare_for_training(model, case)
    torch.nn.Module._apply = real_apply
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
            prev = (torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"))
            torch.set_autocast_enabled("cuda", True)
            torch.set_autocast_dtype("cuda", amp)
            torch.autocast_increment_nesting()
        loss = model(input_ids=ids, labels=labels).loss
        in_forward_end = counter.current
        if amp is not None:
            if torch.autocast_decrement_nesting() == 0:
                torch.clear_autocast_cache()
            torch.set_autocast_enabled("cuda", prev[0])
            torch.set_autocast_dtype("cuda", prev[1])
        end = counter.current
        end_cats = counter.by_category()
    forward_s = time.time() - t0
    h1.remove()
    h2.remove()
    result = {"end_bytes": end, "end_before_autocast_exit": in_forward_end,
              "peak_bytes": counter.peak, "end_categories": end_cats,
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
                   "trace": trace}
        start = time.time()
        try:
            measured, _ = server.run(payload)
        except RuntimeError as e:
            raise RuntimeError(f"{case.name}: measurement failed:\n{e}") from None
        predicted = simulate(case, headroom, config_path, tmp)
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
        failures += not ok
        worst = max(worst, abs(e_end), abs(e_peak))
        kernel = ",".join(sorted(m["kernels"])) or "-"
        print(f"{case.name:<52} {kernel:<14} {p['end_bytes']:>15,} {m['end_bytes']:>15,}"
              f" {e_end:>+7.3f}% {p['peak_bytes']:>15,} {m['peak_bytes']:>15,} {e_peak:>+7.3f}%"
              f"  ({secs:.0f} s){'' if ok else '  OUT OF BOUND'}", flush=True)
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
