"""One reference run: a training loop written the way a transformers + PEFT user writes
it, measured with PeakMeter. Prints one JSON line: measured peak bytes and its phase.

    python3 hf_training_run.py '{"config": "configs/gpt2.json", "precision": "fp32", ...}'

The keys are those of cases.Case (see there); this script is run in a fresh process
per case so that nothing from an earlier case is live or cached.
"""

import contextlib
import json
import os
import sys
import time

import torch

from peak_meter import PeakMeter


def build_model(case, hf_config):
    import transformers

    auto = (transformers.AutoModelForSequenceClassification if case["task"] == "seq-cls"
            else transformers.AutoModelForCausalLM)
    dtype = torch.float32
    if case["precision"] == "bf16":
        dtype = torch.bfloat16
    elif case["mode"] == "lora" and case["precision"] == "amp-bf16":
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[case["base_dtype"]]
    if case["mode"] == "qlora":
        model = quantized_model(auto, hf_config, case)
    else:
        model = auto.from_config(hf_config, attn_implementation=case["attention"], dtype=dtype)
    return prepare_for_training(model, case)


def quantized_model(auto, hf_config, case):
    """QLoRA's base as PEFT's and accelerate's guides load it: bitsandbytes NF4 with double
    quantization, bf16 compute and bf16 quantized storage (`bnb_4bit_quant_storage`, which
    FSDP needs to shard it), the rest in bf16. from_pretrained quantizes while loading, so
    random weights are saved first (outside the measured region)."""
    import tempfile

    import transformers

    quantization = transformers.BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_quant_storage=torch.bfloat16)
    def load(weights):
        return auto.from_pretrained(weights, quantization_config=quantization,
                                    attn_implementation=case["attention"], dtype=torch.bfloat16)

    if torch.distributed.is_initialized():
        # transformers saves on rank 0 alone (`should_save_on_this_rank`): one folder for all.
        weights = os.path.join(case["config_dir"], "bnb-weights")
        auto.from_config(hf_config, dtype=torch.bfloat16).save_pretrained(weights)
        torch.distributed.barrier()
        return load(weights)
    with tempfile.TemporaryDirectory() as weights:
        auto.from_config(hf_config, dtype=torch.bfloat16).save_pretrained(weights)
        return load(weights)


def add_chunked_loss(model, loss):
    """TRL's fused LM head, as SFTTrainer 1.16 adds it (sft_trainer.py: before PEFT wraps the
    model, with the outputs its metrics read), its vocabulary tile set to N for chunked:N
    (add_fused_lm_head passes the module's _CHUNKED_LOGPROB_CHUNK_SIZE)."""
    from trl.trainer import utils as trl_utils

    trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE = int(loss.split(":", 1)[1])
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))


def prepare_for_training(model, case):
    """Train mode, gradient checkpointing, TRL's chunked loss and LoRA adapters as the case
    asks, the way a transformers + PEFT (+ TRL) user sets them up."""
    model.train()
    if case.get("loss", "full") != "full":
        add_chunked_loss(model, case["loss"])
    if case["checkpoint"] == "all":
        # offload: transformers' save_on_cpu(pin_memory=True) around each block's checkpoint
        # (modeling_utils.py _activation_checkpointing_enable).
        model.activation_checkpointing_enable(
            activation_checkpointing_kwargs={"use_reentrant": False},
            offload=bool(case.get("offload")))
    if case["mode"] in ("lora", "qlora"):
        import peft

        task = peft.TaskType.SEQ_CLS if case["task"] == "seq-cls" else peft.TaskType.CAUSAL_LM
        lora = peft.LoraConfig(r=case["lora_rank"], lora_alpha=2 * case["lora_rank"],
                               lora_dropout=0.0, target_modules=case["lora_targets"],
                               task_type=task)
        model = peft.get_peft_model(model, lora)
    return model


