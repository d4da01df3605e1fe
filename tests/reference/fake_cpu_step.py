"""The whole training step at real size, on fake CPU tensors.

Under torch._subclasses.fake_tensor.FakeTensorMode on device cpu the autograd engine
runs, so the forward, the backward and the optimizer step of a 1B-8B model run with no
memory at all. This harness runs exactly the training loop of hf_training_run.py
(from_config, get_peft_model, gradient_checkpointing_enable, torch.optim, K micro-batches,
2 optimizer steps, autocast for amp-bf16) inside FakeTensorMode, counts every storage an
ATen op makes (live bytes over time, the peak and the phase that holds it), and compares
the peak with `headroom plan --device cpu --stack pytorch --json`.

    python3 fake_cpu_step.py HEADROOM [--only SUBSTR] [--bound-pct 1] [--check-real] [--imported]
    python3 fake_cpu_step.py --real-only [--only tiny]      # only the fake-vs-real check

--check-real first runs a small real GPT-2 step under PeakMeter (oneDNN pinned to
AVX512_CORE, 1 thread) and the same step on fake tensors, and prints the difference.

Each fake case runs in a child forked from one `--serve` process (fork_server.py) that
has imported torch, transformers and torch._dynamo once (about 12 s a case otherwise, on
2 cores): the child starts from the modules a fresh `--case` process has when its counter
starts, plus modules checked to make no tensor (preload), so it counts the same bytes.
`--case NAME` still runs one case in a fresh process.

What fake tensors cannot see (and so what this reference does not check):
* a kernel's own scratch inside one ATen op (oneDNN/MKL buffers, the fp32 accumulators
  of the CPU flash-attention backward, the fp32 buffer of an emulated bf16 matmul): the
  bf16 cases are planned with `--cpu-bf16 aten`, the kernel that allocates no matmul
  scratch; the other rules of that kind are listed in fake_cpu_cases.KERNEL_SCRATCH.
* nothing else: every storage an op returns is counted, including those made by the
  autograd engine, and the CPU generator states torch.utils.checkpoint stashes
  (torch.get_rng_state() returns a real 5056-byte tensor even under FakeTensorMode;
  counted by wrapping it).
"""

import argparse
import contextlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

import fork_server  # noqa: E402
import hf_training_run  # noqa: E402
from cases import write_config  # noqa: E402


