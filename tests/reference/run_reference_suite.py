"""Measured against predicted: each reference case (cases.py) runs real transformers +
PEFT training steps in a fresh process, measured by PeakMeter, and `headroom plan
--json` predicts the same run. Prints the table; exits 1 when a case is outside the
bound.

    python3 run_reference_suite.py HEADROOM [--fast | --only-slow] [--default-path]
                                   [--bound-pct 1] [--only SUBSTR] [--markdown FILE]

Two paths on the CPU:
  pinned (the default): ONEDNN_MAX_CPU_ISA=AVX512_CORE, 1 thread: every machine with
      AVX-512 runs oneDNN's emulated bf16 kernels (one without runs ATen's own gemm), and
      `plan`, given the same environment, reads that cap with the host's CPU;
  --default-path: no ISA pin (ONEDNN_MAX_CPU_ISA only if the caller's environment sets
      it), 2 threads, and plan without --cpu-bf16, so that it reads the host's CPU
      (/proc/cpuinfo, capped by ONEDNN_MAX_CPU_ISA): what a user runs.
For every bf16 / amp-bf16 case it prints the CPU's bf16 capability, the effective ISA
cap, the `--cpu-bf16` mode the plan used (plan --json: config.cpu_bf16) and the oneDNN
matmul kernels the reference process ran (ONEDNN_VERBOSE=1 in that process; none when
ATen runs its own bf16 gemm). A bf16 kernel that no rule has measured, or one other than the
kernel the plan modelled, fails the case, and the suite names it with the probe to run.
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cases import CASES  # noqa: E402
import fork_server  # noqa: E402


# oneDNN capped at AVX-512 without BF16: a machine with AVX-512 then runs the emulated
# bf16 kernels whatever else it has; `plan` run with the same environment reads the cap.
CPU_ISA = "AVX512_CORE"
DEFAULT_PATH_THREADS = 2


def suite_env(default_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               TOKENIZERS_PARALLELISM="false")
    if not default_path:
        env["ONEDNN_MAX_CPU_ISA"] = CPU_ISA
    return env


def is_bf16(case):
    return case.precision in ("bf16", "amp-bf16")


def cpuinfo_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


PROBE = """
import json, torch
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(),
                  "mkldnn_bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
                  "torch": torch.__version__}))
"""


def cpu_bf16_host(env):
    """What the reference process sees: torch's CPU capability and whether ATen sends a
    bf16 matmul to oneDNN (mkldnn_bf16_device_check), under `env`."""
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
    info = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {}
    flags = cpuinfo_flags()
    info["avx512_bf16"] = "avx512_bf16" in flags
    info["amx_bf16"] = "amx_bf16" in flags
    info["isa_cap"] = env.get("ONEDNN_MAX_CPU_ISA") or "unset (oneDNN: the CPU's best)"
    return info


def onednn_kernels(stdout):
    """Distinct oneDNN primitives executed, from ONEDNN_VERBOSE=1 lines:
    {"matmul brg_matmul:avx512_core_bf16 src:bf16": count, ...}."""
    seen = collections.Counter()
    for line in stdout.splitlines():
        if not line.startswith(("onednn_verbose", "dnnl_verbose")):
            continue
        fields = line.split(",")
        if "exec" not in fields:
            continue
        i = fields.index("exec")
        if len(fields) < i + 4:
            continue
        kind, impl = fields[i + 2], fields[i + 3]
        src = next((f.split()[0].split(":")[1] for f in fields[i + 4:] if f.startswith("src")),
                   "?")
        seen[f"{kind} {impl} src:{src}"] += 1
    return seen


# The oneDNN bf16 matmul kernels whose scratch a rule models, each measured on a machine
# that runs it, by the `plan --cpu-bf16` mode that applies the rule
# (planner/simulate/onednn_scratch.cc and op_cost.cc). None: ATen's own gemm, no scratch.
MODELLED_KERNELS = {
    "gemm:jit:bf16": "emulated",
    "brg_matmul:avx512_core_bf16": "avx512-bf16",
    "brg_matmul:avx10_1_512_amx": "amx",
    None: "aten",
}
PROBE_COMMAND = "python3 tests/reference/onednn_scratch_probe.py --out FILE"


def matmul_kernels(measured):
    """{"matmul brg_matmul:... src:bf16": count} for the matrix products the reference ran."""
    return {k: n for k, n in (measured.get("onednn_kernels") or {}).items()
            if k.split()[0] in ("matmul", "inner_product")}


def bf16_kernels(measured):
    """The implementations of the bf16 matmuls the reference ran ({None}: none in oneDNN)."""
    names = {k.split()[1] for k in matmul_kernels(measured) if k.endswith("src:bf16")}
    return names or {None}


# A vector product (m or n of 1) of an AMX plan runs in the GEMV path of oneDNN's
# AVX512-BF16 kernel, which the AMX rule bounds (planner/simulate/onednn_scratch.cc).
ALSO_RUN_UNDER = {"amx": {"brg_matmul:avx512_core_bf16"}}


def kernel_problem(plan, measured):
    """Why the plan's bf16 kernel rule does not cover what the reference ran, or None."""
    mode = plan.get("config", {}).get("cpu_bf16")
    kernels = bf16_kernels(measured)
    for kernel in sorted(kernels, key=str):
        if kernel not in MODELLED_KERNELS:
            return (f"UNMEASURED bf16 kernel {kernel}: no rule models its scratch (the plan used "
                    f"--cpu-bf16 {mode}'s); measure it with `{PROBE_COMMAND}`")
    own = {k for k in kernels if MODELLED_KERNELS[k] == mode}
    others = sorted(kernels - own - ALSO_RUN_UNDER.get(mode, set()), key=str)
    if others or not own:
        kernel = (others or sorted(kernels, key=str))[0]
        return (f"bf16 kernel {kernel or 'ATen gemm'} is modelled by --cpu-bf16 "
                f"{MODELLED_KERNELS[kernel]}, but the plan used {mode}")
    return None


