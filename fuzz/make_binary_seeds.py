"""Writes the binary seed files of fuzz/corpus/: small safetensors files and training
states, valid and slightly broken, in the layout runtime/formats/ reads. They are
committed (as .st: *.safetensors is ignored as weights); run this to regenerate them."""
import json
import struct
from pathlib import Path

CORPUS = Path(__file__).parent / "corpus"


def safetensors(tensors, metadata=None):
    """tensors: name -> (dtype, shape, raw bytes)."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def floats(n):
    return struct.pack(f"<{n}f", *[0.5 * i for i in range(n)])


def main():
    weights = {
        "wte.weight": ("F32", [4, 2], floats(8)),
        "ln.bias": ("BF16", [2], b"\0\0\0\0"),
        "ids": ("I64", [1], struct.pack("<q", 7)),
        "empty": ("F16", [0, 3], b""),
    }
    st = CORPUS / "safetensors_header"
    (st / "weights.st").write_bytes(safetensors(weights, {"format": "pt"}))
    (st / "no-metadata.st").write_bytes(safetensors({"x": ("U8", [3], b"abc")}))
    (st / "truncated.st").write_bytes(safetensors(weights)[:-5])
    (st / "bad-dtype.st").write_bytes(safetensors({"x": ("F8_E4M3", [1], b"a")}))

    state = {
        "param/h.0.attn.c_attn.weight": ("F32", [2, 2], floats(4)),
        "optim/0/step": ("I64", [1], struct.pack("<q", 3)),
        "optim/0/exp_avg": ("F32", [2, 2], floats(4)),
        "optim/0/exp_avg_sq": ("F32", [2, 2], floats(4)),
        "rng/cpu": ("U8", [8], bytes(range(8))),
    }
    meta = {"format": "headroom-training-state", "format_version": "2",
            "fingerprint": "tiny-gpt2|seed0|fp32|adamw|full|r0|s64|g2", "steps": "3"}
    ts = CORPUS / "training_state"
    (ts / "state.st").write_bytes(safetensors(state, meta))
    (ts / "newer-version.st").write_bytes(safetensors(state, {**meta, "format_version": "9"}))
    (ts / "bad-steps.st").write_bytes(safetensors(state, {**meta, "steps": "-1"}))
    (ts / "not-a-state.st").write_bytes(safetensors(weights, {"format": "pt"}))


if __name__ == "__main__":
    main()
