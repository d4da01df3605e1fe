"""The cases of fake_cuda_step.py: whole training steps (forward, backward, optimizer; K
micro-batches, 2 optimizer steps) of real transformers + PEFT models on fake CUDA tensors,
against `headroom plan --gpu h100-80gb --stack pytorch`. Fields as in
fake_cuda_cases.FakeCase, plus the optimizer and accumulation."""

import dataclasses

import fake_cuda_cases as fwd
from cases import DEEPSEEK_MLA, DELTANET_AND_ATTENTION, GPT2_QKV, LLAMA_ALL, LLAMA_QKVO
from cases import MAMBA_AND_ATTENTION, QWEN3_5_DELTANET_AND_ATTENTION, TINY_QWEN3_NEXT
from cases import TINY_BERT, TINY_GEMMA2, TINY_GEMMA3, TINY_GEMMA3_VLM, TINY_GEMMA4
from cases import TINY_GEMMA4_KV_SHARED
from cases import TINY_GPT2
from cases import TINY_LLAMA, TINY_PHI3, TINY_QWEN2, TINY_QWEN3


@dataclasses.dataclass
class StepCase(fwd.FakeCase):
    optimizer: str = "adamw"        # adamw | sgd
    optimizer_impl: str = "foreach"  # foreach (CUDA's default) | fused | for-loop
    grad_accum: int = 1
    steps: int = 2

    def plan_flags(self):
        flags = self.simulate_flags()
        flags[flags.index("--grad-accum") + 1] = str(self.grad_accum)
        flags[flags.index("--optimizer") + 1] = self.optimizer
        if self.optimizer == "adamw":
            flags += ["--optimizer-impl", self.optimizer_impl]
        return flags

    def payload(self, config_dir):
        return {"config_dir": config_dir, "task": self.task, "precision": self.precision,
                "mode": self.mode, "lora_rank": self.lora_rank,
                "lora_targets": list(self.lora_targets), "checkpoint": self.checkpoint,
                "attention": self.attention, "micro_batch": self.micro_batch,
                "seq_len": self.seq_len, "base_dtype": self.effective_base_dtype(),
                "optimizer": self.optimizer, "optimizer_impl": self.optimizer_impl,
                "grad_accum": self.grad_accum, "steps": self.steps, "images": self.images,
                "kernels": list(self.kernels), "offload": self.offload}


def real(name, config, **fields):
    return StepCase(name, config, slow=True, **fields)


WIDE_HEADS_BERT = dict(TINY_BERT, hidden_size=256, num_attention_heads=2, intermediate_size=64)

