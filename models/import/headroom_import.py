"""headroom import: a model's training step recorded from its own transformers code.

    python3 headroom_import.py CONFIG.json --out GRAPH.json [--precision bf16]
        [--lora-rank 8 --lora-targets q_proj,v_proj] [--attention sdpa]

Runs the model at a small depth (traced_layers.py: one period of its layer pattern plus
one layer, or the first two layers of each kind) on fake tensors at a few micro-batches
and sequence lengths, records every op, storage, save and gradient (step_recorder.py),
lifts the recordings to a graph file (graph_lift.py, docs/graph-file.md) and writes it
atomically. Exit 2, with the op, the module and the model_type named, when something
cannot be lifted.
"""

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' deprecations

FORMAT_VERSION = 2
# (b, s) traced: the first six determine the fit in b and s, the last two check it. A
# micro-batch of one runs another program (a [1, s] slice is contiguous, so transformers'
# loss makes no copy of the shifted labels): it is traced at its own points, fitted in s.
# The last point, past 256 tokens, catches sizes padded to a chunk of up to 256 (Mamba-2's
# and the gated delta rule's reference code pad the sequence to whole chunks): the first
# points would fit them as constants.
SAMPLE_POINTS = [(2, 32), (3, 32), (2, 48), (3, 48), (2, 80), (3, 80), (4, 112), (3, 304)]
SINGLE_SAMPLE_POINTS = [(1, 32), (1, 48), (1, 80), (1, 112), (1, 304)]
# Mamba-2's reference code splits the sequence into chunks (chunk_size: Mamba-2,
# Nemotron-H; mamba_chunk_size: Granite 4, Bamba): its sizes are polynomials in the number
# of chunks, so each sequence length above gets a chunk more than the one before it.
CHUNK_KEYS = ("chunk_size", "mamba_chunk_size")
CHUNK_STEPS = {32: 0, 48: 1, 80: 2, 112: 3, 304: 5}
# A Python loop over the chunks (the gated delta rule's reference scan) is rolled up to
# its first, one middle and its last iteration (loop_roll.py): it needs three.
LOOP_MIN_CHUNKS = 3


def load_config(path, remote_code_dir=None):
    """The model_type and the transformers config of the config.json at `path`. A type
    transformers does not ship is refused, unless the user trusts the code its auto_map
    names in `remote_code_dir` (--trust-remote-code): that code then builds the config
    and the model, which run on fake tensors only like any other."""
    import transformers

    # As transformers reads a config.json (configuration_utils.py, _dict_from_json_file):
    # Python's json (Infinity, NaN) and the {"__float__": "Infinity"} objects that
    # save_pretrained writes in their place.
    fields = transformers.PreTrainedConfig._dict_from_json_file(path)
    model_type = fields.pop("model_type", None)
    if model_type is None:
        raise SystemExit(f"{path}: no model_type")
    # A config may name remote code (auto_map) for a type transformers ships: transformers
    # then runs its own, as it does without trust_remote_code; only unknown types need it.
    if model_type not in transformers.CONFIG_MAPPING:
        auto_map = fields.get("auto_map") or {}
        if remote_code_dir and "AutoConfig" in auto_map:
            from transformers.dynamic_module_utils import get_class_from_dynamic_module

            config_class = get_class_from_dynamic_module(auto_map["AutoConfig"], remote_code_dir)
            config = config_class(**fields)
            config.name_or_path = remote_code_dir  # where from_config finds the model's code
            return model_type, config
        hint = ("; it names remote code (auto_map): plan it with --trust-remote-code to run "
                "that code, on fake tensors only" if auto_map else "")
        raise SystemExit(f"{path}: model_type '{model_type}' is not in transformers "
                         f"{transformers.__version__}{hint}")
    return model_type, causal_lm_config(transformers.AutoConfig.for_model(model_type, **fields))


