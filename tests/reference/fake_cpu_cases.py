"""The configurations fake_cpu_step.py runs on fake CPU tensors at real size (1B-8B
parameters), and the small real runs it checks the fake count against.

No AMP case with tied embeddings: the autograd engine adds a gradient into its input
buffer in place only for a plain tensor (input_buffer.cpp, can_accumulate_inplace rejects
tensor subclasses, FakeTensor included), so on fake tensors a tied weight's two
gradients are summed out of place where real tensors sum into autocast's fresh fp32
copy in place. The real-CPU suite checks that case (gpt2 amp-bf16 ... k2)."""

import dataclasses

from cases import (DEEPSEEK_MLA, DELTANET_AND_ATTENTION, LLAMA_ALL, LLAMA_QKVO,
                   MAMBA_AND_ATTENTION, QWEN3_5_DELTANET_AND_ATTENTION, TINY_GEMMA3_VLM, TINY_GEMMA4,
                   TINY_GEMMA4_KV_SHARED, TINY_GPT2, TINY_LLAMA, TINY_QWEN3_NEXT, Case)


@dataclasses.dataclass
class FakeCase(Case):
    def fake_plan_flags(self):
        # Fake tensors see no kernel scratch: plan bf16 matmuls as the kernel that
        # allocates none (ATen's own gemm).
        return self.plan_flags(("--device", "cpu", "--cpu-bf16", "aten"))


CASES = [
    # Llama-3.2-1B (1.24B, tied embeddings).
    FakeCase("llama-3.2-1b fp32 adamw sdpa s512", "llama-3.2-1b.json", seq_len=512),
    FakeCase("llama-3.2-1b bf16 adamw ckpt-all mb2 s1024 k2", "llama-3.2-1b.json",
             precision="bf16", checkpoint="all", micro_batch=2, seq_len=1024, grad_accum=2),
    # Qwen2.5-1.5B (1.54B, tied embeddings, qkv bias).
    FakeCase("qwen2.5-1.5b fp32 adamw-foreach s512 k2", "qwen2.5-1.5b.json",
             optimizer_impl="foreach", seq_len=512, grad_accum=2),
    # Llama-3.2-3B (3.21B, tied embeddings).
    FakeCase("llama-3.2-3b bf16 adamw ckpt-all s1024", "llama-3.2-3b.json", precision="bf16",
             checkpoint="all", seq_len=1024),
    FakeCase("llama-3.2-3b amp-bf16 lora qkvo ckpt-all mb2 s1024 k2", "llama-3.2-3b.json",
             precision="amp-bf16", mode="lora", lora_targets=LLAMA_QKVO, checkpoint="all",
             micro_batch=2, seq_len=1024, grad_accum=2),
    # Qwen2.5-7B (7.62B, untied).
    FakeCase("qwen2.5-7b amp-bf16 adamw-fused mb2 s512", "qwen2.5-7b.json",
             precision="amp-bf16", optimizer_impl="fused", micro_batch=2, seq_len=512),
    FakeCase("qwen2.5-7b bf16 lora r16 all-linear ckpt-all s2048", "qwen2.5-7b.json",
             precision="bf16", mode="lora", lora_rank=16, lora_targets=LLAMA_ALL,
             checkpoint="all", seq_len=2048),
    # Llama-3-8B (8.03B, untied).
    FakeCase("llama-3-8b amp-bf16 sgd eager s256", "llama-3-8b.json", precision="amp-bf16",
             optimizer="sgd", attention="eager", seq_len=256),
    FakeCase("llama-3-8b bf16 adamw ckpt-all s1024", "llama-3-8b.json", precision="bf16",
             checkpoint="all", seq_len=1024),
    FakeCase("llama-3-8b amp-bf16 lora q,v fp32-base mb2 s512 k2", "llama-3-8b.json",
             precision="amp-bf16", mode="lora", base_dtype="fp32", micro_batch=2,
             seq_len=512, grad_accum=2),
    FakeCase("llama-3-8b fp32 lora qkvo sgd ckpt-all mb4 s1024", "llama-3-8b.json",
             mode="lora", lora_targets=LLAMA_QKVO, optimizer="sgd", checkpoint="all",
             micro_batch=4, seq_len=1024),
]