CASES = [
    # Tiny models of each family (a few seconds each).
    StepCase("tiny-gpt2 fp32 eager mb2", "gpt2.json", TINY_GPT2, attention="eager",
             micro_batch=2),
    StepCase("tiny-gpt2 amp-fp16 sdpa mb2 k2", "gpt2.json", TINY_GPT2, precision="amp-fp16",
             micro_batch=2, grad_accum=2),
    StepCase("tiny-llama fp32 sdpa mb2 fused", fwd.L1B, TINY_LLAMA, micro_batch=2,
             optimizer_impl="fused"),
    StepCase("tiny-llama bf16 lora ckpt-all sdpa mb2", fwd.L1B, TINY_LLAMA, precision="bf16",
             mode="lora", checkpoint="all", micro_batch=2),
    StepCase("tiny-qwen2 amp-bf16 eager mb2 k2", fwd.QWEN, TINY_QWEN2, precision="amp-bf16",
             attention="eager", micro_batch=2, grad_accum=2),
    StepCase("tiny-qwen3 bf16 sdpa mb2", "qwen3-0.6b.json", TINY_QWEN3, precision="bf16",
             micro_batch=2),
    StepCase("tiny-phi3 amp-bf16 lora sdpa mb2", "phi-3-mini.json", TINY_PHI3,
             precision="amp-bf16", mode="lora", lora_targets=("qkv_proj", "o_proj"),
             micro_batch=2),
    StepCase("tiny-gemma2 bf16 eager mb2", "gemma-2-2b.json", TINY_GEMMA2, precision="bf16",
             attention="eager", micro_batch=2),
    StepCase("tiny-gemma3 amp-bf16 sdpa mb2", "gemma-3-1b.json", TINY_GEMMA3,
             precision="amp-bf16", micro_batch=2),
    StepCase("tiny-bert seq-cls fp32 sdpa mb2", "bert-base-uncased.json", TINY_BERT,
             task="seq-cls", micro_batch=2),
    # Wide heads and a narrow MLP: the peak is inside attention's backward, where the
    # kernel's scratch (the +attn column) holds it.
    StepCase("tiny-bert wide-heads seq-cls fp32 sdpa mb8 s512", "bert-base-uncased.json",
             WIDE_HEADS_BERT, task="seq-cls", micro_batch=8, seq_len=512),

    # Real sizes: GPT-2 to Llama-3-70B.
    real("gpt2 fp32 eager mb2 s512", "gpt2.json", attention="eager", micro_batch=2,
         seq_len=512),
    real("gpt2 amp-fp16 sdpa mb4 s1024 k2", "gpt2.json", precision="amp-fp16", micro_batch=4,
         seq_len=1024, grad_accum=2),
    real("gpt2 fp32 lora qkv ckpt-all eager mb4 s1024", "gpt2.json", mode="lora",
         lora_targets=GPT2_QKV, checkpoint="all", attention="eager", micro_batch=4,
         seq_len=1024),
    real("bert-base seq-cls amp-bf16 sdpa mb8 s512 fused", "bert-base-uncased.json",
         task="seq-cls", precision="amp-bf16", micro_batch=8, seq_len=512,
         optimizer_impl="fused"),
    # No LoRA on a classifier: PEFT's modules_to_save deep-copies the head, and a deep copy
    # of a fake tensor lands in another FakeTensorMode ("Mixing fake modes NYI").
    real("bert-base seq-cls fp32 eager mb16 s512 for-loop", "bert-base-uncased.json",
         task="seq-cls", attention="eager", micro_batch=16, seq_len=512,
         optimizer_impl="for-loop"),
    real("qwen2.5-0.5b amp-bf16 sdpa mb2 s2048", fwd.QWEN, precision="amp-bf16",
         micro_batch=2, seq_len=2048),
    real("qwen2.5-0.5b amp-fp16 eager s1024 k2", fwd.QWEN, precision="amp-fp16",
         attention="eager", seq_len=1024, grad_accum=2),
    real("llama-3.2-1b fp32 sdpa s1024", fwd.L1B, seq_len=1024),
    # Three fake-CPU step cases (fake_cpu_cases.py, the same names and the for-loop AdamW
    # they run), whose forwards fake_cuda_cases.py also runs: docs/cuda-semantics.md sets
    # the three references side by side.
    real("llama-3.2-1b fp32 adamw sdpa s512", fwd.L1B, seq_len=512, optimizer_impl="for-loop"),
    real("llama-3-8b bf16 adamw ckpt-all s1024", fwd.L8B, precision="bf16", checkpoint="all",
         seq_len=1024, optimizer_impl="for-loop"),
    real("qwen2.5-7b bf16 lora r16 all-linear ckpt-all s2048", "qwen2.5-7b.json",
         precision="bf16", mode="lora", lora_rank=16, lora_targets=LLAMA_ALL, checkpoint="all",
         seq_len=2048, optimizer_impl="for-loop"),
    real("llama-3.2-1b bf16 ckpt-all sdpa mb2 s2048 fused", fwd.L1B, precision="bf16",
         checkpoint="all", micro_batch=2, seq_len=2048, optimizer_impl="fused"),
    real("qwen3-1.7b amp-bf16 lora qkvo ckpt-all s4096 k2", "qwen3-1.7b.json",
         precision="amp-bf16", mode="lora", lora_targets=LLAMA_QKVO, checkpoint="all",
         seq_len=4096, grad_accum=2),
    real("qwen3-8b bf16 lora all-linear sdpa s4096", fwd.Q3_8B, precision="bf16", mode="lora",
         lora_targets=LLAMA_ALL, seq_len=4096),
    # Activation offload: each block's input back on the device for its recomputation.
    # Small vocabularies, so that the peak is inside the blocks' backward, not the loss's.
    real("llama-3.2-1b vocab2048 amp-bf16 lora ckpt-all offload mb2 s4096", fwd.L1B,
         overrides={"vocab_size": 2048}, precision="amp-bf16", mode="lora", checkpoint="all",
         micro_batch=2, seq_len=4096, offload=True),
    real("llama-3.2-1b vocab2048 bf16 full sgd ckpt-all offload s4096", fwd.L1B,
         overrides={"vocab_size": 2048}, precision="bf16", optimizer="sgd", checkpoint="all",
         seq_len=4096, offload=True),
    # fp32 blocks: the first RMSNorm saves its input itself (x.float() is x), so the copy
    # brought back stays until that norm's backward.
    real("llama-3.2-1b vocab2048 fp32 lora ckpt-all offload s2048", fwd.L1B,
         overrides={"vocab_size": 2048}, mode="lora", checkpoint="all", seq_len=2048,
         offload=True),
    real("phi-3-mini bf16 lora ckpt-all sdpa s2048", fwd.PHI3_MINI, precision="bf16",
         mode="lora", lora_targets=("qkv_proj", "o_proj"), checkpoint="all", seq_len=2048),
    real("phi-3-mini amp-bf16 full sdpa s2048 fused", fwd.PHI3_MINI, precision="amp-bf16",
         seq_len=2048, optimizer_impl="fused"),
    real("gemma-2-2b amp-bf16 lora eager s2048", "gemma-2-2b.json", precision="amp-bf16",
         mode="lora", attention="eager", seq_len=2048),
    real("gemma-3-1b bf16 full sdpa s2048", fwd.G3_1B, precision="bf16", seq_len=2048),
    real("gemma-3-4b amp-bf16 lora sdpa s4096", "gemma-3-4b.json", precision="amp-bf16",
         mode="lora", seq_len=4096),
    real("llama-3-8b full amp-bf16 sdpa s2048", fwd.L8B, precision="amp-bf16", seq_len=2048),
    real("llama-3-8b bf16 lora ckpt-all s4096", fwd.L8B, precision="bf16", mode="lora",
         checkpoint="all", seq_len=4096),
    real("llama-3-8b amp-fp16 lora qkvo s2048 k2", fwd.L8B, precision="amp-fp16", mode="lora",
         lora_targets=LLAMA_QKVO, seq_len=2048, grad_accum=2),
    real("qwen3-30b-a3b bf16 lora s2048", fwd.Q3_30B_A3B, precision="bf16", mode="lora",
         seq_len=2048),
    real("gemma-2-9b bf16 full eager s1024 fused", fwd.G2_9B, precision="bf16",
         attention="eager", seq_len=1024, optimizer_impl="fused"),
    real("gemma-3-27b bf16 lora sdpa s4096", fwd.G3_27B, precision="bf16", mode="lora",
         seq_len=4096),
    real("phi-4 amp-bf16 lora qkv ckpt-all mb2 s4096", fwd.PHI4, precision="amp-bf16",
         mode="lora", lora_targets=("qkv_proj",), checkpoint="all", micro_batch=2, seq_len=4096),
    real("qwen3-32b amp-bf16 lora s4096 fused", fwd.Q3_32B, precision="amp-bf16", mode="lora",
         seq_len=4096, optimizer_impl="fused"),
    real("mixtral-8x7b bf16 lora ckpt-all s4096", fwd.MIXTRAL, precision="bf16", mode="lora",
         checkpoint="all", seq_len=4096),
    real("llama-3-70b amp-bf16 full s1024", fwd.L70B, precision="amp-bf16", seq_len=1024),
    real("llama-3-70b amp-bf16 lora ckpt-all s4096", fwd.L70B, precision="amp-bf16",
         mode="lora", checkpoint="all", seq_len=4096),
    real("llama-3-70b bf16 full ckpt-all s2048 sgd", fwd.L70B, precision="bf16",
         checkpoint="all", seq_len=2048, optimizer="sgd"),
]