class StorageCounter(TorchDispatchMode):
    """Live bytes of every storage an ATen op returns (on fake or real tensors), each
    counted once while its storage lives (a weakref on the storage: PyTorch keeps one
    Python object per storage, so the callback runs when the storage itself dies)."""

    device_type = "cpu"  # storages on other devices are not counted
    round_to = 1         # each storage's bytes rounded up to this (the CUDA allocator's 512)

    def __init__(self):
        super().__init__()
        self.live = {}            # id(storage object) -> (weakref, nbytes)
        self.live_bytes = 0
        self.peak_bytes = 0
        self.peak_phase = "setup"
        self.peak_op = ""
        self.phase = "setup"
        self.op = ""
        self.snapshot_at = None   # debugging: live storages when live bytes first reach this
        self.snapshot = None
        self.origin = {}          # id(storage) -> (phase, op) that made it, when snapshotting

    def track(self, t):
        if not isinstance(t, torch.Tensor) or t.device.type != self.device_type:
            return
        try:
            st = t.untyped_storage()
        except Exception:  # noqa: BLE001 - sparse, nested: none in these models
            return
        key = id(st)
        nbytes = -(-st.nbytes() // self.round_to) * self.round_to
        entry = self.live.get(key)
        if entry is not None and entry[0]() is st:
            if entry[1] != nbytes:  # resized in place (out= ops, resize_)
                self.live_bytes += nbytes - entry[1]
                self.live[key] = (entry[0], nbytes)
                self._update_peak()
            return

        def on_free(_ref, key=key, counter=self):
            entry = counter.live.get(key)
            if entry is not None and entry[0] is _ref:
                del counter.live[key]
                counter.live_bytes -= entry[1]

        self.live[key] = (weakref.ref(st, on_free), nbytes)
        self.live_bytes += nbytes
        if self.snapshot_at is not None:
            self.origin[key] = (self.phase, self.op, str(t.dtype), tuple(t.shape))
        self._update_peak()

    def _update_peak(self):
        if (self.snapshot_at is not None and self.snapshot is None
                and self.live_bytes >= self.snapshot_at):
            self.snapshot = [(n, self.origin.get(k)) for k, (_, n) in self.live.items()]
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes
            self.peak_phase = self.phase
            self.peak_op = self.op

    def reset_peak(self):
        self.peak_bytes = self.live_bytes
        self.peak_phase = self.phase
        self.peak_op = ""

    # Per OpOverload, computed once (both are fixed properties of the overload): the name
    # recorded as `op`, and whether the schema mutates an argument.
    _op_info = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        info = self._op_info.get(func)
        if info is None:
            info = self._op_info[func] = (str(func.overloadpacket.__name__),
                                          func._schema.is_mutable)
        self.op = info[0]
        if kwargs:
            out = func(*args, **kwargs)
        else:
            kwargs = {}
            out = func(*args)
        if isinstance(out, torch.Tensor):
            self.track(out)
        elif not isinstance(out, _NO_TENSOR):  # prim.device (most calls), .item(), ...
            for t in _leaves(out):
                self.track(t)
        if info[1]:  # in place / out=: a resize shows on the argument
            for t in (_leaves(args) if not kwargs else tree_flatten((args, kwargs))[0]):
                if isinstance(t, torch.Tensor) and id(t.untyped_storage()) in self.live:
                    self.track(t)
        return out


# What an op returns that holds no tensor (pytree leaves that are not tensors).
_NO_TENSOR = (type(None), bool, int, float, complex, str, torch.device, torch.dtype,
              torch.layout, torch.memory_format)


def _leaves(tree):
    """tree_flatten(tree)[0], in the same order, without pytree's walk for the shapes an
    ATen op returns or takes almost always: one tensor, or a flat tuple / list."""
    if isinstance(tree, torch.Tensor):
        return (tree,)
    if type(tree) is tuple or type(tree) is list:
        for x in tree:
            if not (x is None or isinstance(x, (torch.Tensor, int, float, bool))):
                return tree_flatten(tree)[0]
        return tree
    return tree_flatten(tree)[0]


class FakeMeter:
    """The meter interface of hf_training_run.run (enter/exit, phase) over a counter."""

    def __init__(self, counter):
        self.counter = counter
        self.live_before_bytes = self.peak_bytes = 0
        self.peak_phase = ""

    def __enter__(self):
        import gc
        gc.collect()
        self.live_before_bytes = self.counter.live_bytes
        self.counter.reset_peak()
        return self

    def __exit__(self, *exc):
        self.peak_bytes = self.counter.peak_bytes
        self.peak_phase = self.counter.peak_phase
        self.peak_op = self.counter.peak_op
        return False

    @contextlib.contextmanager
    def phase(self, name):
        previous, self.counter.phase = self.counter.phase, name
        try:
            yield
        finally:
            self.counter.phase = previous


@contextlib.contextmanager
def fake_init_and_checks_patched():
    """Two places where transformers reads a value back, which a fake tensor has none of:
    weight initialization and its data checks. Neither changes what the step allocates."""
    from transformers import initialization

    original_trunc_normal = initialization.TORCH_INIT_FUNCTIONS["trunc_normal_"]

    def trunc_normal(tensor, *args, **kwargs):
        # torch.nn.init.trunc_normal_ (SigLIP's lecun_normal_ weights, built before the
        # meter starts) reads a value back.
        if isinstance(tensor, torch._subclasses.FakeTensor):
            return tensor
        return original_trunc_normal(tensor, *args, **kwargs)

    # transformers' torch_compilable_check (utils/import_utils.py) turns a count read from
    # the data into a Python bool (Gemma 3's image tokens against its features): turned off
    # by its documented switch. On real tensors it makes two 0-dim tensors, freed at once.
    original_check = os.environ.get("TRANSFORMERS_DISABLE_TORCH_CHECK")
    os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = "1"
    initialization.TORCH_INIT_FUNCTIONS["trunc_normal_"] = trunc_normal
    try:
        yield
    finally:
        initialization.TORCH_INIT_FUNCTIONS["trunc_normal_"] = original_trunc_normal
        if original_check is None:
            del os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"]
        else:
            os.environ["TRANSFORMERS_DISABLE_TORCH_CHECK"] = original_check


@contextlib.contextmanager
def fake_tensor_artefacts_patched(counter):
    """Where transformers or torch behave differently on fake tensors than on real ones,
    make them behave as the real run does."""
    from transformers import masking_utils

    original_find_packed = masking_utils.find_packed_sequence_indices

    def find_packed_sequence_indices(position_ids):
        # transformers' is_tracing(tensor) is True for any FakeTensor (utils/import_utils.py
        # is_tracing -> is_fake_tensor), so the data-dependent check
        # `(packed_sequence_mask[:, -1] == 0).all()` (masking_utils.py:761) is skipped and
        # the packed-sequence mask is returned, which makes create_causal_mask build a
        # [b, 1, s, s] mask that the real run never builds (sdpa then gets an explicit
        # mask instead of is_causal=True). Our loops pass no position_ids: the model makes
        # them with arange, one sequence per row, for which the real check returns None.
        # The real run's small int64 temporaries (diff, cumsum, ==, all) are still made.
        mask = original_find_packed(position_ids)
        if mask is not None and isinstance(mask, torch._subclasses.FakeTensor):
            (mask[:, -1] == 0).all()
            return None
        return mask

    original_get_rng_state = torch.get_rng_state

    def get_rng_state():
        # Not an ATen op: the CPU generator's state (5056 bytes) is a real tensor even
        # under FakeTensorMode; torch.utils.checkpoint stashes one per checkpointed block
        # (checkpoint.py: fwd_cpu_state = torch.get_rng_state()) and torch.random.fork_rng
        # one per recomputation. The real meter counts them, so count them here.
        state = original_get_rng_state()
        counter.track(state)
        return state

    original_module_to = torch.nn.Module.to

    def module_to(self, *args, **kwargs):
        # hf_training_run moves the model with .to("cpu") and PEFT moves each adapter
        # with .to(device, dtype=...). On FakeTensors Module._apply always takes the
        # swap_tensors path (torch/nn/modules/module.py, `isinstance(param, FakeTensor)`),
        # which refuses the tensors FakeTensorMode holds weak references to ("Cannot swap
        # t1 because it has weakref associated with it"). This does what _apply does on
        # real tensors: Tensor.to per parameter and buffer (dtype for floating ones only);
        # a tensor already right is returned as itself (nothing allocated), otherwise the
        # new tensor replaces it and the old storage is freed (real: `param.data = new`).
        device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args, **kwargs)
        for module in self.modules():
            for table in (module._parameters, module._buffers):
                for key, t in table.items():
                    if t is None:
                        continue
                    floating = t.is_floating_point() or t.is_complex()
                    with torch.no_grad():
                        new = t.to(device, dtype if floating else None, non_blocking)
                    if new is t:
                        continue
                    if table is module._parameters:
                        new = torch.nn.Parameter(new, requires_grad=t.requires_grad)
                    table[key] = new
        return self

    masking_utils.find_packed_sequence_indices = find_packed_sequence_indices
    torch.get_rng_state = get_rng_state
    torch.nn.Module.to = module_to
    try:
        with fake_init_and_checks_patched():
            yield
    finally:
        masking_utils.find_packed_sequence_indices = original_find_packed
        torch.get_rng_state = original_get_rng_state
        torch.nn.Module.to = original_module_to


