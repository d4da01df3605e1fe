"""The reference configurations: real transformers + PEFT training runs that
`headroom plan` must predict. Each family runs from its published config.json
(configs/), at full size or shrunk by overrides."""

import dataclasses
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def load_hf_config(config, overrides, task):
    """The published config.json in configs/, with `overrides` applied; a classification
    task gets two labels unless the config says otherwise."""
    with open(os.path.join(HERE, "configs", config)) as f:
        cfg = json.load(f)
    cfg.update(overrides)
    if task == "seq-cls":
        cfg.setdefault("num_labels", 2)
    return cfg


def write_config(case, tmp, i):
    """The case's config.json in its own directory under `tmp`: (directory, file)."""
    config_dir = os.path.join(tmp, f"case{i}")
    os.makedirs(config_dir, exist_ok=True)
    config_path = os.path.join(config_dir, "config.json")
    with open(config_path, "w") as f:
        json.dump(case.hf_config(), f)
    return config_dir, config_path


@dataclasses.dataclass
class Case:
    name: str
    config: str                 # file in configs/
    overrides: dict = dataclasses.field(default_factory=dict)  # config.json fields replaced
    task: str = "causal-lm"     # causal-lm | seq-cls
    precision: str = "fp32"     # fp32 | amp-bf16 | bf16
    mode: str = "full"          # full | lora | qlora (bitsandbytes NF4, bf16 quant storage)
    lora_rank: int = 8
    lora_targets: tuple = ("q_proj", "v_proj")
    base_dtype: str = "bf16"    # LoRA: the dtype the frozen base is loaded in (amp-bf16)
    checkpoint: str = "none"    # none | all
    optimizer: str = "adamw"    # adamw | sgd
    optimizer_impl: str = "for-loop"  # for-loop | foreach | fused (AdamW)
    attention: str = "sdpa"     # eager | sdpa
    micro_batch: int = 1
    grad_accum: int = 1
    seq_len: int = 64
    steps: int = 2
    slow: bool = False          # real-size model: seconds to minutes on 2 cores
    # fp32 only, so both paths run the same kernels: measured on the pinned path alone
    # (keeps the CI run short).
    pinned_only: bool = False
    # Images per sample (the multimodal Gemma 3), their tokens counted in seq_len.
    images: int = 0
    # full: the model's own loss (transformers' ForCausalLMLoss over whole logits);
    # chunked:N: TRL's fused LM head (trl.trainer.utils.add_fused_lm_head, as SFTTrainer
    # adds it) with vocabulary tiles of N entries.
    loss: str = "full"
    # padded: micro_batch rows of seq_len; padding-free: one row of seq_len tokens holding
    # three samples, as transformers' DataCollatorWithFlattening makes it (micro_batch 1).
    packing: str = "padded"

    def hf_config(self):
        return load_hf_config(self.config, self.overrides, self.task)

    def plan_flags(self, target=("--device", "cpu")):
        flags = [*target, "--seq-len", str(self.seq_len),
                 "--micro-batch", str(self.micro_batch), "--grad-accum", str(self.grad_accum),
                 "--precision", self.precision, "--optimizer", self.optimizer,
                 "--checkpoint", self.checkpoint, "--attention", self.attention,
                 "--stack", "pytorch"]
        if self.optimizer == "adamw":
            flags += ["--optimizer-impl", self.optimizer_impl]
        if self.mode in ("lora", "qlora"):
            flags += ["--lora-rank", str(self.lora_rank),
                      "--lora-targets", ",".join(self.lora_targets)]
            if self.mode == "qlora":
                flags += ["--qlora"]
            if self.precision == "amp-bf16":
                flags += ["--base-dtype", self.base_dtype]
        if self.images:
            flags += ["--images", str(self.images)]
        if self.loss != "full":
            flags += ["--loss", self.loss]
        if self.packing != "padded":
            flags += ["--packing", self.packing, "--tokens-per-micro-batch", str(self.seq_len)]
        return flags


TINY_GPT2 = {"n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 512, "n_positions": 256}
TINY_LLAMA = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "num_hidden_layers": 2, "intermediate_size": 176,
              "vocab_size": 512, "tie_word_embeddings": False}
TINY_QWEN2 = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 2, "intermediate_size": 160, "vocab_size": 512,
              "max_window_layers": 2}
