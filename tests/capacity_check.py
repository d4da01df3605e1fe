#!/usr/bin/env python3
"""`headroom capacity` against the many-GPU planner it is built on.

    python3 tests/capacity_check.py path/to/headroom report|fewest|agreement

report:    the issue's 70B command writes JSON with every field a script reads, CSV with a
           row per configuration and an HTML file; the answers are consistent with the rows.
fewest:    each type's fewest GPUs N is confirmed by `plan --gpus N` (fits) and by the
           count below it (does not fit): N-1 within a node, the previous whole node beyond.
agreement: for three models, capacity's fewest count per GPU type equals what
           `plan --gpus auto` says for that type (both up to 16 GPUs: the types that fit
           nowhere are solved at every count, and 16 keeps the check short; every
           fewest count of these three requests is 16 or less).
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

ACCEPTANCE = ["--model", "llama-3-70b", "--lora-rank", "16", "--seq-len", "4096",
              "--global-batch", "64"]
# Three models, three kinds of training: LoRA, full, QLoRA.
# (The 70B request is confirmed count by count in `fewest`.)
AGREEMENT = [
    ["--model", "qwen3-14b", "--lora-rank", "16", "--seq-len", "4096", "--global-batch", "32"],
    ["--model", "llama-3-8b", "--seq-len", "2048", "--global-batch", "32"],
    ["--model", "qwen3-32b", "--qlora", "--seq-len", "2048", "--global-batch", "16"],
]


def run(cli, args):
    out = subprocess.run([cli, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"FAIL: headroom {' '.join(args)} exited {out.returncode}: {out.stderr}")
    return out.stdout


def capacity(cli, request, *extra):
    return json.loads(run(cli, ["capacity", *request, "--tokens", "1e9", "--json", *extra]))


def fits(cli, request, gpu, count):
    out = json.loads(run(cli, ["plan", *request, "--gpu", gpu, "--gpus", str(count), "--json"]))
    return out["fits"]


def check_report(cli):
    with tempfile.TemporaryDirectory() as tmp:
        html, csv_path = os.path.join(tmp, "r.html"), os.path.join(tmp, "r.csv")
        report = capacity(cli, ACCEPTANCE, "--html", html, "--csv", csv_path)
        for key in ("configurations", "min_gpus", "cheapest", "fastest", "prices_date"):
            assert key in report, f"JSON lacks {key}"
        rows = report["configurations"]
        for row in rows:
            for key in ("gpu", "gpus", "fits", "plan", "peak_device_bytes", "tokens_per_second",
                        "hours", "cost_usd"):
                assert key in row, f"configuration lacks {key}: {row}"
            if row["fits"]:
                # hours = tokens / (tokens/s) / 3600, cost = hours x GPUs x price.
                assert abs(row["hours"] * 3600 * row["tokens_per_second"] - 1e9) < 1e3
                price = report["prices"].get(row["gpu"])
                if price:
                    expected = row["hours"] * row["gpus"] * price["usd_per_gpu_hour"]
                    assert abs(row["cost_usd"] - expected) < 1e-6 * expected
                assert row["peak_device_bytes"] <= row["usable_bytes"], row
        answers = [r for r in rows if r["fits"] and r["within_limits"]]
        cheapest = min((r for r in answers if r["cost_usd"] is not None),
                       key=lambda r: r["cost_usd"])
        fastest = min(answers, key=lambda r: r["hours"])
        assert (report["cheapest"]["gpu"], report["cheapest"]["gpus"]) == \
            (cheapest["gpu"], cheapest["gpus"])
        assert (report["fastest"]["gpu"], report["fastest"]["gpus"]) == \
            (fastest["gpu"], fastest["gpus"])
        for gpu, n in report["min_gpus"].items():
            assert n == min(r["gpus"] for r in rows if r["gpu"] == gpu and r["fits"])
        for price in report["prices"].values():
            assert price["source"] and price["date"], price
        with open(csv_path) as f:
            assert len(list(csv.DictReader(f))) == len(rows)
        assert os.path.getsize(html) > 10000
        print(f"report: {len(rows)} configurations, {len(report['min_gpus'])} GPU types fit; "
              f"{report['headline']}")


def count_below(n, global_batch):
    """The count tried before n: within a node any count, beyond it whole nodes of 8;
    only counts that divide the stated global batch (it is kept exact)."""
    for below in range(n - 1, 0, -1):
        if global_batch % below == 0 and (below <= 8 or below % 8 == 0):
            return below
    return 0


def check_fewest(cli):
    report = capacity(cli, ACCEPTANCE)
    batch = int(ACCEPTANCE[ACCEPTANCE.index("--global-batch") + 1])
    for gpu, n in sorted(report["min_gpus"].items()):
        assert batch % n == 0, f"{gpu}: {n} GPUs cannot run a global batch of {batch}"
        below = count_below(n, batch)
        assert fits(cli, ACCEPTANCE, gpu, n), f"{gpu}: plan --gpus {n} does not fit"
        if below >= 1:
            assert not fits(cli, ACCEPTANCE, gpu, below), f"{gpu}: plan --gpus {below} fits"
        print(f"fewest: {gpu} fits at {n}" + (f", not at {below}" if below >= 1 else ""))


def check_agreement(cli):
    for request in AGREEMENT:
        report = capacity(cli, request, "--max-gpus", "16")
        for gpu in sorted({r["gpu"] for r in report["configurations"]}):
            plan = json.loads(run(cli, ["plan", *request, "--gpu", gpu, "--gpus", "auto",
                                        "--max-gpus", "16", "--json"]))
            planned = plan["plan"]["gpus"] if plan["fits"] else None
            assert report["min_gpus"].get(gpu) == planned, \
                f"{request[1]} on {gpu}: capacity {report['min_gpus'].get(gpu)}, plan {planned}"
        print(f"agreement: {request[1]}: {report['min_gpus']}")


def main():
    cli, what = sys.argv[1], sys.argv[2]
    {"report": check_report, "fewest": check_fewest, "agreement": check_agreement}[what](cli)
    return 0


if __name__ == "__main__":
    sys.exit(main())