def payload_of(case, config_dir, threads, device):
    payload = dict(vars(case), config_dir=config_dir, threads=threads, device=device)
    payload["lora_targets"] = list(case.lora_targets)
    return payload


def measure(case, config_dir, threads, device, env):
    """One case in a fresh process (CUDA: its allocator's reserved peak starts from zero)."""
    env = dict(env)
    if is_bf16(case) and device == "cpu":
        env["ONEDNN_VERBOSE"] = "1"  # the kernels it ran (printed to stdout, no tensors)
    out = subprocess.run([sys.executable, os.path.join(HERE, "hf_training_run.py"),
                          json.dumps(payload_of(case, config_dir, threads, device))],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{case.name}: reference run failed:\n{out.stderr[-3000:]}")
    result = next(json.loads(line) for line in reversed(out.stdout.strip().splitlines())
                  if line.startswith("{"))
    result["onednn_kernels"] = onednn_kernels(out.stdout)
    return result


class Worker:
    """The CPU cases of one path, each forked from one `hf_training_run.py --serve`
    process (fork_server.py). oneDNN's verbose lines a case prints are its kernels."""

    def __init__(self, env):
        self.server = fork_server.ForkServer(
            [sys.executable, os.path.join(HERE, "hf_training_run.py"), "--serve"],
            dict(env, ONEDNN_VERBOSE="1"))

    def measure(self, case, config_dir, threads):
        try:
            result, lines = self.server.run(payload_of(case, config_dir, threads, "cpu"))
        except RuntimeError as e:
            raise RuntimeError(f"{case.name}: reference run failed: {e}") from None
        result["onednn_kernels"] = onednn_kernels("".join(lines))
        return result

    def close(self):
        self.server.close()


def predict(case, headroom, config_path, extra_flags, gpu, env):
    # On the CPU the planner reads this machine's CPU and the ISA cap in `env`.
    target = ["--gpu", gpu] if gpu else ["--device", "cpu"]
    cmd = [headroom, "plan", "--model", config_path, *case.plan_flags(target), *extra_flags,
           "--json"]
    for _ in range(60):  # the binary may be mid-rebuild (missing or not yet executable)
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, env=env)
            break
        except OSError:
            time.sleep(5)
    else:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"{case.name}: {' '.join(cmd)}\n{out.stderr.strip()}")
    return json.loads(out.stdout)


