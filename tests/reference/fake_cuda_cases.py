"""The cases of fake_cuda_forward.py: real transformers + PEFT models run forward on
fake CUDA tensors, compared with `headroom simulate --gpu h100-80gb` at the end of the
first forward and at its peak. Fields as in cases.Case, plus amp-fp16; no optimizer
(the forward only)."""

import dataclasses

from cases import (BERT_QV, GPT2_QKV, LLAMA_ALL, LLAMA_QKVO, PHI3_ALL, TINY_BERT, TINY_GEMMA2,
                   TINY_GEMMA3, TINY_GEMMA3_WINDOW, TINY_GPT2, TINY_LLAMA, TINY_PHI3,
                   TINY_PHI3_WINDOW, TINY_QWEN2, TINY_QWEN3, load_hf_config)


@dataclasses.dataclass
class FakeCase:
    name: str
    config: str                 # file in configs/
    overrides: dict = dataclasses.field(default_factory=dict)
    task: str = "causal-lm"     # causal-lm | seq-cls
    precision: str = "fp32"     # fp32 | bf16 | amp-bf16 | amp-fp16
    mode: str = "full"          # full | lora | qlora (fake_nf4.py: bf16 quant storage)
    lora_rank: int = 8
    lora_targets: tuple = ("q_proj", "v_proj")
    base_dtype: str = ""        # LoRA under AMP: fp32 | bf16 | fp16 (default: the AMP dtype)
    checkpoint: str = "none"    # none | all
    attention: str = "sdpa"     # eager | sdpa
    micro_batch: int = 1
    seq_len: int = 64
    slow: bool = False          # real size: more than a few seconds
    images: int = 0             # images per sample (the multimodal Gemma 3)
    kernels: tuple = ()         # kernel packages installed (fla: flash-linear-attention)
    offload: bool = False       # checkpointed blocks' inputs in pinned host memory

    def hf_config(self):
        return load_hf_config(self.config, self.overrides, self.task)

    def amp_dtype(self):
        return {"amp-bf16": "bf16", "amp-fp16": "fp16"}.get(self.precision)

    def effective_base_dtype(self):
        """The dtype the model is loaded in (what from_config gets)."""
        if self.precision == "bf16" or self.mode == "qlora":
            return "bf16"
        if self.mode == "lora" and self.amp_dtype():
            return self.base_dtype or self.amp_dtype()
        return "fp32"

    def simulate_flags(self):
        flags = ["--gpu", "h100-80gb", "--stack", "pytorch", "--seq-len", str(self.seq_len),
                 "--micro-batch", str(self.micro_batch), "--grad-accum", "1",
                 "--precision", self.precision, "--attention", self.attention,
                 "--checkpoint", self.checkpoint, "--optimizer", "adamw"]
        if self.mode in ("lora", "qlora"):
            flags += ["--lora-rank", str(self.lora_rank),
                      "--lora-targets", ",".join(self.lora_targets)]
            flags += ["--qlora"] if self.mode == "qlora" else []
            if self.amp_dtype():
                flags += ["--base-dtype", self.effective_base_dtype()]
        if self.images:
            flags += ["--images", str(self.images)]
        if self.kernels:
            flags += ["--kernels", ",".join(self.kernels)]
        if self.offload:
            flags += ["--activation-offload"]
        return flags


QWEN = "qwen2.5-0.5b.json"
L1B = "llama-3.2-1b.json"
L8B = "llama-3-8b.json"
L70B = "llama-3-70b.json"
L31_8B = "llama-3.1-8b.json"
Q3_8B = "qwen3-8b.json"
Q3_32B = "qwen3-32b.json"
PHI4 = "phi-4.json"
G2_9B = "gemma-2-9b.json"
G3_27B = "gemma-3-27b.json"
G3_1B = "gemma-3-1b.json"
PHI3_MINI = "phi-3-mini.json"
Q3_30B_A3B = "qwen3-30b-a3b.json"
MIXTRAL = "mixtral-8x7b.json"