# Families planned from their own code (headroom import on the fake CUDA device,
# docs/graph-file.md), at real size: `fake_cuda_step.py --imported`. Each plan imports its
# regime (tens of seconds to minutes a regime on 2 cores, cached in $HEADROOM_CACHE).
IMPORTED_CASES = [
    real("smollm3-3b bf16 lora qkvo s1024", "smollm3-3b.json", precision="bf16", mode="lora",
         lora_targets=LLAMA_QKVO, seq_len=1024),
    real("smollm3-3b amp-bf16 adamw ckpt-all mb2 s1024", "smollm3-3b.json",
         precision="amp-bf16", checkpoint="all", micro_batch=2, seq_len=1024),
    real("olmo3-7b bf16 lora r16 all-linear ckpt-all s2048", "olmo3-7b.json",
         precision="bf16", mode="lora", lora_rank=16, lora_targets=LLAMA_ALL,
         checkpoint="all", seq_len=2048),
    real("olmo3-7b amp-bf16 adamw s512", "olmo3-7b.json", precision="amp-bf16", seq_len=512),
    real("glm-4.5-air bf16 lora qkvo s512", "glm-4.5-air.json", precision="bf16", mode="lora",
         lora_targets=LLAMA_QKVO, seq_len=512),
    real("glm-4.5-air amp-bf16 adamw ckpt-all s256", "glm-4.5-air.json",
         precision="amp-bf16", checkpoint="all", seq_len=256),
    real("llama-4-scout-text bf16 lora qkvo ckpt-all mb2 s1024", "llama-4-scout-text.json",
         precision="bf16", mode="lora", lora_targets=LLAMA_QKVO, checkpoint="all",
         micro_batch=2, seq_len=1024),
    real("llama-4-scout-text amp-bf16 adamw s512", "llama-4-scout-text.json",
         precision="amp-bf16", seq_len=512),
    real("gpt-oss-120b bf16 lora qkvo eager s1024", "gpt-oss-120b.json", precision="bf16",
         mode="lora", lora_targets=LLAMA_QKVO, attention="eager", seq_len=1024),
    real("gpt-oss-120b amp-bf16 adamw eager ckpt-all s512", "gpt-oss-120b.json",
         precision="amp-bf16", attention="eager", checkpoint="all", seq_len=512),
    real("deepseek-v3 bf16 lora mla s512", "deepseek-v3.json", precision="bf16", mode="lora",
         lora_targets=DEEPSEEK_MLA, seq_len=512),
    real("deepseek-v3 amp-bf16 adamw ckpt-all s256", "deepseek-v3.json", precision="amp-bf16",
         checkpoint="all", seq_len=256),
    real("nemotron-nano-9b-v2 bf16 lora mamba+attn s1024", "nemotron-nano-9b-v2.json",
         precision="bf16", mode="lora", lora_targets=MAMBA_AND_ATTENTION, seq_len=1024),
    real("nemotron-nano-9b-v2 amp-bf16 adamw ckpt-all s1000", "nemotron-nano-9b-v2.json",
         precision="amp-bf16", checkpoint="all", seq_len=1000),
    real("granite-4.0-h-small bf16 lora mamba+attn s1024", "granite-4.0-h-small.json",
         precision="bf16", mode="lora", lora_targets=MAMBA_AND_ATTENTION, seq_len=1024),
    real("granite-4.0-h-small amp-bf16 adamw ckpt-all s600", "granite-4.0-h-small.json",
         precision="amp-bf16", checkpoint="all", seq_len=600),
    real("gemma-4-e2b-text bf16 lora qkvo s1024", "gemma-4-e2b-text.json", precision="bf16",
         mode="lora", lora_targets=LLAMA_QKVO, seq_len=1024),
    real("gemma-4-e2b-text amp-bf16 adamw ckpt-all s768", "gemma-4-e2b-text.json",
         precision="amp-bf16", checkpoint="all", seq_len=768),
    # The multimodal Gemma 3 with images (image_inputs.py), toy and Gemma-3-4B-it.
    real("tiny-gemma3-vlm bf16 lora qkvo 2 images mb2 s300", "gemma-3-4b-it.json",
         overrides=TINY_GEMMA3_VLM, precision="bf16", mode="lora", lora_targets=LLAMA_QKVO,
         micro_batch=2, seq_len=300, images=2),
    real("gemma-3-4b-it bf16 lora qkvo 1 image s1024", "gemma-3-4b-it.json",
         precision="bf16", mode="lora", lora_targets=LLAMA_QKVO, seq_len=1024, images=1),
    real("gemma-3-4b-it amp-bf16 adamw 2 images s768", "gemma-3-4b-it.json",
         precision="amp-bf16", seq_len=768, images=2),
    real("tiny-gemma4 bf16 lora qkvo ckpt-all s100", "gemma-4-e2b-text.json",
         overrides=TINY_GEMMA4, precision="bf16", mode="lora", lora_targets=LLAMA_QKVO,
         checkpoint="all", seq_len=100),
    real("tiny-gemma4 amp-bf16 adamw ckpt-all mb2 s64", "gemma-4-e2b-text.json",
         overrides=TINY_GEMMA4, precision="amp-bf16", checkpoint="all", micro_batch=2,
         seq_len=64),
    real("tiny-gemma4-kv-shared bf16 lora qkvo s100", "gemma-4-e2b-text.json",
         overrides=TINY_GEMMA4_KV_SHARED, precision="bf16", mode="lora",
         lora_targets=LLAMA_QKVO, seq_len=100),
    real("gemma-4-e2b-text kv-shared-10 bf16 lora qkvo s1024", "gemma-4-e2b-text.json",
         overrides={"num_kv_shared_layers": 10}, precision="bf16", mode="lora",
         lora_targets=LLAMA_QKVO, seq_len=1024),
    real("gemma-4-e2b-text kv-shared-10 amp-bf16 adamw s768", "gemma-4-e2b-text.json",
         overrides={"num_kv_shared_layers": 10}, precision="amp-bf16", seq_len=768),
    real("tiny-qwen3-next bf16 lora deltanet+attn s1000", "qwen3-next-80b-a3b.json",
         overrides=TINY_QWEN3_NEXT, precision="bf16", mode="lora",
         lora_targets=DELTANET_AND_ATTENTION, seq_len=1000),
    real("qwen3-next-80b-a3b bf16 lora deltanet+attn s1000", "qwen3-next-80b-a3b.json",
         precision="bf16", mode="lora", lora_targets=DELTANET_AND_ATTENTION, seq_len=1000),
    real("qwen3-next-80b-a3b amp-bf16 adamw ckpt-all s1024", "qwen3-next-80b-a3b.json",
         precision="amp-bf16", checkpoint="all", seq_len=1024),
    real("qwen3.5-35b-a3b bf16 lora deltanet+attn ckpt-all s4096", "qwen3.5-35b-a3b.json",
         precision="bf16", mode="lora", lora_targets=QWEN3_5_DELTANET_AND_ATTENTION,
         checkpoint="all", seq_len=4096),
    real("qwen3.5-35b-a3b amp-bf16 adamw s500", "qwen3.5-35b-a3b.json",
         precision="amp-bf16", seq_len=500),
    real("qwen3.5-defaults bf16 lora out_proj+qkvo s2000", "qwen3.5-defaults.json",
         precision="bf16", mode="lora", lora_targets=DELTANET_AND_ATTENTION, seq_len=2000),
    real("qwen3.5-defaults amp-bf16 adamw ckpt-all s768", "qwen3.5-defaults.json",
         precision="amp-bf16", checkpoint="all", seq_len=768),
    # With flash-linear-attention installed (--kernels fla): transformers calls fla's
    # chunk_gated_delta_rule, whose own Python runs with its Triton launches skipped
    # (models/import/triton_on_fake_cuda.py), in the reference as in the import.
    real("tiny-qwen3-next bf16 lora deltanet+attn fla mb2 s1000", "qwen3-next-80b-a3b.json",
         overrides=TINY_QWEN3_NEXT, precision="bf16", mode="lora",
         lora_targets=DELTANET_AND_ATTENTION, micro_batch=2, seq_len=1000, kernels=("fla",)),
    real("qwen3-next-80b-a3b bf16 lora deltanet+attn fla s4096", "qwen3-next-80b-a3b.json",
         precision="bf16", mode="lora", lora_targets=DELTANET_AND_ATTENTION, seq_len=4096,
         kernels=("fla",)),
    real("qwen3.5-35b-a3b amp-bf16 adamw ckpt-all fla s2000", "qwen3.5-35b-a3b.json",
         precision="amp-bf16", checkpoint="all", seq_len=2000, kernels=("fla",)),
]