def fake_run(payload):
    """hf_training_run.run on fake CPU tensors. Returns the meter."""
    counter = StorageCounter()
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    meter = FakeMeter(counter)
    with fake_tensor_artefacts_patched(counter), fake_mode, counter:
        hf_training_run.run(payload, meter)
    return meter


def predict(headroom, config_path, flags):
    cmd = [headroom, "plan", "--model", config_path, *flags, "--json"]
    for attempt in range(10):  # the binary is rebuilt now and then
        if os.path.exists(headroom):
            break
        time.sleep(30)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)}\n{out.stderr.strip()}")
    return json.loads(out.stdout)


def payload_of(case, config_dir):
    payload = dict(vars(case), config_dir=config_dir, threads=1, device="cpu")
    payload["lora_targets"] = list(case.lora_targets)
    return payload


def case_result(case_name):
    """One fake case, in the process that measures it (fresh or forked)."""
    from fake_cpu_cases import CASES, IMPORTED_CASES, REAL_CHECKS
    case = next(c for c in CASES + IMPORTED_CASES + REAL_CHECKS if c.name == case_name)
    with tempfile.TemporaryDirectory() as tmp:
        config_dir, _ = write_config(case, tmp, 0)
        torch.set_num_threads(1)
        start = time.time()
        meter = fake_run(payload_of(case, config_dir))
        return {"measured_peak_bytes": meter.peak_bytes, "phase": meter.peak_phase,
                "op": meter.peak_op, "live_before_bytes": meter.live_before_bytes,
                "seconds": time.time() - start}