# Families planned from their own code (headroom import, docs/graph-file.md); run by
# `fake_cpu_step.py --imported` once `plan --model config.json` imports them.
IMPORTED_CASES = [
    # Families planned from their own code (headroom import, docs/graph-file.md). ctest
    # runs one case of each family (about 3 minutes with their imports); the cases marked
    # slow run by hand with --imported --with-slow.
    # SmolLM3-3B (3.08B, tied; NoPE every fourth layer), OLMo 3 7B (7.30B; sliding
    # windows of 4096 with a full layer every fourth, QK norms).
    FakeCase("smollm3-3b bf16 lora qkvo s1024", "smollm3-3b.json", precision="bf16",
             mode="lora", lora_targets=LLAMA_QKVO, seq_len=1024),
    FakeCase("smollm3-3b amp-bf16 adamw ckpt-all mb2 s1024", "smollm3-3b.json",
             precision="amp-bf16", checkpoint="all", micro_batch=2, seq_len=1024, slow=True),
    FakeCase("olmo3-7b bf16 lora r16 all-linear ckpt-all s2048", "olmo3-7b.json",
             precision="bf16", mode="lora", lora_rank=16, lora_targets=LLAMA_ALL,
             checkpoint="all", seq_len=2048),
    FakeCase("olmo3-7b amp-bf16 adamw mb2 s512", "olmo3-7b.json", precision="amp-bf16",
             micro_batch=2, seq_len=512, slow=True),
    # GLM-4.5-Air (106B, 128 routed experts of which 8 per token and a shared one; the
    # first layer dense), Llama 4 Scout's text model (108B, 16 experts and a shared one,
    # chunked attention with a NoPE layer every fourth).
    FakeCase("glm-4.5-air bf16 lora qkvo s512", "glm-4.5-air.json", precision="bf16",
             mode="lora", lora_targets=LLAMA_QKVO, seq_len=512),
    FakeCase("glm-4.5-air amp-bf16 adamw ckpt-all s256", "glm-4.5-air.json",
             precision="amp-bf16", checkpoint="all", seq_len=256, slow=True),
    FakeCase("llama-4-scout-text bf16 lora qkvo ckpt-all mb2 s1024", "llama-4-scout-text.json",
             precision="bf16", mode="lora", lora_targets=LLAMA_QKVO, checkpoint="all",
             micro_batch=2, seq_len=1024, slow=True),
    FakeCase("llama-4-scout-text amp-bf16 adamw s512", "llama-4-scout-text.json",
             precision="amp-bf16", seq_len=512),
    # DeepSeek-V3 (671B: multi-head latent attention, 256 routed experts of which 8 per
    # token and a shared one, the first three layers dense). About 6 minutes with its two
    # imports.
    # gpt-oss-120b (117B: attention sinks, 128-token sliding windows every other layer,
    # 128 experts of which 4 per token; transformers runs no SDPA for it: eager).
    FakeCase("gpt-oss-120b bf16 lora qkvo eager s1024", "gpt-oss-120b.json", precision="bf16",
             mode="lora", lora_targets=LLAMA_QKVO, attention="eager", seq_len=1024, slow=True),
    FakeCase("gpt-oss-120b amp-bf16 adamw eager ckpt-all s512", "gpt-oss-120b.json",
             precision="amp-bf16", attention="eager", checkpoint="all", seq_len=512, slow=True),
    FakeCase("deepseek-v3 bf16 lora mla s512", "deepseek-v3.json", precision="bf16",
             mode="lora", lora_targets=DEEPSEEK_MLA, seq_len=512, slow=True),
    FakeCase("deepseek-v3 amp-bf16 adamw ckpt-all s256", "deepseek-v3.json",
             precision="amp-bf16", checkpoint="all", seq_len=256, slow=True),
    # NVIDIA-Nemotron-Nano-9B-v2 (8.89B: 27 Mamba-2 layers, 4 attention layers, 25 MLPs in
    # no period; Mamba-2 in transformers' reference code, chunks of 128 tokens): a
    # sequence of whole chunks and one that is not (the padded chunks sliced).
    FakeCase("nemotron-nano-9b-v2 bf16 lora mamba+attn s1024", "nemotron-nano-9b-v2.json",
             precision="bf16", mode="lora", lora_targets=MAMBA_AND_ATTENTION, seq_len=1024),
    FakeCase("nemotron-nano-9b-v2 amp-bf16 adamw ckpt-all s1000", "nemotron-nano-9b-v2.json",
             precision="amp-bf16", checkpoint="all", seq_len=1000, slow=True),
    # Granite-4.0-H-Small (32.2B: 36 Mamba-2 layers and 4 attention layers without
    # positions, every one with 72 experts of which 10 per token and a shared one;
    # chunks of 256 tokens).
    FakeCase("granite-4.0-h-small bf16 lora mamba+attn s1024", "granite-4.0-h-small.json",
             precision="bf16", mode="lora", lora_targets=MAMBA_AND_ATTENTION, seq_len=1024,
             slow=True),
    FakeCase("granite-4.0-h-small amp-bf16 adamw ckpt-all s600", "granite-4.0-h-small.json",
             precision="amp-bf16", checkpoint="all", seq_len=600, slow=True),
    # Gemma 4 E2B's text model (5.08B: per-layer input embeddings 30 layers x 256 wide over
    # a 262k vocabulary, sliding windows of 512 with a full layer of head_dim 512 every
    # sixth, tied). The per-layer embeddings follow the depth: traced at two depths (6 and
    # 7 layers) and extrapolated to 30 (depth_scale.py).
    FakeCase("gemma-4-e2b-text bf16 lora qkvo s1024", "gemma-4-e2b-text.json",
             precision="bf16", mode="lora", lora_targets=LLAMA_QKVO, seq_len=1024, slow=True),
    FakeCase("gemma-4-e2b-text amp-bf16 adamw ckpt-all s768", "gemma-4-e2b-text.json",
             precision="amp-bf16", checkpoint="all", seq_len=768, slow=True),
    # Checkpointed, with the peak in the backward: what the K/V stores keep there
    # (kept_by_arguments, docs/graph-file.md). A toy of 6 layers.
    FakeCase("tiny-gemma4 bf16 lora qkvo ckpt-all s100", "gemma-4-e2b-text.json",
             TINY_GEMMA4, precision="bf16", mode="lora", lora_targets=LLAMA_QKVO,
             checkpoint="all", seq_len=100),
    FakeCase("tiny-gemma4 amp-bf16 adamw ckpt-all mb2 s64", "gemma-4-e2b-text.json",
             TINY_GEMMA4, precision="amp-bf16", checkpoint="all", micro_batch=2, seq_len=64,
             slow=True),
    # Gemma 4 with KV-shared layers (the config's num_kv_shared_layers): a shared layer
    # reads the K/V the last layer of its type before the shared ones stored. A toy model
    # and the E2B defaults with their last 10 layers shared (--with-slow, for ctest's
    # budget; Import.DepthScaledEqualsWholeDepth imports the toy in ctest). Checkpointing them is
    # refused by the import: a shared layer reads the dict the recomputations read again.
    FakeCase("tiny-gemma4-kv-shared bf16 lora qkvo s100", "gemma-4-e2b-text.json",
             TINY_GEMMA4_KV_SHARED, precision="bf16", mode="lora", lora_targets=LLAMA_QKVO,
             seq_len=100, slow=True),
    FakeCase("tiny-gemma4-kv-shared amp-bf16 adamw mb2 s64", "gemma-4-e2b-text.json",
             TINY_GEMMA4_KV_SHARED, precision="amp-bf16", micro_batch=2, seq_len=64,
             slow=True),
    FakeCase("gemma-4-e2b-text kv-shared-10 bf16 lora qkvo s1024", "gemma-4-e2b-text.json",
             {"num_kv_shared_layers": 10}, precision="bf16", mode="lora",
             lora_targets=LLAMA_QKVO, seq_len=1024, slow=True),
    FakeCase("gemma-4-e2b-text kv-shared-10 amp-bf16 adamw s768", "gemma-4-e2b-text.json",
             {"num_kv_shared_layers": 10}, precision="amp-bf16", seq_len=768, slow=True),
    # Qwen3-Next-80B-A3B (79.7B: three gated DeltaNet layers to one of gated attention,
    # 512 experts of which 10 per token and a shared one). The gated delta rule in
    # transformers' reference code, a Python loop over 64-token chunks, rolled
    # (loop_roll.py): a sequence of whole chunks and one that is not.
    # ctest runs the toy-size model's LoRA case (about a minute with its import); the rest
    # run with --with-slow, the second on a sequence of whole chunks (imported twice: the
    # first import finds the chunk).
    FakeCase("tiny-qwen3-next bf16 lora deltanet+attn s1000", "qwen3-next-80b-a3b.json",
             TINY_QWEN3_NEXT, precision="bf16", mode="lora",
             lora_targets=DELTANET_AND_ATTENTION, seq_len=1000),
    FakeCase("tiny-qwen3-next amp-bf16 adamw ckpt-all mb2 s512", "qwen3-next-80b-a3b.json",
             TINY_QWEN3_NEXT, precision="amp-bf16", checkpoint="all", micro_batch=2,
             seq_len=512, slow=True),
    FakeCase("qwen3-next-80b-a3b bf16 lora deltanet+attn s1000", "qwen3-next-80b-a3b.json",
             precision="bf16", mode="lora", lora_targets=DELTANET_AND_ATTENTION, seq_len=1000,
             slow=True),
    FakeCase("qwen3-next-80b-a3b amp-bf16 adamw ckpt-all s1024", "qwen3-next-80b-a3b.json",
             precision="amp-bf16", checkpoint="all", seq_len=1024, slow=True),
    # The multimodal Gemma 3 with images (image_inputs.py): Gemma-3-4B-it's SigLIP tower
    # (27 layers, 896-pixel images of 256 tokens each) beside its text model, and a toy.
    # LoRA on q,k,v,o adapts the tower's attention too (PEFT matches its q_proj, ...).
    FakeCase("tiny-gemma3-vlm bf16 lora qkvo 2 images mb2 s300", "gemma-3-4b-it.json",
             TINY_GEMMA3_VLM, precision="bf16", mode="lora", lora_targets=LLAMA_QKVO,
             micro_batch=2, seq_len=300, images=2),
    FakeCase("gemma-3-4b-it bf16 lora qkvo 1 image s1024", "gemma-3-4b-it.json",
             precision="bf16", mode="lora", lora_targets=LLAMA_QKVO, seq_len=1024, images=1,
             slow=True),
    FakeCase("gemma-3-4b-it amp-bf16 adamw 2 images s768", "gemma-3-4b-it.json",
             precision="amp-bf16", seq_len=768, images=2, slow=True),
    # Qwen3.5 (the vision-language configs: AutoModelForCausalLM builds their text model
    # alone) at transformers' defaults, and Qwen3.5-35B-A3B (256 experts of which 8 per
    # token and a shared one): the same gated DeltaNet layers as Qwen3-Next.
    # LoRA on out_proj and the attention only: layer 0 needs no gradient through its
    # scan, and runs fewer ops than the others (layer 0's own template).
    FakeCase("qwen3.5-defaults bf16 lora out_proj+qkvo s2000", "qwen3.5-defaults.json",
             precision="bf16", mode="lora", lora_targets=DELTANET_AND_ATTENTION, seq_len=2000,
             slow=True),
    FakeCase("qwen3.5-defaults amp-bf16 adamw ckpt-all s768", "qwen3.5-defaults.json",
             precision="amp-bf16", checkpoint="all", seq_len=768, slow=True),
    FakeCase("qwen3.5-35b-a3b bf16 lora deltanet+attn ckpt-all s4096", "qwen3.5-35b-a3b.json",
             precision="bf16", mode="lora", lora_targets=QWEN3_5_DELTANET_AND_ATTENTION,
             checkpoint="all", seq_len=4096, slow=True),
    FakeCase("qwen3.5-35b-a3b amp-bf16 adamw s500", "qwen3.5-35b-a3b.json",
             precision="amp-bf16", seq_len=500, slow=True),
]

# Small real runs: the fake count against PeakMeter.
REAL_CHECKS = [
    FakeCase("tiny-gpt2 fp32 adamw eager mb2", "gpt2.json", TINY_GPT2, attention="eager",
             micro_batch=2),
    FakeCase("gpt2 fp32 adamw eager s128", "gpt2.json", attention="eager", seq_len=128),
]
