#!/usr/bin/env python3
"""headroom's trained weights and LoRA adapters, loaded by the Hugging Face stack itself.

For GPT-2, Llama (Llama-2 and Llama-3.1-style rotary positions), Qwen2 and BERT configs
(dropout off, fp32), `headroom train` trains and saves:
  1. full weights: transformers loads model.safetensors and its loss on a batch must equal
     the loss headroom computes for those weights on that batch;
  2. a LoRA adapter on those weights: PEFT loads adapter_model.safetensors +
     adapter_config.json onto the transformers model, and its loss must equal headroom's
     for the adapted model.
So the saved names, layouts (GPT-2's Conv1D transpose), PEFT's config (target modules,
fan_in_fan_out, alpha, modules_to_save) and the executor's model itself all agree with
the reference implementation.

Usage: check_against_transformers.py HEADROOM_BINARY  (run by ctest)
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers
from peft import PeftModel

SEQ = 32
MICRO_BATCH = 2
TOLERANCE = 1e-4  # relative, on the mean cross-entropy in fp32
# Two steps at this rate move the models far enough from uniform that positions matter:
# without Llama 3's rope_scaling the loss differs by 7.6e-4, with Qwen2's base at 10000
# by 3.7e-4 (at 1e-2 by 1.2e-6 and 6.5e-6, unseen); matches measure 0 to 8e-8.
LEARNING_RATE = "5e-2"

CONFIGS = {
    "gpt2": {
        "model_type": "gpt2", "vocab_size": 512, "n_embd": 64, "n_layer": 2, "n_head": 4,
        "n_positions": 128, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "layer_norm_epsilon": 1e-5, "architectures": ["GPT2LMHeadModel"],
    },
    "llama": {
        "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
        "rope_theta": 10000.0, "architectures": ["LlamaForCausalLM"],
    },
    # Llama 3.1/3.2 rotary positions: base 500000 with the llama3 frequency scaling.
    "llama3": {
        "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
        "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
        "architectures": ["LlamaForCausalLM"],
    },
    # Qwen2.5: base 1e6, q/k/v biases, tied embeddings.
    "qwen2": {
        "model_type": "qwen2", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
        "rope_theta": 1000000.0, "use_sliding_window": False,
        "architectures": ["Qwen2ForCausalLM"],
    },
    # Qwen3: per-head q/k RMSNorm, head_dim 32 > hidden / heads, tied embeddings.
    "qwen3": {
        "model_type": "qwen3", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 32, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True, "rope_theta": 1000000.0,
        "architectures": ["Qwen3ForCausalLM"],
    },
    # Phi-3: fused qkv_proj (GQA slices) and gate_up_proj, untied.
    "phi3": {
        "model_type": "phi3", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
        "rope_theta": 10000.0, "pad_token_id": None, "sliding_window": 16,
        "architectures": ["Phi3ForCausalLM"],
    },
    # Gemma 2: scaled embeddings, sandwich norms, soft-capped scores and logits, a 4-token
    # window on layer 0 (eager, as transformers runs Gemma 2).
    "gemma2": {
        "model_type": "gemma2", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 32, "max_position_embeddings": 128, "query_pre_attn_scalar": 24,
        "sliding_window": 4, "architectures": ["Gemma2ForCausalLM"],
    },
    # Gemma 3: q/k norms, two rotary bases, linear scaling on the global layer. Phi-3 and
    # Gemma 3 have windows shorter than SEQ: under SDPA their sliding layers take the
    # bool window mask.
    "gemma3": {
        "model_type": "gemma3_text", "vocab_size": 512, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 128,
        "query_pre_attn_scalar": 24, "sliding_window": 16, "sliding_window_pattern": 2,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        "architectures": ["Gemma3ForCausalLM"],
    },
    # Qwen3-MoE: router softmax/top-k with renormalization, grouped_mm experts.
    "qwen3_moe": {
        "model_type": "qwen3_moe", "vocab_size": 512, "hidden_size": 64,
        "intermediate_size": 128, "moe_intermediate_size": 48, "num_experts": 8,
        "num_experts_per_tok": 2, "norm_topk_prob": True, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
        "architectures": ["Qwen3MoeForCausalLM"],
    },
    # Mixtral: fp32 routing weights, always renormalized.
    "mixtral": {
        "model_type": "mixtral", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 48,
        "num_local_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
        "architectures": ["MixtralForCausalLM"],
    },
    "bert": {
        "model_type": "bert", "vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 128,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        "layer_norm_eps": 1e-12, "num_labels": 2, "architectures": ["BertForSequenceClassification"],
    },
}


def headroom(binary, *args):
    result = subprocess.run([binary, "train", *args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"headroom train {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")


def loss_of_step(binary, common, work, step, extra=()):
    """headroom's loss on the batch of `step` (1-based), for the weights before that step."""
    report = work / f"report_{step}_{len(extra)}.json"
    headroom(binary, *common, "--steps", str(step), "--report", str(report), *extra)
    return json.loads(report.read_text())["loss_last"]


