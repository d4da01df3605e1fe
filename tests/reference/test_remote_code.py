"""A model_type transformers does not ship, whose config.json names its own code
(auto_map), is refused by `headroom plan` unless --trust-remote-code is given, and then
planned from that code (run on fake tensors) with the parameter count transformers
builds from it.

    python3 test_remote_code.py HEADROOM
"""

import json
import os
import subprocess
import sys
import tempfile

CONFIGURATION = '''from transformers import LlamaConfig


class ToyConfig(LlamaConfig):
    model_type = "headroom_toy"
'''
MODELING = '''from transformers import LlamaForCausalLM

from .configuration_toy import ToyConfig


class ToyForCausalLM(LlamaForCausalLM):
    config_class = ToyConfig
'''
CONFIG = {"model_type": "headroom_toy", "architectures": ["ToyForCausalLM"],
          "auto_map": {"AutoConfig": "configuration_toy.ToyConfig",
                       "AutoModelForCausalLM": "modeling_toy.ToyForCausalLM"},
          "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
          "max_position_embeddings": 1024}


def meta_parameter_count(model_dir):
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(model_dir, trust_remote_code=True)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, trust_remote_code=True)
    return sum(p.numel() for p in model.parameters())


def main():
    headroom = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = os.path.join(tmp, "toy")
        os.makedirs(model_dir)
        for name, text in (("configuration_toy.py", CONFIGURATION),
                           ("modeling_toy.py", MODELING),
                           ("config.json", json.dumps(CONFIG))):
            with open(os.path.join(model_dir, name), "w") as f:
                f.write(text)
        env = dict(os.environ, HEADROOM_CACHE=os.path.join(tmp, "cache"))
        plan = [headroom, "plan", "--model", model_dir, "--device", "cpu", "--cpu-bf16",
                "aten", "--precision", "bf16", "--seq-len", "128", "--micro-batch", "1", "--json"]
        refused = subprocess.run(plan, capture_output=True, text=True, env=env)
        if refused.returncode == 0 or "--trust-remote-code" not in refused.stderr:
            failures.append(f"without the flag: exit {refused.returncode}, "
                            f"{refused.stderr.strip()!r}")
        trusted = subprocess.run(plan + ["--trust-remote-code"], capture_output=True,
                                 text=True, env=env)
        if trusted.returncode != 0:
            failures.append(f"with --trust-remote-code: exit {trusted.returncode}, "
                            f"{trusted.stderr.strip()!r}")
        else:
            planned = json.loads(trusted.stdout)["params"]["total"]
            built = meta_parameter_count(model_dir)
            print(f"parameters: plan {planned:,}, transformers (meta device) {built:,}")
            if planned != built:
                failures.append(f"parameters: plan {planned:,}, transformers {built:,}")
    for line in failures:
        print("FAIL", line)
    print("refused without the flag, planned with it" if not failures else
          f"{len(failures)} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
