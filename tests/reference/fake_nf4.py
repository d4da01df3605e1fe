"""QLoRA's 4-bit base on fake tensors, at real sizes.

bitsandbytes' `Params4bit` is a tensor subclass made with `torch.Tensor._make_subclass`,
which refuses a FakeTensor, so its `Linear4bit` cannot be built on fake tensors
(docs/cuda-semantics.md). This stand-in stores what bitsandbytes 0.50.2 stores and
allocates what it allocates, read from its source, so that the real PEFT and FSDP2 code
around it can run at 8B and 70B:

* the weight: `bnb_4bit_quant_storage=bf16` packs two 4-bit values per byte into a
  `[packed bytes / 2, 1]` bf16 parameter, frozen (`Params4bit`, nn/modules.py), which
  FSDP2 shards, gathers and frees like any other;
* the QuantState, as module and weight attributes FSDP never sees: an 8-bit absmax per 64
  weights, an fp32 absmax per 256 blocks, the 16-entry NF4 code, the 256-entry code of the
  absmax, an fp32 offset (double quantization: `quantize_4bit`, functional.py);
* a forward as `MatMul4Bit.forward` runs through `_gemm_4bit_default_impl`
  (backends/default/ops.py): the blocks' fp32 absmax (`dequantize_blockwise`, then
  `+ offset`), the weight dequantized to the compute dtype, the matmul; nothing saved but
  the packed weight;
* a backward as `MatMul4Bit.backward`: `functional.dequantize_4bit` again (the fp32
  absmax, `+=` the offset, the weight in the compute dtype) and one matmul for the input's
  gradient.

PEFT wraps it as it wraps bitsandbytes' layer (`lora.bnb.Linear4bit`, with its defensive
clone of the base output): it passes `isinstance(..., bnb.nn.Linear4bit)`, and the model
says `is_loaded_in_4bit`.
"""
import torch

BLOCK = 64          # bitsandbytes' default 4-bit blocksize
NESTED_BLOCK = 256  # the absmax's own blocksize under double quantization


class _MatMul4Bit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, layer):
        ctx.layer = layer
        ctx.weight = weight  # bitsandbytes keeps the packed weight in ctx.tensors, unsaved
        absmax = layer.blocks_absmax() + layer.offset  # dequantize_blockwise + offset
        dequantized = torch.empty(layer.out_features, layer.in_features, dtype=x.dtype,
                                  device=x.device)
        out = torch.nn.functional.linear(x, dequantized)
        del absmax, dequantized  # both live until the matmul has run
        return out

    @staticmethod
    def backward(ctx, grad_output):
        layer = ctx.layer
        absmax = layer.blocks_absmax()
        absmax += layer.offset
        dequantized = torch.empty(layer.out_features, layer.in_features,
                                  dtype=layer.compute_dtype, device=grad_output.device)
        del absmax  # functional.dequantize_4bit returns the weight alone
        return torch.matmul(grad_output, dequantized.to(grad_output.dtype)), None, None


def _linear4bit_class():
    import bitsandbytes as bnb

    class FakeLinear4bit(bnb.nn.Linear4bit):
        """A bitsandbytes Linear4bit's storage and allocations, buildable on fake tensors."""

        def __init__(self, linear, compute_dtype=torch.bfloat16):
            torch.nn.Module.__init__(self)
            self.in_features, self.out_features = linear.in_features, linear.out_features
            numel = self.in_features * self.out_features
            device = linear.weight.device
            weight = torch.nn.Parameter(
                torch.empty(numel // 4, 1, dtype=torch.bfloat16, device=device),
                requires_grad=False)
            weight.compress_statistics, weight.quant_type = True, "nf4"
            self.weight = weight
            self.bias = None
            self.compute_dtype, self.compute_type_is_set = compute_dtype, True
            self.quant_storage = torch.bfloat16
            blocks = -(-numel // BLOCK)
            self.absmax = torch.empty(blocks, dtype=torch.uint8, device=device)
            self.absmax2 = torch.empty(-(-blocks // NESTED_BLOCK), dtype=torch.float32,
                                       device=device)
            self.code = torch.empty(16, dtype=torch.float32, device=device)
            self.code2 = torch.empty(256, dtype=torch.float32, device=device)
            self.offset = torch.zeros((), dtype=torch.float32, device=device)

        def blocks_absmax(self):
            """An fp32 value per 64-weight block, as dequantize_blockwise returns it."""
            return torch.empty(self.absmax.shape, dtype=torch.float32, device=self.absmax.device)

        def forward(self, x):
            inp_dtype = x.dtype
            x = x.to(self.compute_dtype)
            return _MatMul4Bit.apply(x, self.weight, self).to(inp_dtype)

    return FakeLinear4bit


def quantize_linears(model):
    """Every linear of the decoder blocks as a 4-bit layer, as transformers' bitsandbytes
    integration converts them (the output head is kept: `get_keys_to_not_convert`)."""
    fake_linear4bit = _linear4bit_class()
    head = model.get_output_embeddings()
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear) and child is not head:
                setattr(module, child_name, fake_linear4bit(child))
    model.is_loaded_in_4bit = True
    return model