def batch(tokens, step):
    """The samples headroom trains on at `step`: windows of SEQ + 1 tokens, in order."""
    first = (step - 1) * MICRO_BATCH
    return torch.stack([
        torch.from_numpy(tokens[i * (SEQ + 1):(i + 1) * (SEQ + 1)].astype(np.int64))
        for i in range(first, first + MICRO_BATCH)
    ])


def reference_loss(model, family, config, samples):
    with torch.no_grad():
        if family == "bert":
            ids = samples[:, :SEQ]
            labels = ids[:, 0] % config["num_labels"]
            return model(input_ids=ids, token_type_ids=torch.zeros_like(ids), labels=labels).loss.item()
        # A causal LM over SEQ + 1 tokens scores positions 1..SEQ from 0..SEQ-1, as headroom does.
        return model(input_ids=samples, labels=samples).loss.item()


def check(name, ours, theirs):
    error = abs(ours - theirs) / abs(theirs)
    print(f"{name:34s} headroom {ours:.6f}  transformers {theirs:.6f}  rel. error {error:.1e}")
    return error <= TOLERANCE


def main():
    binary = sys.argv[1]
    torch.manual_seed(0)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        tokens = np.random.default_rng(0).integers(0, 512, size=20 * (SEQ + 1), dtype=np.uint16)
        data = work / "tokens.bin"
        tokens.tofile(data)
        for family, config in CONFIGS.items():
            cfg_dir = work / family
            cfg_dir.mkdir()
            (cfg_dir / "config.json").write_text(json.dumps(config))
            common = ["--model", str(cfg_dir / "config.json"), "--device", "cpu",
                      "--precision", "fp32", "--seq-len", str(SEQ), "--micro-batch",
                      str(MICRO_BATCH), "--optimizer", "adamw", "--lr", LEARNING_RATE,
                      "--data", str(data), "--data-format", "u16", "--seed", "5"]
            # 1. Full fine-tune: 2 steps saved; headroom's step-3 loss is for those weights.
            full = work / f"{family}_full"
            headroom(binary, *common, "--steps", "2", "--save", str(full))
            ours = loss_of_step(binary, common, work, 3)
            (full / "config.json").write_text(json.dumps(config))
            model = getattr(transformers, config["architectures"][0]).from_pretrained(full).eval()
            ok &= check(f"{family} full weights", ours, reference_loss(model, family, config, batch(tokens, 3)))
            # 2. LoRA on those weights: the adapter after 2 steps, headroom's step-3 loss.
            lora = work / f"{family}_lora"
            lora_args = ["--weights", str(full), "--lora-rank", "4"]
            headroom(binary, *common, *lora_args, "--steps", "2", "--save", str(lora))
            ours = loss_of_step(binary, common, work, 3, lora_args)
            peft_model = PeftModel.from_pretrained(model, lora).eval()
            ok &= check(f"{family} LoRA adapter (PEFT)", ours,
                        reference_loss(peft_model, family, config, batch(tokens, 3)))
    print("all match" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
