"""`headroom train` on a family planned from an imported graph refuses in one line that
names the first op it has no kernel for (its ATen op and its module), and the model_type.
`plan` on the same config works: the refusal is train's, not the import's.

    python3 test_train_refusal.py HEADROOM
"""

import json
import os
import subprocess
import sys
import tempfile

from expectations import Expectations

# A toy OLMo 3 (a type headroom imports, not builds): one period of its layer pattern.
CONFIG = {"model_type": "olmo3", "architectures": ["Olmo3ForCausalLM"], "vocab_size": 256,
          "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
          "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 512,
          "sliding_window": 16, "tie_word_embeddings": False,
          "layer_types": ["sliding_attention"] * 3 + ["full_attention"]}


def main():
    headroom = sys.argv[1]
    checks = Expectations()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = os.path.join(tmp, "toy")
        os.makedirs(model_dir)
        with open(os.path.join(model_dir, "config.json"), "w") as f:
            json.dump(CONFIG, f)
        env = dict(os.environ, HEADROOM_CACHE=os.path.join(tmp, "cache"))
        common = ["--model", model_dir, "--device", "cpu", "--precision", "fp32",
                  "--seq-len", "32", "--micro-batch", "1"]
        plan = subprocess.run([headroom, "plan", *common, "--json"], capture_output=True,
                              text=True, env=env)
        checks.expect(plan.returncode, 0, f"plan's exit ({plan.stderr.strip()!r})")
        train = subprocess.run([headroom, "train", *common, "--steps", "1"],
                               capture_output=True, text=True, env=env)
        message = train.stderr.strip()
        print(f"train: exit {train.returncode}: {message}")
        checks.expect(train.returncode, 2, "train's exit")
        checks.expect(len(message.splitlines()), 1, "train's lines")
        # The first op of a causal LM's step is its token embedding's lookup.
        for text in ("train has no kernel for aten.embedding (module model.embed_tokens)",
                     "model_type 'olmo3'"):
            checks.expect(text in message, True, f"train's message names {text!r}")
    return checks.report()


if __name__ == "__main__":
    sys.exit(main())
