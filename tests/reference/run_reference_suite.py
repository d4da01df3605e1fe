"""Measured against predicted: each reference case (cases.py) runs real transformers +
PEFT training steps in a fresh process, measured by PeakMeter, and `headroom plan
--json` predicts the same run. Prints the table; exits 1 when a case is outside the
bound.

    python3 run_reference_suite.py HEADROOM [--fast] [--bound-pct 2] [--only SUBSTR]
                                             [--markdown docs/reference-suite.md]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cases import CASES  # noqa: E402


# oneDNN capped at AVX-512 without BF16: every machine of this kind then runs the same
# (emulated) bf16 kernels, whatever its own ISA, and `plan --cpu-bf16 emulated` predicts
# them.
CPU_ISA = "AVX512_CORE"


def measure(case, config_dir, threads, device):
    payload = dict(vars(case), config_dir=config_dir, threads=threads, device=device)
    payload["lora_targets"] = list(case.lora_targets)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               TOKENIZERS_PARALLELISM="false", ONEDNN_MAX_CPU_ISA=CPU_ISA)
    out = subprocess.run([sys.executable, os.path.join(HERE, "hf_training_run.py"),
                          json.dumps(payload)], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{case.name}: reference run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def predict(case, headroom, config_path, extra_flags, gpu):
    target = ["--gpu", gpu] if gpu else ["--device", "cpu", "--cpu-bf16", "emulated"]
    cmd = [headroom, "plan", "--model", config_path, *case.plan_flags(target), *extra_flags,
           "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"{case.name}: {' '.join(cmd)}\n{out.stderr.strip()}")
    return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("headroom", help="path to the headroom binary")
    parser.add_argument("--fast", action="store_true", help="skip the real-size models")
    parser.add_argument("--only-slow", action="store_true", help="only the real-size models")
    parser.add_argument("--bound-pct", type=float, default=2.0)
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--plan-flag", action="append", default=[],
                        help="extra flag for headroom plan (repeatable), e.g. --cpu-bf16=emulated")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--gpu", help="run on CUDA and predict for this catalog GPU (e.g. h200)")
    parser.add_argument("--tsv", help="also write one row per case (with reserved bytes) here")
    args = parser.parse_args()

    cases = [c for c in CASES if args.only in c.name and not (args.fast and c.slow)
             and not (args.only_slow and not c.slow)]
    rows = []
    failures = 0
    header = f"{'configuration':<48} {'predicted':>14} {'measured':>14} {'error':>8}  peak (measured / predicted)"
    print(header, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            config_dir = os.path.join(tmp, f"case{i}")
            os.makedirs(config_dir)
            config_path = os.path.join(config_dir, "config.json")
            with open(config_path, "w") as f:
                json.dump(case.hf_config(), f)
            start = time.time()
            measured = measure(case, config_dir, args.threads, "cuda" if args.gpu else "cpu")
            plan = predict(case, args.headroom, config_path, args.plan_flag, args.gpu)
            predicted_bytes = plan["peak"]["allocated_bytes"]
            measured_bytes = measured["measured_peak_bytes"]
            error = 100.0 * (predicted_bytes - measured_bytes) / measured_bytes
            ok = abs(error) <= args.bound_pct
            failures += not ok
            row = (case.name, predicted_bytes, measured_bytes, error, measured["phase"],
                   plan["peak"]["phase"], time.time() - start)
            rows.append(row)
            if args.tsv:
                with open(args.tsv, "a") as f:
                    f.write("\t".join(map(str, [case.name, predicted_bytes, measured_bytes,
                                                f"{error:+.3f}", plan["peak"]["reserved_bytes"],
                                                measured.get("measured_reserved_bytes")])) + "\n")
            print(f"{case.name:<48} {predicted_bytes:>14,} {measured_bytes:>14,} {error:>+7.2f}%"
                  f"  {measured['phase']} / {plan['peak']['phase']}"
                  f"  ({row[6]:.1f} s){'' if ok else '  OUT OF BOUND'}", flush=True)
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