def causal_lm_config(config):
    """The config AutoModelForCausalLM.from_config builds its model from: a vision-language
    config whose causal-LM class is its text model (Qwen3.5's Qwen3_5ForCausalLM on its
    text_config: the vision tower is not built) gives its text config."""
    import transformers

    mapping = transformers.AutoModelForCausalLM._model_mapping
    model_class = mapping.get(type(config), None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if model_class is not None and text is not config and model_class.config_class is type(text):
        return text
    if model_class is None and text is not config:
        # A vision-language model that only AutoModelForImageTextToText builds (Qwen3-VL):
        # its vision tower and images are not planned.
        hint = (f"; its language model alone, without the vision tower's weights, plans "
                f"from its text_config as a config.json (model_type '{text.model_type}')"
                if mapping.get(type(text), None) is not None else "")
        raise SystemExit(f"model_type '{config.model_type}' is a vision-language model that "
                         f"transformers' AutoModelForCausalLM does not build; headroom does "
                         f"not plan vision towers or images yet{hint}")
    return config


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config", help="a config.json (transformers' format)")
    p.add_argument("--out", required=True, help="the graph file to write")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "amp-bf16"])
    p.add_argument("--trust-remote-code", metavar="DIR",
                   help="run the model code the config's auto_map names in DIR (a "
                        "model_type transformers does not ship), on fake tensors only")
    p.add_argument("--lora-rank", type=int, default=0, help="LoRA rank (0: full fine-tune)")
    p.add_argument("--lora-alpha", type=int, default=0, help="default: twice the rank")
    p.add_argument("--lora-targets", default="q_proj,v_proj")
    p.add_argument("--base-dtype", choices=["fp32", "bf16"],
                   help="LoRA: the frozen base as loaded (default: fp32 under fp32, else bf16)")
    p.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cuda: record on a driverless fake CUDA device, with CUDA's autocast "
                        "lists and SDPA kernels")
    p.add_argument("--sm", type=int, default=90,
                   help="with --device cuda: the GPU's compute capability, 10 x major + minor "
                        "(it picks the SDPA kernel)")
    p.add_argument("--checkpointing", action="store_true",
                   help="trace the program gradient checkpointing runs: transformers' "
                        "checkpointed layers get no KV cache (modeling_layers.py)")
    p.add_argument("--min-seq-len", type=int, default=0,
                   help="trace sequences from this length on (a sliding window or attention "
                        "chunk the plan's sequence reaches)")
    p.add_argument("--seq-multiple", type=int, default=0,
                   help="trace sequences that are whole multiples of this (the model's "
                        "Mamba-2 chunk): its code slices the padded chunks only otherwise")
    p.add_argument("--images", type=int, default=0,
                   help="images per sample, their tokens counted in the sequence (the "
                        "multimodal Gemma 3; image_inputs.py)")
    p.add_argument("--kernels", default="",
                   help="with --device cuda: kernel packages the training install has, whose "
                        "kernels transformers then calls instead of its reference code "
                        "(fla: flash-linear-attention; kernel_paths.py)")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def regime_of(args):
    regime = {"device": args.device, "sm": args.sm if args.device == "cuda" else 0,
              "precision": args.precision,
              "mode": "lora" if args.lora_rank > 0 else "full",
              "attention": args.attention, "stack": "pytorch",
              # transformers' forward in training fills a DynamicCache unless checkpointing
              # drops it (modeling_layers.py, forward_with_checkpointing: use_cache=False).
              "kv_cache": not args.checkpointing, "min_seq_len": args.min_seq_len,
              "seq_multiple": args.seq_multiple}
    if args.images:
        regime["images"] = args.images
    if args.kernels:
        if args.device != "cuda":
            raise SystemExit(f"--kernels {args.kernels}: Triton kernels run on a GPU; "
                             f"--device cpu runs transformers' reference code")
        regime["kernels"] = sorted({k for k in args.kernels.split(",") if k})
    if args.lora_rank > 0:
        regime.update(lora_rank=args.lora_rank, lora_alpha=args.lora_alpha or 2 * args.lora_rank,
                      lora_targets=[t for t in args.lora_targets.split(",") if t],
                      base_dtype=args.base_dtype or ("fp32" if args.precision == "fp32"
                                                     else "bf16"))
    return regime


def write_atomically(path, text):
    """Through a symlink to its target, via an exclusive temporary in the same folder."""
    target = os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target) or ".", prefix=".headroom-graph-")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 is for the temporary, not the file
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


class SequenceLoop(Exception):
    """The model's code loops over chunks of `chunk` tokens (loop_roll.py): traced again
    with at least three chunks at every length."""

    def __init__(self, chunk):
        super().__init__(chunk)
        self.chunk = chunk


def config_file_name(path):
    """The model's name from where its config lies: a Hub snapshot's or a model folder's
    config.json is named by its folder, any other file by its own stem."""
    path = os.path.abspath(path)
    if os.path.basename(path) == "config.json":
        return os.path.basename(os.path.dirname(path))
    return os.path.splitext(os.path.basename(path))[0]