# Qwen3-Next at toy size: three gated DeltaNet layers and one of attention (its
# full_attention_interval), four experts of which two per token, and a shared one.
TINY_QWEN3_NEXT = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 16, "num_hidden_layers": 4, "intermediate_size": 128,
                   "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                   "linear_key_head_dim": 16, "linear_value_head_dim": 16, "num_experts": 4,
                   "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                   "shared_expert_intermediate_size": 32, "vocab_size": 512,
                   "layer_types": ["linear_attention"] * 3 + ["full_attention"]}
# Gemma 4 text at toy size without KV sharing: the last layer of each type still stores
# its K/V in shared_kv_states, which checkpointing keeps (docs/graph-file.md,
# kept_by_arguments).
# The multimodal Gemma 3 at toy size: a 2-layer SigLIP tower on 64-pixel images of 16
# tokens each beside a 4-layer text model (gemma-3-4b-it.json's other fields).
TINY_GEMMA3_VLM = {
    "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
                    "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 1,
                    "head_dim": 32, "query_pre_attn_scalar": 32, "vocab_size": 1000,
                    "sliding_window": 1024, "sliding_window_pattern": 2},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32,
                      "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                      "image_size": 64, "patch_size": 8, "vision_use_head": False},
    "mm_tokens_per_image": 16, "image_token_index": 999, "boi_token_index": 997,
    "eoi_token_index": 998}
TINY_GEMMA4 = {
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "hidden_size_per_layer_input": 8, "vocab_size": 512, "vocab_size_per_layer_input": 512,
    "sliding_window": 16, "num_kv_shared_layers": 0,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    "per_layer_config": {"05": {"head_dim": 32}}}
# Gemma 4 text at toy size with KV-shared layers: its last 4 of 12 layers read the K/V
# that the last sliding and the last full layer before them stored (kv_sharing_modes).
TINY_GEMMA4_KV_SHARED = {
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 12,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "hidden_size_per_layer_input": 8, "vocab_size": 512, "vocab_size_per_layer_input": 512,
    "sliding_window": 16, "num_kv_shared_layers": 4,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 2,
    "per_layer_config": {"05": {"head_dim": 32}, "11": {"head_dim": 32}}}
TINY_QWEN3 = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 32, "num_hidden_layers": 2, "intermediate_size": 176,
              "vocab_size": 512}
TINY_PHI3 = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
             "num_hidden_layers": 2, "intermediate_size": 176, "vocab_size": 512,
             "pad_token_id": None}
TINY_GEMMA2 = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 32, "num_hidden_layers": 2, "intermediate_size": 176,
               "vocab_size": 512, "query_pre_attn_scalar": 32, "sliding_window": 16}
TINY_GEMMA3 = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 1,
               "head_dim": 32, "num_hidden_layers": 2, "intermediate_size": 176,
               "vocab_size": 512, "query_pre_attn_scalar": 32, "sliding_window": 128,
               "sliding_window_pattern": 2, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
# Windows shorter than the sequence: under SDPA transformers then builds a boolean
# sliding-window mask, which SDPA converts per sliding layer, and repeats K/V for it.
TINY_GEMMA3_WINDOW = dict(TINY_GEMMA3, sliding_window=64)
TINY_PHI3_WINDOW = dict(TINY_PHI3, sliding_window=64)
# Mixture of experts: 8 experts, 2 per token, a different expert width from the dense one.
TINY_QWEN3_MOE = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "head_dim": 16, "num_hidden_layers": 2, "intermediate_size": 176,
                  "moe_intermediate_size": 48, "num_experts": 8, "num_experts_per_tok": 2,
                  "vocab_size": 512}
# Wide experts and a small vocabulary: the experts' rows decide the peak.
WIDE_QWEN3_MOE = dict(TINY_QWEN3_MOE, hidden_size=128, head_dim=32, moe_intermediate_size=256,
                      num_experts=16, num_experts_per_tok=4, vocab_size=256)
TINY_MIXTRAL = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                "num_hidden_layers": 2, "intermediate_size": 48, "num_local_experts": 8,
                "num_experts_per_tok": 2, "vocab_size": 512}
TINY_BERT = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
             "intermediate_size": 256, "vocab_size": 512}