def run_one_case(case_name):
    """Child process: one fake case (a fresh process so nothing carries over)."""
    print(json.dumps(case_result(case_name)))


# What a fresh `--case` process has imported by the time the counter starts, besides this
# file's own imports: FakeTensorMode.__init__ imports the first three (torch._dynamo is
# most of the time), fake_tensor_artefacts_patched masking_utils, case_result the cases.
IMPORTED_BEFORE_COUNTING = ("torch._dynamo.config", "torch._functorch.config",
                            "torch.nested._internal.nested_tensor", "transformers.masking_utils",
                            "fake_cpu_cases")
# What a fresh process imports only under the counter (while hf_training_run.run builds
# the model: modeling_utils pulls in accelerate, the quantizers, ...), that can be imported
# before it without changing a count: preload() checks that importing them runs no ATen
# op (no tensor made at import, which the counter would have counted). Not peft:
# importing it makes two 0-dim tensors, counted in the LoRA cases (they import it
# themselves).
IMPORTED_WHILE_COUNTING = ("transformers.modeling_utils",
                           "transformers.models.auto.modeling_auto",
                           "transformers.models.llama.modeling_llama",
                           "transformers.models.qwen2.modeling_qwen2",
                           "transformers.models.gpt2.modeling_gpt2")


class _AnyOp(TorchDispatchMode):
    """Records every ATen op run while it is on (preload's check), and the calls of the
    two functions that are no ATen op but counted (torch.get_rng_state here,
    UntypedStorage.resize_ in fake_fsdp_step)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        get_rng_state, resize_ = torch.get_rng_state, torch.UntypedStorage.resize_

        def spied_get_rng_state(*args, **kwargs):
            self.ops.append("torch.get_rng_state")
            return get_rng_state(*args, **kwargs)

        def spied_resize_(storage, size):
            self.ops.append("UntypedStorage.resize_")
            return resize_(storage, size)

        self._restore = (get_rng_state, resize_)
        torch.get_rng_state, torch.UntypedStorage.resize_ = spied_get_rng_state, spied_resize_
        return super().__enter__()

    def __exit__(self, *exc):
        torch.get_rng_state, torch.UntypedStorage.resize_ = self._restore
        return super().__exit__(*exc)


def preload(before=IMPORTED_BEFORE_COUNTING, while_counting=IMPORTED_WHILE_COUNTING):
    """A case server's imports (fork_server.serve): what a fresh process has imported when
    the counter starts, then the modules it would import under the counter that make no
    tensor (checked: an op run while one loads is an error, the list must drop it)."""
    for module in before:
        importlib.import_module(module)
    for module in while_counting:
        if module in sys.modules:
            continue
        spy = _AnyOp()
        with spy:
            importlib.import_module(module)
        if spy.ops:
            raise RuntimeError(f"importing {module} runs ATen ops ({spy.ops[:5]}): a fresh "
                               f"process would count what they make; do not preload it")


def serve():
    """Fake cases in children forked from this process (fork_server.py): torch,
    transformers and torch._dynamo imported once, not once per case (about 12 s a case on
    2 cores). Each payload is {"case": name}."""
    preload()
    fork_server.serve(lambda payload: case_result(payload["case"]), preload=())


def case_server(env_extra=None):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               TOKENIZERS_PARALLELISM="false", **(env_extra or {}))
    return fork_server.ForkServer([sys.executable, os.path.abspath(__file__), "--serve"], env)


def child(args, env_extra=None):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               TOKENIZERS_PARALLELISM="false", **(env_extra or {}))
    out = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{args}: failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_real(only, server):
    """Fake count against the real CPU meter on small GPT-2 runs (the fake ones forked
    from `server`, a case_server())."""
    from fake_cpu_cases import REAL_CHECKS
    print(f"{'fake vs real (PeakMeter, AVX512_CORE, 1 thread)':<48} {'fake':>14} {'real':>14}"
          f" {'fake-real':>10}")
    worst = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(c for c in REAL_CHECKS if only in c.name):
            config_dir, _ = write_config(case, tmp, i)
            real = child([os.path.join(HERE, "hf_training_run.py"),
                          json.dumps(payload_of(case, config_dir))],
                         {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"})
            fake, _ = server.run({"case": case.name})
            diff = fake["measured_peak_bytes"] - real["measured_peak_bytes"]
            worst = max(worst, abs(diff))
            print(f"{case.name:<48} {fake['measured_peak_bytes']:>14,}"
                  f" {real['measured_peak_bytes']:>14,} {diff:>+10,}"
                  f"  {fake['phase']} / {real['phase']}", flush=True)
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom", nargs="?", help="path to the headroom binary")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--bound-pct", type=float, default=1.0)
    parser.add_argument("--check-real", action="store_true",
                        help="first compare the fake count with PeakMeter on small GPT-2 runs")
    parser.add_argument("--real-only", action="store_true", help="only the fake-vs-real check")
    parser.add_argument("--imported", action="store_true",
                        help="run the families planned by import instead of the built ones")
    parser.add_argument("--with-slow", action="store_true",
                        help="with --imported: also the cases marked slow (a second case per family, DeepSeek-V3)")
    parser.add_argument("--real-bound-bytes", type=int, default=1024,
                        help="largest |fake - real| the check accepts (default 1024)")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # child process: one case
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_one_case(args.case)
        return 0
    if args.serve:
        serve()
        return 0
    server = case_server()
    try:
        return run_cases(args, server)
    finally:
        server.close()


def same_parameter_count(case, plan):
    """An imported plan's base parameters against transformers' count of the model built
    on the meta device (LoRA's adapters, the plan's trainable ones, aside)."""
    import torch
    import transformers

    fields = case.hf_config()
    config = transformers.AutoConfig.for_model(fields.pop("model_type"), **fields)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    meta = sum(p.numel() for p in model.parameters())
    params = plan["params"]
    base = params["total"] - (params["trainable"] if case.mode == "lora" else 0)
    print(f"  parameters: plan {base:,}, transformers (meta device) {meta:,}"
          f"{'' if base == meta else '  DIFFERENT'}", flush=True)
    return base == meta


def run_cases(args, server):
    real_failed = False
    if args.check_real or args.real_only:
        worst = check_real(args.only, server)
        real_failed = worst > args.real_bound_bytes
        print(f"fake vs real: largest |difference| {worst:,} bytes"
              f"{'  OUT OF BOUND' if real_failed else ''}", flush=True)
        if args.real_only:
            return 1 if real_failed else 0
    from fake_cpu_cases import CASES, IMPORTED_CASES
    cases = [c for c in (IMPORTED_CASES if args.imported else CASES) if args.only in c.name
             and (args.with_slow or not (args.imported and c.slow))]
    failures = 0
    rows = []
    begin = time.time()
    print(f"{'configuration':<52} {'predicted':>16} {'measured (fake)':>16} {'error':>8}"
          f"  peak (measured / predicted)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            config_dir, config_path = write_config(case, tmp, i)
            start = time.time()
            measured, _ = server.run({"case": case.name})
            plan = predict(args.headroom, config_path, case.fake_plan_flags())
            predicted_bytes = plan["peak"]["allocated_bytes"]
            measured_bytes = measured["measured_peak_bytes"]
            error = 100.0 * (predicted_bytes - measured_bytes) / measured_bytes
            ok = abs(error) <= args.bound_pct
            if args.imported:
                ok = same_parameter_count(case, plan) and ok
            failures += not ok
            rows.append(error)
            print(f"{case.name:<52} {predicted_bytes:>16,} {measured_bytes:>16,} {error:>+7.3f}%"
                  f"  {measured['phase']} ({measured['op']}) / {plan['peak']['phase']}"
                  f"  ({time.time() - start:.1f} s){'' if ok else '  OUT OF BOUND'}",
                  flush=True)
    print(f"{len(cases) - failures} of {len(cases)} cases within {args.bound_pct}%"
          f" (max |error| {max(map(abs, rows), default=0):.3f}%), {time.time() - begin:.0f} s")
    return 1 if failures or real_failed else 0


if __name__ == "__main__":
    sys.exit(main())