def import_graph(args, log):
    import torch
    import transformers

    from graph_lift import Lifter
    from loop_roll import loop_chunk, matching_runs, roll, sequence_loops
    from size_fit import ROUND_UP_MULTIPLES
    from image_inputs import check_images, image_tokens
    from kernel_paths import import_kernel_packages, kernel_assumptions, kernel_packages_bound
    from depth_scale import whole_depth_graph
    from parallel_traces import run_all
    from trace_step import build_model, record_step
    from traced_layers import check_parameter_count, text_config_of, traced_model_config
    from unread_buffers import add_unread_buffers

    model_type, config = load_config(args.config, args.trust_remote_code)
    check_images(config, args.images)
    if args.images and args.checkpointing:
        # gradient_checkpointing_enable checkpoints every GradientCheckpointingLayer, the
        # vision tower's encoder layers (SiglipEncoderLayer) too: the graph marks the
        # decoder layers alone.
        raise SystemExit("checkpointing with images: the vision tower's layers are "
                         "checkpointed too, which is not modelled; plan without it")
    text = text_config_of(config)
    if args.device == "cuda":
        from trace_step import install_cuda
        install_cuda(args.sm)
    regime = regime_of(args)
    # {package: version} of the kernel packages the plan names (kernel_paths.py).
    kernels = import_kernel_packages(regime["kernels"], args.sm) if "kernels" in regime else {}
    kinds, depths, whole_parameters = traced_model_config(config, regime)
    # The kernel fallbacks the traced code ran (kernel_paths.py), found on the classes of
    # the model built on the meta device.
    called = set()
    with torch.device("meta"):
        meta_model = build_model(depths[0][1], regime)

    def traced_at(layers, small):
        """What the graph file holds of `small`, the model made of `layers`: its sections,
        its micro-batch-1 sections, the layer prefix, the sequence chunk and the valid
        sequence lengths. The KV cache is the whole model's (trace_step.whole_model_cache)."""
        depth = len(layers)

        def record(point, grad):
            start = time.time()
            with kernel_packages_bound(meta_model, kernels) as seen:
                rec = record_step(small, regime, *point, grad=grad,
                                  checkpointing=args.checkpointing, whole=(text, layers))
            if grad:
                log(f"traced {depth} of {len(kinds)} layers at b={point[0]}, s={point[1]}: "
                    f"{len(rec.ops)} ops ({time.time() - start:.1f} s)")
            return rec, set(seen)

        def traced(jobs):
            """The recordings of `jobs`, (point, grad) each, traced on every core."""
            made = run_all(lambda i: record(*jobs[i]), len(jobs))
            for _, seen in made:
                called.update(seen)
            return [rec for rec, _ in made]

        def lifted(points, looped):
            # The two longest first: a program whose op count grows with the sequence
            # shows there, before the other lengths are traced.
            last = len(points) - 1
            recordings = dict(zip((last, last - 1), traced([(points[last], True),
                                                             (points[last - 1], True)])))
            if not looped and len({len(r.ops) for r in recordings.values()}) > 1:
                found = loop_chunk([recordings[last - 1], recordings[last]],
                                   points[-2:], ROUND_UP_MULTIPLES)
                if found:
                    raise SequenceLoop(found)
            rest = [n for n in range(len(points)) if n not in recordings]
            *made, no_grad = traced([(points[n], True) for n in rest] + [(points[0], False)])
            recordings.update(zip(rest, made))
            recordings = [recordings[n] for n in range(len(points))]
            if looped:
                loops = sequence_loops(recordings, points, chunk)
                for rec, rec_loops, (b, s) in zip(recordings, loops, points):
                    roll(rec, rec_loops, f"b={b}, s={s}")
                roll(no_grad, matching_runs(no_grad, recordings[0]), "torch.no_grad()")
            lifter = Lifter(recordings, points, recordings[0].layer_prefix,
                            [kinds[k] for k in layers], no_grad, chunk if looped else 0,
                            checkpointed=args.checkpointing)
            return lifter.sections(), recordings[0].layer_prefix

        # Traced past --min-seq-len: transformers builds other masks once a sequence
        # reaches a sliding window or an attention chunk, so the traces sit in the plan's
        # band. A sample holds its images' tokens and text: traced from one text token
        # past them.
        low = max(args.min_seq_len, image_tokens(config, args.images))
        chunk = sequence_chunk(text) or args.seq_multiple
        if args.seq_multiple != chunk and args.seq_multiple:
            raise SystemExit(f"--seq-multiple {args.seq_multiple}: the model's sequence chunk "
                             f"is {chunk or 'none'}")
        # A chunk only the caller knows was learned from an earlier import: a loop's.
        looped = bool(chunk) and not sequence_chunk(text)
        valid = valid_seq_len(text, low, chunk, looped)
        try:
            sections, layer_prefix = lifted(
                sample_points(SAMPLE_POINTS, low, chunk, args.seq_multiple, looped), looped)
        except SequenceLoop as found:
            if chunk and found.chunk != chunk:
                raise SystemExit(f"the model loops over {found.chunk}-token chunks, not the "
                                 f"{chunk} of --seq-multiple") from None
            chunk, looped = found.chunk, True
            log(f"its code loops over {chunk}-token chunks of the sequence: traced again from "
                f"{LOOP_MIN_CHUNKS} chunks on")
            sections, layer_prefix = lifted(
                sample_points(SAMPLE_POINTS, low, chunk, args.seq_multiple, looped), looped)
        if looped:
            valid = valid_seq_len(text, low, chunk, looped)
        valid[0] = max(valid[0], image_tokens(config, args.images) + 1)
        single, _ = lifted(
            sample_points(SINGLE_SAMPLE_POINTS, low, chunk, args.seq_multiple, looped), looped)
        return {"sections": sections, "single": single, "layer_prefix": layer_prefix,
                "sequence_chunk": chunk, "valid_seq_len": valid}

    traces = [traced_at(layers, small) for layers, small in depths]
    uncalled = sorted(set(kernels) - {package for _, _, package in called})
    if uncalled:
        raise SystemExit(f"--kernels {uncalled[0]}: the training step of model_type "
                         f"'{model_type}' calls no {uncalled[0]} kernel; plan it without "
                         f"--kernels")
    if len(traces) == 2:
        shallow, deep = traces
        depth = len(depths[0][0])
        log(f"parameters outside the layers follow the depth: traced at {depth} and "
            f"{depth + 1} layers, extrapolated to {len(kinds)}")
        traces = [whole_depth_graph(shallow, deep, depth, len(kinds))]
    lifted = traces[0]
    sections, single = lifted["sections"], lifted["single"]
    layer_types = first_layer_apart(kinds, [sections, single])
    unread = add_unread_buffers([sections, single], meta_model, lifted["layer_prefix"],
                                [kinds[k] for k in depths[0][0]])
    if unread:
        log(f"buffers no op reads, held on the device all the same: {', '.join(unread)}")
    check_parameter_count(sections, layer_types, whole_parameters)
    if _program(single) != _program(sections):
        sections["micro_batch_1"] = single
    with open(args.config, "rb") as f:
        config_sha = hashlib.sha256(f.read()).hexdigest()
    peft_version = None
    if regime["mode"] == "lora":
        import peft
        peft_version = peft.__version__
    graph = {
        "format": "headroom-graph", "version": FORMAT_VERSION,
        "model_type": model_type,
        "name": getattr(config, "_name_or_path", "") or config_file_name(args.config)
        or model_type,
        "source": {"transformers": transformers.__version__, "torch": torch.__version__,
                   "peft": peft_version, "config_sha256": config_sha, **kernels},
        "regime": regime,
        "config": {"vocab_size": text.vocab_size, "hidden_size": text.hidden_size,
                   "num_layers": text.num_hidden_layers,
                   "num_heads": getattr(text, "num_attention_heads", 0) or 0,
                   "max_positions": getattr(text, "max_position_embeddings", 0) or 0},
        "valid_seq_len": lifted["valid_seq_len"],
        "sequence_chunk": lifted["sequence_chunk"],
        "layer_prefix": lifted["layer_prefix"],
        "layer_types": layer_types,
        "assumptions": kernel_assumptions(meta_model, config, called, kernels),
        **sections,
    }
    return graph