CASES = [
    # Tiny models of each family (a few seconds each).
    FakeCase("tiny-gpt2 fp32 eager mb2", "gpt2.json", TINY_GPT2, attention="eager", micro_batch=2),
    FakeCase("tiny-gpt2 amp-fp16 sdpa mb2", "gpt2.json", TINY_GPT2, precision="amp-fp16",
             micro_batch=2),
    FakeCase("tiny-gpt2 fp32 lora ckpt-all eager mb2", "gpt2.json", TINY_GPT2, mode="lora",
             lora_targets=GPT2_QKV, checkpoint="all", attention="eager", micro_batch=2),
    FakeCase("tiny-llama fp32 sdpa mb2", L1B, TINY_LLAMA, micro_batch=2),
    FakeCase("tiny-llama bf16 sdpa mb2", L1B, TINY_LLAMA, precision="bf16", micro_batch=2),
    FakeCase("tiny-llama amp-bf16 eager mb2", L1B, TINY_LLAMA, precision="amp-bf16",
             attention="eager", micro_batch=2),
    FakeCase("tiny-llama amp-bf16 lora qkvo ckpt-all sdpa mb2", L1B, TINY_LLAMA,
             precision="amp-bf16", mode="lora", lora_targets=LLAMA_QKVO, checkpoint="all",
             micro_batch=2),
    FakeCase("tiny-qwen2 amp-fp16 sdpa mb2", QWEN, TINY_QWEN2, precision="amp-fp16",
             micro_batch=2),
    FakeCase("tiny-qwen2 bf16 lora eager mb2", QWEN, TINY_QWEN2, precision="bf16", mode="lora",
             attention="eager", micro_batch=2),
    FakeCase("tiny-qwen3 amp-bf16 sdpa mb2", "qwen3-0.6b.json", TINY_QWEN3, precision="amp-bf16",
             micro_batch=2),
    FakeCase("tiny-phi3 bf16 lora all sdpa mb2", "phi-3-mini.json", TINY_PHI3, precision="bf16",
             mode="lora", lora_targets=PHI3_ALL, micro_batch=2),
    FakeCase("tiny-gemma2 amp-bf16 eager mb2", "gemma-2-2b.json", TINY_GEMMA2,
             precision="amp-bf16", attention="eager", micro_batch=2),
    FakeCase("tiny-gemma3 bf16 lora sdpa mb2", "gemma-3-1b.json", TINY_GEMMA3, precision="bf16",
             mode="lora", micro_batch=2),
    FakeCase("tiny-gemma3 bf16 lora sdpa window64 mb2 s256", "gemma-3-1b.json",
             TINY_GEMMA3_WINDOW, precision="bf16", mode="lora", micro_batch=2, seq_len=256),
    # fp32: the memory-efficient kernel; s = 100 pads the mask's rows to a multiple of 8.
    FakeCase("tiny-phi3 fp32 sdpa window64 mb2 s100", "phi-3-mini.json", TINY_PHI3_WINDOW,
             micro_batch=2, seq_len=100),
    FakeCase("tiny-bert seq-cls amp-bf16 sdpa mb2", "bert-base-uncased.json", TINY_BERT,
             task="seq-cls", precision="amp-bf16", micro_batch=2),
    # Real sizes.
    FakeCase("gpt2 fp32 eager mb2 s512", "gpt2.json", attention="eager", micro_batch=2,
             seq_len=512, slow=True),
    FakeCase("gpt2 amp-fp16 sdpa mb4 s1024", "gpt2.json", precision="amp-fp16", micro_batch=4,
             seq_len=1024, slow=True),
    FakeCase("bert-base seq-cls amp-bf16 sdpa mb8 s512", "bert-base-uncased.json",
             task="seq-cls", precision="amp-bf16", micro_batch=8, seq_len=512, slow=True),
    FakeCase("qwen2.5-0.5b fp32 sdpa s1024", QWEN, seq_len=1024, slow=True),
    FakeCase("qwen2.5-0.5b bf16 sdpa s1024", QWEN, precision="bf16", seq_len=1024, slow=True),
    FakeCase("qwen2.5-0.5b amp-bf16 eager s1024", QWEN, precision="amp-bf16",
             attention="eager", seq_len=1024, slow=True),
    FakeCase("qwen2.5-0.5b amp-fp16 sdpa s1024", QWEN, precision="amp-fp16", seq_len=1024,
             slow=True),
    FakeCase("qwen2.5-0.5b amp-bf16 lora r64 all-linear sdpa s1024", QWEN,
             precision="amp-bf16", mode="lora", lora_rank=64, lora_targets=LLAMA_ALL,
             seq_len=1024, slow=True),
    FakeCase("llama-3.2-1b fp32 sdpa s1024", L1B, seq_len=1024, slow=True),
    # The forwards of three fake-CPU step cases (fake_cpu_cases.py), which the fake-CUDA
    # step also runs: docs/cuda-semantics.md sets the three references side by side.
    FakeCase("llama-3.2-1b fp32 sdpa s512", L1B, seq_len=512, slow=True),
    FakeCase("llama-3-8b bf16 ckpt-all s1024", L8B, precision="bf16", checkpoint="all",
             seq_len=1024, slow=True),
    FakeCase("qwen2.5-7b bf16 lora r16 all-linear ckpt-all s2048", "qwen2.5-7b.json",
             precision="bf16", mode="lora", lora_rank=16, lora_targets=LLAMA_ALL,
             checkpoint="all", seq_len=2048, slow=True),
    FakeCase("llama-3.2-1b bf16 eager s1024", L1B, precision="bf16", attention="eager",
             seq_len=1024, slow=True),
    FakeCase("llama-3.2-1b amp-bf16 lora ckpt-all sdpa s2048", L1B, precision="amp-bf16",
             mode="lora", checkpoint="all", seq_len=2048, slow=True),
    FakeCase("llama-3-8b bf16 lora s2048", L8B, precision="bf16", mode="lora", seq_len=2048,
             slow=True),
    FakeCase("llama-3-8b bf16 lora ckpt-all s2048", L8B, precision="bf16", mode="lora",
             checkpoint="all", seq_len=2048, slow=True),
    FakeCase("llama-3-8b amp-bf16 full s4096", L8B, precision="amp-bf16", seq_len=4096,
             slow=True),
    FakeCase("llama-3-8b amp-bf16 full s8192", L8B, precision="amp-bf16", seq_len=8192,
             slow=True),
    FakeCase("llama-3-8b amp-bf16 lora s4096", L8B, precision="amp-bf16", mode="lora",
             seq_len=4096, slow=True),
    FakeCase("llama-3-8b amp-bf16 lora s8192", L8B, precision="amp-bf16", mode="lora",
             seq_len=8192, slow=True),
    FakeCase("llama-3-70b amp-bf16 lora s4096", L70B, precision="amp-bf16", mode="lora",
             seq_len=4096, slow=True),
    # Activation offload (transformers' offload=True): each checkpointed block's input leaves
    # the device for pinned host memory (save_on_cpu); the host bytes are compared too.
    FakeCase("llama-3.2-1b amp-bf16 lora ckpt-all offload s2048", L1B, precision="amp-bf16",
             mode="lora", checkpoint="all", seq_len=2048, offload=True, slow=True),
    FakeCase("qwen3-8b bf16 full ckpt-all offload s4096", Q3_8B, precision="bf16",
             checkpoint="all", seq_len=4096, offload=True, slow=True),
    FakeCase("llama-3.1-8b amp-bf16 lora ckpt-all offload mb2 s8192", L31_8B,
             precision="amp-bf16", mode="lora", checkpoint="all", micro_batch=2, seq_len=8192,
             offload=True, slow=True),
    FakeCase("llama-3.2-1b amp-bf16 full ckpt-all offload s1024", L1B, precision="amp-bf16",
             checkpoint="all", seq_len=1024, offload=True, slow=True),
    # The 2026 families at the sizes people plan for (issue 20).
    FakeCase("llama-3.1-8b amp-bf16 full s4096", L31_8B, precision="amp-bf16", seq_len=4096,
             slow=True),
    FakeCase("llama-3.1-8b bf16 lora s8192", L31_8B, precision="bf16", mode="lora",
             seq_len=8192, slow=True),
    FakeCase("qwen3-8b amp-bf16 full s4096", Q3_8B, precision="amp-bf16", seq_len=4096,
             slow=True),
    FakeCase("qwen3-8b bf16 full s8192", Q3_8B, precision="bf16", seq_len=8192, slow=True),
    FakeCase("qwen3-8b amp-bf16 lora s8192", Q3_8B, precision="amp-bf16", mode="lora",
             seq_len=8192, slow=True),
    FakeCase("qwen3-32b bf16 lora s4096", Q3_32B, precision="bf16", mode="lora", seq_len=4096,
             slow=True),
    FakeCase("qwen3-32b amp-bf16 lora s8192", Q3_32B, precision="amp-bf16", mode="lora",
             seq_len=8192, slow=True),
    FakeCase("phi-4 amp-bf16 full s4096", PHI4, precision="amp-bf16", seq_len=4096, slow=True),
    FakeCase("phi-4 bf16 lora qkv s8192", PHI4, precision="bf16", mode="lora",
             lora_targets=("qkv_proj",), seq_len=8192, slow=True),
    # Gemma 2 runs eager (transformers refuses SDPA with its soft-capped scores).
    FakeCase("gemma-2-9b amp-bf16 full eager s4096", G2_9B, precision="amp-bf16",
             attention="eager", seq_len=4096, slow=True),
    FakeCase("gemma-2-9b bf16 lora eager s8192", G2_9B, precision="bf16", mode="lora",
             attention="eager", seq_len=8192, slow=True),
    # Mixtures of experts (grouped_mm experts; every layer sparse).
    FakeCase("qwen3-30b-a3b bf16 lora s4096", Q3_30B_A3B, precision="bf16", mode="lora",
             seq_len=4096, slow=True),
    FakeCase("qwen3-30b-a3b bf16 full mb2 s2048", Q3_30B_A3B, precision="bf16", micro_batch=2,
             seq_len=2048, slow=True),
    FakeCase("mixtral-8x7b bf16 lora s4096", MIXTRAL, precision="bf16", mode="lora",
             seq_len=4096, slow=True),
    # Sliding windows shorter than the sequence under SDPA: a bool mask, converted per
    # sliding layer (cuDNN for head size <= 128, else the memory-efficient kernel), K/V
    # repeated (a view for Gemma-3-1B's one K/V head).
    FakeCase("gemma-3-27b bf16 lora sdpa s4096", G3_27B, precision="bf16", mode="lora",
             seq_len=4096, slow=True),
    FakeCase("gemma-3-27b amp-bf16 lora sdpa s8192", G3_27B, precision="amp-bf16", mode="lora",
             seq_len=8192, slow=True),
    FakeCase("gemma-3-27b bf16 full sdpa s4096", G3_27B, precision="bf16", seq_len=4096,
             slow=True),
    FakeCase("gemma-3-27b bf16 lora eager s4096", G3_27B, precision="bf16", mode="lora",
             attention="eager", seq_len=4096, slow=True),
    FakeCase("gemma-3-1b bf16 full sdpa s2048", G3_1B, precision="bf16", seq_len=2048, slow=True),
    FakeCase("phi-3-mini amp-bf16 lora qkv sdpa s4096", PHI3_MINI, precision="amp-bf16",
             mode="lora", lora_targets=("qkv_proj",), seq_len=4096, slow=True),
]