GPT2_QKV = ("c_attn",)
PHI3_QKV = ("qkv_proj",)
PHI3_ALL = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
LLAMA_QKVO = ("q_proj", "k_proj", "v_proj", "o_proj")
LLAMA_ALL = LLAMA_QKVO + ("gate_proj", "up_proj", "down_proj")
DEEPSEEK_MLA = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
# PEFT refuses out_proj and conv1d of Mamba layers (peft tuners_utils: incompatible modules).
MAMBA_AND_ATTENTION = ("in_proj", "q_proj", "k_proj", "v_proj", "o_proj")
# Qwen3-Next's and Qwen3.5's gated DeltaNet projections beside the attention's.
DELTANET_AND_ATTENTION = ("in_proj_qkvz", "out_proj", "q_proj", "k_proj", "v_proj", "o_proj")
# Qwen3.5 projects q, k, v and the gate z apart.
QWEN3_5_DELTANET_AND_ATTENTION = ("in_proj_qkv", "in_proj_z", "out_proj", "q_proj", "k_proj",
                                  "v_proj", "o_proj")
BERT_QV = ("query", "value")

CASES = [
    # Real sizes.
    Case("gpt2 fp32 adamw eager mb2 s256", "gpt2.json", attention="eager", micro_batch=2,
         seq_len=256, slow=True),
    Case("gpt2 fp32 sgd ckpt-all eager mb2 s256", "gpt2.json", optimizer="sgd",
         checkpoint="all", attention="eager", micro_batch=2, seq_len=256, slow=True),
    Case("bert-base seq-cls fp32 sgd eager mb4 s128", "bert-base-uncased.json", task="seq-cls",
         optimizer="sgd", attention="eager", micro_batch=4, seq_len=128, slow=True),
    Case("qwen2.5-0.5b lora r16 q,v fp32 sdpa s128", "qwen2.5-0.5b.json", mode="lora",
         lora_rank=16, seq_len=128, slow=True),
    Case("qwen3-0.6b lora r16 q,v fp32 sdpa s128", "qwen3-0.6b.json", mode="lora",
         lora_rank=16, seq_len=128, slow=True, pinned_only=True),
    Case("qwen3-0.6b fp32 sgd ckpt-all sdpa s64", "qwen3-0.6b.json", optimizer="sgd",
         checkpoint="all", slow=True, pinned_only=True),
    # Phi-3-mini and Gemma 3 1B at their real widths and vocabularies, with fewer of their
    # identical layers (all 32 of Phi-3-mini took 4 minutes of the suite's CPU time): 4
    # of 32, and 6 of 26 (Gemma's five sliding-window layers and one global, its pattern).
    # The fake-tensor suites run both families at full depth.
    Case("phi-3-mini 4/32 layers lora r16 qkv fp32 sdpa s64", "phi-3-mini.json",
         {"num_hidden_layers": 4}, mode="lora", lora_rank=16, lora_targets=PHI3_QKV, slow=True,
         pinned_only=True),
    Case("gemma-3-1b 6/26 layers lora r16 q,v fp32 sdpa s128", "gemma-3-1b.json",
         {"num_hidden_layers": 6}, mode="lora", lora_rank=16, seq_len=128, slow=True,
         pinned_only=True),
    Case("gemma-3-1b 6/26 layers fp32 sgd ckpt-all sdpa s64", "gemma-3-1b.json",
         {"num_hidden_layers": 6}, optimizer="sgd", checkpoint="all", slow=True,
         pinned_only=True),
    # Real-size bf16 kernels (AMP: every linear, lm_head included, in bf16). Small token
    # count: on a CPU without AVX-512, ATen's own bf16 gemm runs (about 1 GFLOP/s on 2
    # cores), so this one case takes a minute or more there, on each path.
    Case("gpt2 amp-bf16 adamw eager mb1 s16 k2", "gpt2.json", precision="amp-bf16",
         attention="eager", micro_batch=1, seq_len=16, grad_accum=2, slow=True),
    # GPT-2 family, tiny.
    Case("tiny-gpt2 fp32 adamw-foreach eager mb1 k2", "gpt2.json", TINY_GPT2,
         optimizer_impl="foreach", attention="eager", grad_accum=2),
    Case("tiny-gpt2 amp-bf16 adamw eager mb2 k2", "gpt2.json", TINY_GPT2, precision="amp-bf16",
         attention="eager", micro_batch=2, grad_accum=2),
    Case("tiny-gpt2 bf16 sgd ckpt-all eager mb4", "gpt2.json", TINY_GPT2, precision="bf16",
         optimizer="sgd", checkpoint="all", attention="eager", micro_batch=4),
    Case("tiny-gpt2 fp32 lora adamw ckpt-all eager mb2", "gpt2.json", TINY_GPT2, mode="lora",
         lora_targets=GPT2_QKV, checkpoint="all", attention="eager", micro_batch=2),
    Case("tiny-gpt2 amp-bf16 lora sgd eager mb3", "gpt2.json", TINY_GPT2, precision="amp-bf16",
         mode="lora", lora_targets=GPT2_QKV, optimizer="sgd", attention="eager", micro_batch=3),
    Case("tiny-gpt2 fp32 adamw-fused eager mb2", "gpt2.json", TINY_GPT2, optimizer_impl="fused",
         attention="eager", micro_batch=2),
    Case("tiny-gpt2 fp32 sgd ckpt-all eager mb2 k2", "gpt2.json", TINY_GPT2, optimizer="sgd",
         checkpoint="all", attention="eager", micro_batch=2, grad_accum=2),
    Case("tiny-gpt2 fp32 lora adamw eager mb2", "gpt2.json", TINY_GPT2, mode="lora",
         lora_targets=GPT2_QKV, attention="eager", micro_batch=2),
    # Llama family (Llama-3.2 config: GQA, llama3 rope scaling), tiny.
    Case("tiny-llama fp32 adamw sdpa mb2 k2", "llama-3.2-1b.json", TINY_LLAMA, micro_batch=2,
         grad_accum=2),
    Case("tiny-llama fp32 adamw-foreach eager mb1", "llama-3.2-1b.json", TINY_LLAMA,
         optimizer_impl="foreach", attention="eager"),
    Case("tiny-llama amp-bf16 adamw ckpt-all mb2", "llama-3.2-1b.json", TINY_LLAMA,
         precision="amp-bf16", checkpoint="all", micro_batch=2),
    Case("tiny-llama bf16 adamw sdpa mb4", "llama-3.2-1b.json", TINY_LLAMA, precision="bf16",
         micro_batch=4),
    Case("tiny-llama amp-bf16 lora qkvo bf16-base mb2 k2", "llama-3.2-1b.json", TINY_LLAMA,
         precision="amp-bf16", mode="lora", lora_targets=LLAMA_QKVO, micro_batch=2,
         grad_accum=2),
    Case("tiny-llama amp-bf16 lora fp32-base mb2", "llama-3.2-1b.json", TINY_LLAMA,
         precision="amp-bf16", mode="lora", base_dtype="fp32", micro_batch=2),
    Case("tiny-llama fp32 lora sgd ckpt-all eager mb3", "llama-3.2-1b.json", TINY_LLAMA,
         mode="lora", optimizer="sgd", checkpoint="all", attention="eager", micro_batch=3),
    # QLoRA: bitsandbytes' NF4 base on its CPU backend (bf16 quant storage), LoRA on top.
    Case("tiny-llama bf16 qlora adamw sdpa mb2", "llama-3.2-1b.json", TINY_LLAMA,
         precision="bf16", mode="qlora", micro_batch=2),
    Case("tiny-llama bf16 qlora all ckpt-all mb2 k2", "llama-3.2-1b.json", TINY_LLAMA,
         precision="bf16", mode="qlora", lora_targets=LLAMA_ALL, checkpoint="all",
         micro_batch=2, grad_accum=2),
    Case("tiny-qwen2 amp-bf16 qlora qkvo mb3", "qwen2.5-0.5b.json", TINY_QWEN2,
         precision="amp-bf16", mode="qlora", lora_targets=LLAMA_QKVO, micro_batch=3),
    Case("tiny-llama fp32 sgd ckpt-all sdpa mb2", "llama-3.2-1b.json", TINY_LLAMA,
         optimizer="sgd", checkpoint="all", micro_batch=2),
    Case("tiny-llama bf16 sgd eager mb2", "llama-3.2-1b.json", TINY_LLAMA, precision="bf16",
         optimizer="sgd", attention="eager", micro_batch=2),
    # Qwen2 family (tied embeddings, qkv bias), tiny.
    Case("tiny-qwen2 fp32 adamw sdpa mb2", "qwen2.5-0.5b.json", TINY_QWEN2, micro_batch=2),
    Case("tiny-qwen2 amp-bf16 sgd eager mb1 k2", "qwen2.5-0.5b.json", TINY_QWEN2,
         precision="amp-bf16", optimizer="sgd", attention="eager", grad_accum=2),
    Case("tiny-qwen2 bf16 lora adamw ckpt-all mb2", "qwen2.5-0.5b.json", TINY_QWEN2,
         precision="bf16", mode="lora", checkpoint="all", micro_batch=2),
    Case("tiny-qwen2 fp32 lora adamw-foreach sdpa mb4", "qwen2.5-0.5b.json", TINY_QWEN2,
         mode="lora", optimizer_impl="foreach", micro_batch=4),
    Case("tiny-qwen2 amp-bf16 adamw-foreach sdpa mb2", "qwen2.5-0.5b.json", TINY_QWEN2,
         precision="amp-bf16", optimizer_impl="foreach", micro_batch=2),
    Case("tiny-qwen2 fp32 adamw eager mb3 k2", "qwen2.5-0.5b.json", TINY_QWEN2,
         attention="eager", micro_batch=3, grad_accum=2),
    # Qwen3 family (per-head q/k RMSNorm, head_dim wider than hidden / heads, tied), tiny.
    Case("tiny-qwen3 fp32 adamw sdpa mb2 k2", "qwen3-0.6b.json", TINY_QWEN3, micro_batch=2,
         grad_accum=2),
    Case("tiny-qwen3 bf16 adamw eager mb2", "qwen3-0.6b.json", TINY_QWEN3, precision="bf16",
         attention="eager", micro_batch=2),
    Case("tiny-qwen3 amp-bf16 lora qkvo ckpt-all mb2", "qwen3-0.6b.json", TINY_QWEN3,
         precision="amp-bf16", mode="lora", lora_targets=LLAMA_QKVO, checkpoint="all",
         micro_batch=2),
    Case("tiny-qwen3 fp32 lora sgd eager mb3", "qwen3-0.6b.json", TINY_QWEN3, mode="lora",
         optimizer="sgd", attention="eager", micro_batch=3),
    # Phi-3 family (fused qkv_proj and gate_up_proj, sliding_window 2047 > s), tiny.
    Case("tiny-phi3 fp32 adamw sdpa mb2 k2", "phi-3-mini.json", TINY_PHI3, micro_batch=2,
         grad_accum=2),
    Case("tiny-phi3 bf16 adamw eager mb2", "phi-3-mini.json", TINY_PHI3, precision="bf16",
         attention="eager", micro_batch=2),
    Case("tiny-phi3 amp-bf16 lora all ckpt-all mb2", "phi-3-mini.json", TINY_PHI3,
         precision="amp-bf16", mode="lora", lora_targets=PHI3_ALL, checkpoint="all",
         micro_batch=2),
    Case("tiny-phi3 fp32 lora qkv sgd eager mb3", "phi-3-mini.json", TINY_PHI3, mode="lora",
         lora_targets=PHI3_QKV, optimizer="sgd", attention="eager", micro_batch=3),
    # Gemma 2 (eager only: soft-capped scores and logits, a 16-token window), tiny.
    Case("tiny-gemma2 fp32 adamw eager mb2 k2", "gemma-2-2b.json", TINY_GEMMA2,
         attention="eager", micro_batch=2, grad_accum=2),
    Case("tiny-gemma2 bf16 adamw eager mb2", "gemma-2-2b.json", TINY_GEMMA2, precision="bf16",
         attention="eager", micro_batch=2),
    Case("tiny-gemma2 amp-bf16 lora qkvo ckpt-all eager mb2", "gemma-2-2b.json", TINY_GEMMA2,
         precision="amp-bf16", mode="lora", lora_targets=LLAMA_QKVO, checkpoint="all",
         attention="eager", micro_batch=2),
    # Gemma 3 text (per-head q/k norms, two rotary bases, window longer than s), tiny.
    Case("tiny-gemma3 fp32 adamw sdpa mb2 k2", "gemma-3-1b.json", TINY_GEMMA3, micro_batch=2,
         grad_accum=2),
    Case("tiny-gemma3 bf16 sgd eager mb2", "gemma-3-1b.json", TINY_GEMMA3, precision="bf16",
         optimizer="sgd", attention="eager", micro_batch=2),
    Case("tiny-gemma3 amp-bf16 lora ckpt-all sdpa mb2", "gemma-3-1b.json", TINY_GEMMA3,
         precision="amp-bf16", mode="lora", checkpoint="all", micro_batch=2),
    Case("tiny-gemma3 fp32 lora sgd sdpa mb3", "gemma-3-1b.json", TINY_GEMMA3, mode="lora",
         optimizer="sgd", micro_batch=3),
    # Sliding windows shorter than the sequence under SDPA (a boolean mask, K/V repeated).
    Case("tiny-gemma3 fp32 adamw sdpa window64 mb2 s256", "gemma-3-1b.json", TINY_GEMMA3_WINDOW,
         micro_batch=2, seq_len=256, pinned_only=True),
    Case("tiny-gemma3 amp-bf16 lora ckpt-all sdpa window64 mb2 s256", "gemma-3-1b.json",
         TINY_GEMMA3_WINDOW, precision="amp-bf16", mode="lora", checkpoint="all", micro_batch=2,
         seq_len=256),
    Case("tiny-phi3 bf16 adamw sdpa window64 mb2 s256", "phi-3-mini.json", TINY_PHI3_WINDOW,
         precision="bf16", micro_batch=2, seq_len=256),
    # Mixture of experts (router softmax/top-k, grouped_mm experts), tiny.
    Case("tiny-qwen3-moe fp32 adamw sdpa mb2 k2", "qwen3-30b-a3b.json", TINY_QWEN3_MOE,
         micro_batch=2, grad_accum=2, pinned_only=True),
    Case("tiny-qwen3-moe amp-bf16 lora qkvo ckpt-all mb2", "qwen3-30b-a3b.json", TINY_QWEN3_MOE,
         precision="amp-bf16", mode="lora", lora_targets=LLAMA_QKVO, checkpoint="all",
         micro_batch=2),
    Case("wide-qwen3-moe bf16 adamw eager mb2 s128", "qwen3-30b-a3b.json", WIDE_QWEN3_MOE,
         precision="bf16", attention="eager", micro_batch=2, seq_len=128),
    Case("wide-qwen3-moe amp-bf16 lora ckpt-all mb2 s128", "qwen3-30b-a3b.json", WIDE_QWEN3_MOE,
         precision="amp-bf16", mode="lora", checkpoint="all", micro_batch=2, seq_len=128),
    Case("tiny-mixtral amp-bf16 adamw sdpa mb2", "mixtral-8x7b.json", TINY_MIXTRAL,
         precision="amp-bf16", micro_batch=2),
    Case("tiny-mixtral bf16 lora sgd mb3", "mixtral-8x7b.json", TINY_MIXTRAL, precision="bf16",
         mode="lora", optimizer="sgd", micro_batch=3),
    # TRL's chunked loss (the fused LM head SFTTrainer adds): vocabulary tiles narrower than,
    # equal to and not dividing the vocabulary; a trainable and a frozen head, tied and
    # untied; Gemma 2's soft-capped logits; more tokens than one 4096-token tile.
    Case("tiny-llama fp32 adamw sdpa mb2 chunked:128", "llama-3.2-1b.json", TINY_LLAMA,
         micro_batch=2, loss="chunked:128", pinned_only=True),
    Case("tiny-llama amp-bf16 lora qkvo mb2 chunked:128", "llama-3.2-1b.json", TINY_LLAMA,
         precision="amp-bf16", mode="lora", lora_targets=LLAMA_QKVO, micro_batch=2,
         loss="chunked:128"),
    Case("tiny-qwen2 fp32 lora adamw mb1 chunked:512", "qwen2.5-0.5b.json", TINY_QWEN2,
         mode="lora", loss="chunked:512", pinned_only=True),
    Case("tiny-qwen3 amp-bf16 adamw mb2 k2 chunked:200", "qwen3-0.6b.json", TINY_QWEN3,
         precision="amp-bf16", micro_batch=2, grad_accum=2, loss="chunked:200"),
    Case("tiny-gemma2 fp32 adamw eager mb2 chunked:128", "gemma-2-2b.json", TINY_GEMMA2,
         attention="eager", micro_batch=2, loss="chunked:128", pinned_only=True),
    Case("tiny-llama bf16 sgd sdpa mb4 chunked:128", "llama-3.2-1b.json", TINY_LLAMA,
         precision="bf16", optimizer="sgd", micro_batch=4, loss="chunked:128"),
    Case("tiny-llama fp32 lora sgd ckpt-all mb3 chunked:128", "llama-3.2-1b.json", TINY_LLAMA,
         mode="lora", optimizer="sgd", checkpoint="all", micro_batch=3, loss="chunked:128",
         pinned_only=True),
    Case("tiny-gemma3 amp-bf16 lora ckpt-all mb2 chunked:256", "gemma-3-1b.json", TINY_GEMMA3,
         precision="amp-bf16", mode="lora", checkpoint="all", micro_batch=2, loss="chunked:256"),
    Case("tiny-llama fp32 lora adamw mb1 s4200 chunked:32768", "llama-3.2-1b.json", TINY_LLAMA,
         mode="lora", seq_len=4200, loss="chunked:32768", pinned_only=True),
    # Padding-free rows (DataCollatorWithFlattening): without a cache transformers masks
    # the samples apart (one bool [s, s] mask per kind of layer); with the DynamicCache
    # (no checkpointing, the model's own loss) it does not see them, and makes no mask.
    Case("tiny-llama fp32 adamw ckpt-all padding-free s256", "llama-3.2-1b.json", TINY_LLAMA,
         checkpoint="all", seq_len=256, packing="padding-free", pinned_only=True),
    Case("tiny-llama amp-bf16 lora qkvo ckpt-all padding-free s384", "llama-3.2-1b.json",
         TINY_LLAMA, precision="amp-bf16", mode="lora", lora_targets=LLAMA_QKVO,
         checkpoint="all", seq_len=384, packing="padding-free"),
    Case("tiny-qwen3 bf16 sgd padding-free s256 (cache: no mask)", "qwen3-0.6b.json",
         TINY_QWEN3, precision="bf16", optimizer="sgd", seq_len=256, packing="padding-free"),
    Case("tiny-gemma3 amp-bf16 lora ckpt-all padding-free s256", "gemma-3-1b.json", TINY_GEMMA3,
         precision="amp-bf16", mode="lora", checkpoint="all", seq_len=256,
         packing="padding-free"),
    Case("tiny-phi3 fp32 lora ckpt-all padding-free s200", "phi-3-mini.json", TINY_PHI3,
         mode="lora", lora_targets=PHI3_QKV, checkpoint="all", seq_len=200,
         packing="padding-free", pinned_only=True),
    Case("tiny-llama amp-bf16 lora padding-free s300 chunked:128", "llama-3.2-1b.json",
         TINY_LLAMA, precision="amp-bf16", mode="lora", seq_len=300, packing="padding-free",
         loss="chunked:128"),
    Case("tiny-qwen3-moe amp-bf16 lora qkvo ckpt-all padding-free s192", "qwen3-30b-a3b.json",
         TINY_QWEN3_MOE, precision="amp-bf16", mode="lora", lora_targets=LLAMA_QKVO,
         checkpoint="all", seq_len=192, packing="padding-free"),
    # BERT sequence classification, tiny.
    Case("tiny-bert fp32 adamw eager mb2", "bert-base-uncased.json", TINY_BERT, task="seq-cls",
         attention="eager", micro_batch=2),
    Case("tiny-bert fp32 adamw-foreach eager mb4 k2", "bert-base-uncased.json", TINY_BERT,
         task="seq-cls", optimizer_impl="foreach", attention="eager", micro_batch=4,
         grad_accum=2),
    Case("tiny-bert amp-bf16 sgd ckpt-all eager mb2", "bert-base-uncased.json", TINY_BERT,
         task="seq-cls", precision="amp-bf16", optimizer="sgd", checkpoint="all",
         attention="eager", micro_batch=2),
    Case("tiny-bert bf16 lora adamw eager mb1", "bert-base-uncased.json", TINY_BERT,
         task="seq-cls", precision="bf16", mode="lora", lora_targets=BERT_QV, attention="eager"),
    Case("tiny-bert amp-bf16 lora eager mb4", "bert-base-uncased.json", TINY_BERT,
         task="seq-cls", precision="amp-bf16", mode="lora", lora_targets=BERT_QV,
         attention="eager", micro_batch=4),
    Case("tiny-bert fp32 sgd ckpt-all eager mb2", "bert-base-uncased.json", TINY_BERT,
         task="seq-cls", optimizer="sgd", checkpoint="all", attention="eager", micro_batch=2),
    Case("tiny-bert fp32 lora adamw eager mb2", "bert-base-uncased.json", TINY_BERT,
         task="seq-cls", mode="lora", lora_targets=BERT_QV, attention="eager", micro_batch=2),
]