def kernel_line(host, plan, measured):
    matmuls = matmul_kernels(measured)
    if matmuls:
        ran = "; ".join(f"{k} x{n}" for k, n in sorted(matmuls.items()))
    elif host.get("mkldnn_bf16"):
        ran = "no oneDNN matmul seen"
    else:
        ran = "no oneDNN primitive (ATen's own bf16 gemm: mkldnn bf16 unsupported on this CPU)"
    return (f"    bf16 kernel: torch CPU capability {host.get('capability', '?')}, "
            f"cpuinfo avx512_bf16={'yes' if host['avx512_bf16'] else 'no'} "
            f"amx_bf16={'yes' if host['amx_bf16'] else 'no'}, "
            f"ONEDNN_MAX_CPU_ISA={host['isa_cap']}, "
            f"ATen->oneDNN bf16={'yes' if host.get('mkldnn_bf16') else 'no'}; "
            f"plan --cpu-bf16 {plan.get('config', {}).get('cpu_bf16', '(not in plan JSON)')}; "
            f"ran: {ran}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom", help="path to the headroom binary")
    parser.add_argument("--fast", action="store_true", help="skip the real-size models")
    parser.add_argument("--only-slow", action="store_true", help="only the real-size models")
    parser.add_argument("--bound-pct", type=float, default=1.0)
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--threads", type=int,
                        help="torch threads (default: 1 pinned, 2 on the default path)")
    parser.add_argument("--default-path", action="store_true",
                        help="no ISA pin, 2 threads, plan reads the host's CPU (no --cpu-bf16)")
    parser.add_argument("--plan-flag", action="append", default=[],
                        help="extra flag for headroom plan (repeatable), e.g. --cpu-bf16=emulated")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--gpu", help="run on CUDA and predict for this catalog GPU (e.g. h200)")
    parser.add_argument("--tsv", help="also write one row per case (with reserved bytes) here")
    parser.add_argument("--fresh-process", action="store_true",
                        help="run each CPU case in its own process (checks the shared worker)")
    args = parser.parse_args()
    threads = args.threads or (DEFAULT_PATH_THREADS if args.default_path else 1)
    env = suite_env(args.default_path)

    cases = [c for c in CASES if args.only in c.name and not (args.fast and c.slow)
             and not (args.only_slow and not c.slow)
             and not (args.default_path and c.pinned_only)]
    rows = []
    failures = 0
    problems = set()
    host = cpu_bf16_host(env) if not args.gpu else {}
    if not args.gpu:
        print(f"path: {'default' if args.default_path else 'pinned'}, {threads} thread(s), "
              f"ONEDNN_MAX_CPU_ISA={host['isa_cap']}, torch {host.get('torch', '?')} CPU "
              f"capability {host.get('capability', '?')}, ATen->oneDNN bf16 "
              f"{'yes' if host.get('mkldnn_bf16') else 'no'}, plan "
              f"reads the host CPU{'' if args.default_path else ' under the cap'}")
    header = f"{'configuration':<48} {'predicted':>14} {'measured':>14} {'error':>8}  peak (measured / predicted)"
    print(header, flush=True)
    worker = None if args.gpu or args.fresh_process else Worker(env)
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            config_dir = os.path.join(tmp, f"case{i}")
            os.makedirs(config_dir)
            config_path = os.path.join(config_dir, "config.json")
            with open(config_path, "w") as f:
                json.dump(case.hf_config(), f)
            start = time.time()
            if worker:
                measured = worker.measure(case, config_dir, threads)
            else:
                measured = measure(case, config_dir, threads, "cuda" if args.gpu else "cpu", env)
            plan = predict(case, args.headroom, config_path, args.plan_flag, args.gpu,
                           env)
            predicted_bytes = plan["peak"]["allocated_bytes"]
            measured_bytes = measured["measured_peak_bytes"]
            error = 100.0 * (predicted_bytes - measured_bytes) / measured_bytes
            problem = kernel_problem(plan, measured) if is_bf16(case) and not args.gpu else None
            ok = abs(error) <= args.bound_pct and problem is None
            failures += not ok
            row = (case.name, predicted_bytes, measured_bytes, error, measured["phase"],
                   plan["peak"]["phase"], time.time() - start)
            rows.append(row)
            if args.tsv:
                with open(args.tsv, "a") as f:
                    f.write("\t".join(map(str, [case.name, predicted_bytes, measured_bytes,
                                                f"{error:+.3f}", plan["peak"]["reserved_bytes"],
                                                measured.get("measured_reserved_bytes")])) + "\n")
            verdict = "" if ok else "  KERNEL NOT MODELLED" if problem else "  OUT OF BOUND"
            print(f"{case.name:<48} {predicted_bytes:>14,} {measured_bytes:>14,} {error:>+7.2f}%"
                  f"  {measured['phase']} / {plan['peak']['phase']}"
                  f"  ({row[6]:.1f} s){verdict}", flush=True)
            if is_bf16(case) and not args.gpu:
                print(kernel_line(host, plan, measured), flush=True)
            if problem and problem not in problems:  # once a kernel: one line naming it
                problems.add(problem)
                print(f"    {problem}", flush=True)
    if worker:
        worker.close()
    print(f"{len(cases) - failures} of {len(cases)} cases within {args.bound_pct}%"
          f" (max |error| {max((abs(r[3]) for r in rows), default=0):.3f}%)")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| configuration | predicted bytes | measured bytes | error | peak: measured | peak: predicted |\n")
            f.write("|---|---:|---:|---:|---|---|\n")
            for name, p, m, e, mp, pp, _ in rows:
                f.write(f"| {name} | {p:,} | {m:,} | {e:+.3f}% | {mp} | {pp} |\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