def build_optimizer(case, params):
    if case["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    impl = case["optimizer_impl"]
    return torch.optim.AdamW(params, lr=1e-4, foreach=impl == "foreach", fused=impl == "fused")


class CudaMeter:
    """CUDA: the caching allocator's own statistics (everything live is counted)."""

    def __init__(self):
        self.peak_bytes = self.reserved_peak_bytes = self.live_before_bytes = 0
        self.peak_phase = "not recorded on CUDA"

    def __enter__(self):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        self.live_before_bytes = torch.cuda.memory_allocated()
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        self.peak_bytes = torch.cuda.max_memory_allocated()
        self.reserved_peak_bytes = torch.cuda.max_memory_reserved()
        return False

    def phase(self, name):
        return contextlib.nullcontext()


class Stopwatch:
    """No measurement of memory: the seconds the steps take (for bench/train_vs_hf.py)."""

    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._start
        return False

    def phase(self, name):
        return contextlib.nullcontext()


def gemma3_image_batch(hf_config, ids, images, gen):
    """What Gemma3Processor (processing_gemma3.py) makes of `images` images per sample, put
    first in each row of `ids`: "\\n\\n" <boi> mm_tokens_per_image x <image> <eoi> "\\n\\n"
    per image (full_image_sequence), pixel_values in fp32 at the vision tower's size, and
    token_type_ids 1 on the image tokens."""
    tokens = hf_config.mm_tokens_per_image
    for k in range(images):
        start = k * (tokens + 4) + 2
        ids[:, start - 1] = hf_config.boi_token_index
        ids[:, start:start + tokens] = hf_config.image_token_id
        ids[:, start + tokens] = hf_config.eoi_token_index
    vision = hf_config.vision_config
    pixel_values = torch.rand(ids.shape[0] * images, vision.num_channels, vision.image_size,
                              vision.image_size, generator=gen, device=ids.device)
    return {"pixel_values": pixel_values,
            "token_type_ids": (ids == hf_config.image_token_id).long()}


def padding_free_batch(ids):
    """What DataCollatorWithFlattening makes of three samples filling one row of `ids`' length
    (data_collator.py): their tokens side by side, labels of their own with -100 at each
    sample's first token, position_ids restarting at 0 for each."""
    total = ids.shape[1]
    lengths = [total // 3, total // 3, total - 2 * (total // 3)]
    labels = ids.clone()
    starts = [sum(lengths[:k]) for k in range(3)]
    labels[:, starts] = -100
    positions = torch.cat([torch.arange(n, device=ids.device) for n in lengths]).unsqueeze(0)
    return labels, {"position_ids": positions}


def run(case, meter):
    """Builds the model and optimizer, then trains case["steps"] optimizer steps inside
    `meter` (a context with phase(name))."""
    device = case.get("device", "cpu")
    torch.manual_seed(0)
    torch.set_num_threads(int(case.get("threads", 1)))
    import transformers

    hf_config = transformers.AutoConfig.from_pretrained(case["config_dir"])
    model = build_model(case, hf_config).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = build_optimizer(case, params)
    b, s, accum = case["micro_batch"], case["seq_len"], case["grad_accum"]
    # A vision-language config (Qwen3.5) keeps it in its text config, the one
    # AutoModelForCausalLM builds its model from.
    vocab = hf_config.get_text_config().vocab_size
    gen = torch.Generator(device=device).manual_seed(1)
    autocast = case["precision"] == "amp-bf16"

    with meter:
        for _ in range(case["steps"]):
            for _ in range(accum):
                with meter.phase("forward"):
                    # Text tokens only, where a sample has images (their token ids are
                    # inside Gemma 3's vocabulary).
                    text_vocab = min(vocab, hf_config.image_token_id) if case.get("images") else vocab
                    ids = torch.randint(0, text_vocab, (b, s), generator=gen, device=device)
                    images = (gemma3_image_batch(hf_config, ids, case["images"], gen)
                              if case.get("images") else {})
                    if case["task"] == "seq-cls":
                        labels = torch.randint(0, hf_config.num_labels, (b,), generator=gen,
                                               device=device)
                    elif case.get("packing", "padded") == "padding-free":
                        labels, packed = padding_free_batch(ids)
                        images = dict(images, **packed)
                    else:
                        labels = ids
                    fused = {"fused_lm_head": True} if case.get("loss", "full") != "full" else {}
                    with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
                        loss = model(input_ids=ids, labels=labels, **images, **fused).loss / accum
                with meter.phase("backward"):
                    loss.backward()
                del loss, ids, labels, images
            with meter.phase("optimizer step"):
                optimizer.step()
            with meter.phase("zero_grad"):
                optimizer.zero_grad(set_to_none=True)
    return meter


def measure(case):
    meter = run(case, CudaMeter() if case.get("device", "cpu") == "cuda" else PeakMeter())
    return {"measured_peak_bytes": meter.peak_bytes, "phase": meter.peak_phase,
            "live_before_bytes": meter.live_before_bytes,
            "measured_reserved_bytes": getattr(meter, "reserved_peak_bytes", None)}


def serve():
    """CPU cases in children forked from this process (fork_server.py), torch and
    transformers imported once. Not peft: importing it makes two 0-dim tensors, which a
    full fine-tune's fresh process does not have (the LoRA cases import it themselves)."""
    import fork_server
    fork_server.serve(measure)


def main():
    if sys.argv[1:] == ["--serve"]:
        return serve()
    print(json.dumps(measure(json.loads(sys.argv[1]))))


if __name__ == "__main__":
    main()