def first_layer_apart(kinds, programs):
    """The template of each layer: layer 0's own where a program lifted one (graph_lift's
    FIRST_LAYER), in every program then."""
    from graph_lift import FIRST_LAYER

    first = kinds[0] + FIRST_LAYER
    if not any(first in p["templates"] for p in programs):
        return list(kinds)
    for p in programs:
        p["templates"].setdefault(first, p["templates"][kinds[0]])
    return [first] + list(kinds[1:])


def _program(sections):
    """The ops of each section, without sizes: equal when two variants run the same code."""
    def ops(section):
        return [(op["aten"], op["name"], op["inputs"], op["outputs"]) for op in section["ops"]]
    return (ops(sections["prologue"]), {k: ops(v) for k, v in sections["templates"].items()},
            ops(sections["epilogue"]))


def sequence_chunk(config):
    """The chunk Mamba-2's reference code splits the sequence into (0: none)."""
    sizes = [getattr(config, key, None) for key in CHUNK_KEYS]
    return max([v for v in sizes if isinstance(v, int) and v > 0], default=0)


def sample_points(points, low, chunk, multiple, looped=False):
    """The (b, s) traced from `low` on: with a sequence chunk, one more chunk at each
    length; with `multiple`, whole multiples of it, from two chunks on. A loop over the
    chunks is traced from LOOP_MIN_CHUNKS chunks on, so that it can be rolled."""
    if not chunk:
        return [(b, low + s) for b, s in points]
    if looped:
        low = max(low, (LOOP_MIN_CHUNKS - 1) * chunk)
    if multiple:
        first = max(LOOP_MIN_CHUNKS if looped else 2, -(-low // chunk))
        return [(b, (first + CHUNK_STEPS[s]) * chunk) for b, s in points]
    return [(b, low + s + CHUNK_STEPS[s] * chunk) for b, s in points]


def valid_seq_len(config, low, chunk, looped):
    """[lo, hi]: the sequence lengths the program traced from `low` on holds for (hi 0: no
    bound known). transformers changes what it builds once a sequence reaches a sliding
    window or an attention chunk (masking_utils.py: _ignore_causal_mask_sdpa's
    `kv_length >= local_attention_size`); the traces must not straddle one."""
    limits = [getattr(config, key, None) for key in ("sliding_window", "attention_chunk_size")]
    # Past one Mamba-2 chunk, the reshapes into chunks copy: another program. A loop over
    # the chunks is rolled from LOOP_MIN_CHUNKS of them on: its traces start past them.
    rolled = (LOOP_MIN_CHUNKS - 1) * chunk + 1 if looped else 0
    if looped:
        low = max(low, rolled - 1)
    limits = sorted({v for v in limits + [None if looped else chunk + 1 if chunk else None]
                     if isinstance(v, int) and v > 0})
    longest = max(s for _, s in sample_points(SAMPLE_POINTS, low, chunk, 0, looped))
    crossed = [v for v in limits if low < v <= longest]
    if crossed:
        # The traces run from low + 32 to low + 304 tokens: a window shorter than that is
        # planned only from the window on.
        raise SystemExit(f"sequences from {low} tokens: the traces (up to {longest} tokens) "
                         f"would cross a sliding window, an attention chunk or a Mamba-2 chunk "
                         f"at {crossed[0]} tokens; plan a sequence of at least {crossed[0]}")
    lo = max([v for v in limits if v <= low] + [rolled], default=0)
    above = [v - 1 for v in limits if v > longest]
    max_pos = getattr(config, "max_position_embeddings", 0) or 0
    return [lo, min(above + ([max_pos] if max_pos else []), default=0)]


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.device == "cuda":
        # The fake device must never sit beside a real one (fake_cuda_device.install), and
        # its C++ extension is built once and kept beside the graphs.
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        if os.environ.get("HEADROOM_CACHE"):
            os.environ.setdefault("HEADROOM_EXTENSIONS_DIR",
                                  os.path.join(os.environ["HEADROOM_CACHE"], "torch_extensions"))

    def log(line):
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    from step_recorder import UnliftableOp

    start = time.time()
    try:
        graph = import_graph(args, log)
    except Exception as e:  # noqa: BLE001 - every failure ends in one line naming the type
        model_type = "?"
        try:
            with open(args.config, encoding="utf-8") as f:
                model_type = json.load(f).get("model_type", "?")
        except (OSError, ValueError):
            pass
        if os.environ.get("HEADROOM_IMPORT_TRACEBACK"):
            import traceback
            traceback.print_exc()
        if isinstance(e, UnliftableOp):
            what = str(e)
        elif "does not support an attention implementation" in str(e):
            # modeling_utils' _check_and_adjust_attn_implementation, for the types that
            # set _supports_sdpa = False (gpt-oss: its attention sinks).
            what = (f"transformers runs no {args.attention} attention for it; plan it with "
                    f"--attention eager")
        else:
            what = (f"transformers' code did not run on fake tensors: {type(e).__name__}: "
                    f"{str(e).splitlines()[0] if str(e) else ''}")
        print(f"headroom import: model_type '{model_type}': {what}", file=sys.stderr)
        return 2
    write_atomically(args.out, json.dumps(graph, separators=(",", ":")) + "\n")
    log(f"wrote {args.out} ({time.time() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
