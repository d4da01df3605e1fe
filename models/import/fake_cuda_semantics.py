"""CUDA's semantics on fake CUDA tensors, shared by headroom import (trace_step.py, for
`--gpu` plans) and the fake-CUDA references (tests/reference/fake_cuda_forward.py and
fake_cuda_step.py): the SDPA kernel PyTorch 2.15's CUDA dispatcher picks on a GPU of a
given compute capability (an H100's by default), what a fake tensor changes in
transformers and in Module._apply (made to behave as on real tensors), autocast's state
set directly (torch.autocast("cuda") turns itself off without a device), and the GPU's
compute capability for transformers' grouped_mm experts.
"""
import contextlib
import math

import torch


def patch_find_packed_sequence_indices(op_of):
    """transformers' find_packed_sequence_indices as it runs on real tensors. `op_of(t)` names
    the op that made a tensor (None when unknown)."""
    from transformers import masking_utils

    # transformers/masking_utils.py find_packed_sequence_indices (~line 735-764) reads the
    # position ids (`(packed_sequence_mask[:, -1] == 0).all()`), guarded by `not
    # is_tracing(...)`; utils/import_utils.py is_tracing() is True for a FakeTensor, so on
    # fake tensors it returns the packed-sequence mask, which disables the is_causal skip
    # and materialises a [b, 1, s, s] bool mask whenever there is no cache
    # (checkpointing, use_cache=False). On real tensors with plain arange positions it
    # returns None. Here: the same tensors are computed (they are real allocations), and
    # None is returned after checking that the position ids came from aten.arange (the
    # harness never passes position ids: transformers makes them with arange, plus the
    # past length).
    def find_packed_sequence_indices(position_ids):
        first_dummy_value = position_ids[:, :1] - 1
        position_diff = torch.diff(position_ids, prepend=first_dummy_value, dim=-1)
        packed_sequence_mask = (position_diff != 1).cumsum(-1)
        # transformers makes them as arange(...) + past length (aten.add): still consecutive.
        made_by = op_of(position_ids) or ""
        if "arange" not in made_by and "aten.add.Tensor" not in made_by:
            raise RuntimeError(f"position ids not from arange ({made_by}): cannot decide")
        del first_dummy_value, position_diff, packed_sequence_mask
        return None
    # The other is_tracing() guards in masking_utils (lines ~280, 283, 317, 353, 1521) only
    # look at a padding mask / an attention_mask / a tensor q_offset, none of which this
    # harness passes (no attention_mask, DynamicCache offsets are ints); generic.py's only
    # guard logging. Checked: none of them changes an allocation here.
    masking_utils.find_packed_sequence_indices = find_packed_sequence_indices


H100 = (9, 0)


def patch_device_capability(capability=H100):
    # transformers' grouped_mm experts path asks the device for its compute capability
    # (integrations/moe.py _can_use_grouped_mm: SM80+); there is no driver here: the
    # planned GPU's (an H100's by default).
    torch.cuda.get_device_capability = lambda device=None: tuple(capability)


def install_sdpa(kernels, capability=H100):
    """Replaces F.scaled_dot_product_attention by the CUDA dispatcher's choice on a GPU of
    this compute capability (an H100 by default), calling the chosen kernel's ATen op;
    counts the kernels chosen into `kernels`."""
    major, minor = capability
    sm = 10 * major + minor

    def pick_kernel(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa):
        """cuda/sdp_utils.cpp select_sdp_backend with this wheel (cu132, cuDNN 9.26):
        check_prefer_cudnn_attention() is true for majors 9 and 10 with cuDNN > 9.15, so
        there the order is cudnn, flash, efficient, math; elsewhere flash, efficient, math
        (Context.h's default order; the planner's models/attention_kernel_choice.cc reads
        the same constraints)."""
        d_qk, d_v = q.shape[-1], v.shape[-1]
        hq, hk, hv = q.shape[1], k.shape[1], v.shape[1]
        low = q.dtype in (torch.float16, torch.bfloat16)
        grad = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
        if enable_gqa:
            heads_ok = hk == hv and hq % hk == 0
        else:
            heads_ok = hq == hk == hv or (hk == hv == 1)
        # cuDNN (can_use_cudnn_attention): fp16/bf16; mask 2-D/4-D not requiring grad;
        # d_qk, d_v multiples of 8, <= 128 (256 only with a new enough cudnn-frontend:
        # not assumed); backward needs d <= 128; s_k != 1; dropout a multiple of 1/16;
        # GQA allowed (heads need not be equal, both divide H_q).
        mask_ok = attn_mask is None or (attn_mask.dim() in (2, 4) and not attn_mask.requires_grad)
        cudnn_heads = hk > 0 and hv > 0 and hq % hk == 0 and hq % hv == 0
        if (major in (9, 10) and low and mask_ok and d_qk % 8 == 0 and d_v % 8 == 0
                and d_qk <= 128 and d_v <= 128 and k.shape[2] != 1
                and abs(dropout_p * 16 - round(dropout_p * 16)) < 1e-9
                and not (dropout_p > 0 and q.shape[2] == 1) and cudnn_heads):
            return "cudnn"
        # Flash (can_use_flash_attention): sm80+; no mask; d <= 256 (padded to 8), on
        # sm86-89/12x with grad <= 192 unless > 224 without dropout; fp16/bf16; causal
        # needs s_q == s_k; GQA with enable_gqa; dropout ok.
        consumer = 86 <= sm <= 89 or sm >= 120
        consumer_ok = not (consumer and grad and d_qk > 192
                           and not (d_qk > 224 and dropout_p == 0))
        if (sm >= 80 and low and attn_mask is None and d_qk == d_v <= 256 and heads_ok
                and consumer_ok and not (is_causal and q.shape[2] != k.shape[2])):
            return "flash"
        # Memory-efficient (can_use_mem_efficient_attention): sm50+; d_qk == d_k, a
        # multiple of the GEMM alignment (sm80+: 8 for 16-bit, 4 for fp32; sm7x 16-bit: 8);
        # fp16/fp32, bf16 on sm80+; mask and dropout ok; GQA via
        # check_batch_size_and_num_heads_dense<supports_gqa=true> on CUDA (2.15's kernels
        # read grouped K/V: kernel_forward.h q_heads_per_kv).
        align = (8 if low else 4) if sm >= 80 else 8 if major == 7 and low else 1
        dtype_ok = (q.dtype in (torch.float16, torch.float32)
                    or (q.dtype == torch.bfloat16 and sm >= 80))
        if (sm >= 50 and dtype_ok and d_qk == k.shape[-1] and d_qk % align == 0 and heads_ok):
            return "efficient"
        return "math"

    def convert_boolean_attn_mask(mask, dtype, fill=-math.inf):
        # attention.cpp convert_boolean_attn_mask_(mask, dtype, neg_inf):
        # where(mask, 0.0, scalar_tensor(neg_inf, dtype)), one [b, 1, s, s] tensor of q's
        # dtype (the CPU trace of the same function shows nothing else).
        if mask is None or mask.dtype != torch.bool:
            return mask
        return torch.where(mask, 0.0, torch.scalar_tensor(fill, dtype=dtype, device=mask.device))

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
        # CUDA autocast: scaled_dot_product_attention is in the lower-precision list
        # (autocast_mode.cpp): cached_cast of every floating tensor argument (q, k, v and a
        # float mask; not cached: they are not leaves).
        if torch.is_autocast_enabled("cuda"):
            dt = torch.get_autocast_dtype("cuda")

            def cast(x):
                if (x is not None and x.is_floating_point() and x.dtype != dt
                        and x.dtype != torch.float64):
                    return x.to(dt)
                return x
            query, key, value, attn_mask = map(cast, (query, key, value, attn_mask))
        kernel = pick_kernel(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
        kernels[kernel] = kernels.get(kernel, 0) + 1
        # The kernels run below autocast (the autocast wrapper excludes its key).
        was = torch.is_autocast_enabled("cuda")
        torch.set_autocast_enabled("cuda", False)
        try:
            grad = torch.is_grad_enabled() and any(x.requires_grad for x in (query, key, value))
            if kernel == "cudnn":
                mask = convert_boolean_attn_mask(attn_mask, query.dtype, fill=-65504.0)
                return torch.ops.aten._scaled_dot_product_cudnn_attention(
                    query, key, value, mask, grad, dropout_p, is_causal, False, scale=scale)[0]
            if kernel == "flash":
                d = query.shape[-1]
                if scale is None:
                    scale = 1.0 / math.sqrt(d)
                if d % 8:
                    # pad_last_dim<8>: padded copies of q, k, v; the output sliced back.
                    pad = 8 - d % 8
                    query, key, value = (torch.nn.functional.pad(x, (0, pad))
                                         for x in (query, key, value))
                out = torch.ops.aten._scaled_dot_product_flash_attention(
                    query, key, value, dropout_p, is_causal, False, scale=scale)[0]
                return out[..., :d] if d % 8 else out
            if kernel == "efficient":
                mask = convert_boolean_attn_mask(attn_mask, query.dtype)
                if mask is not None:
                    # preprocess_mask: pad_bias<8> when the last dim is not aligned, then
                    # expand to [B, H, L, S] (a view).
                    last = mask.shape[-1]
                    if last % 8:
                        mask = torch.nn.functional.pad(mask, (0, 8 - last % 8))[..., :last]
                    mask = mask.expand(query.shape[0], query.shape[1], query.shape[2],
                                       key.shape[2])
                return torch.ops.aten._scaled_dot_product_efficient_attention(
                    query, key, value, mask, grad, dropout_p, is_causal, scale=scale)[0]
            mask = convert_boolean_attn_mask(attn_mask, query.dtype)
            return torch.ops.aten._scaled_dot_product_attention_math(
                query, key, value, mask, dropout_p, is_causal, None, scale=scale,
                enable_gqa=enable_gqa)[0]
        finally:
            torch.set_autocast_enabled("cuda", was)

    torch.nn.functional.scaled_dot_product_attention = sdpa


@contextlib.contextmanager
def fake_module_apply():
    """While a model is built on fake tensors: Module._apply without swap_tensors."""
    # Module.to() cannot swap a fake parameter (module.py _apply: swap_tensors of a
    # FakeTensor fails), and PEFT's _move_adapter_to_device_of_base_layer
    # (tuners_utils.py ~2210) calls item.to(device, dtype) on every adapter. While the
    # model is built, _apply replaces each parameter by a new Parameter of fn(param):
    # the values a real .to() gives (only the Python object differs; nothing is counted
    # before the forward).
    def fake_apply(self, fn, recurse=True):
        if recurse:
            for child in self.children():
                child._apply(fn)
        for key, param in self._parameters.items():
            if param is not None:
                with torch.no_grad():
                    applied = fn(param)
                self._parameters[key] = torch.nn.Parameter(applied,
                                                           requires_grad=param.requires_grad)
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self
    real_apply = torch.nn.Module._apply
    torch.nn.Module._apply = fake_apply
    try:
        yield
    finally:
        torch.nn.Module._apply = real_apply


def autocast_enter(dtype):
    """torch.autocast("cuda", dtype).__enter__ without its device check: returns the state
    autocast_exit restores."""
    previous = (torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"))
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", dtype)
    torch.autocast_increment_nesting()
    return previous


def autocast_exit(previous):
    """torch.autocast.__exit__: the cast cache is cleared when the nesting drops to 0."""
    if torch.autocast_decrement_nesting() == 0:
        torch.clear_autocast_cache()
    torch.set_autocast_enabled("cuda", previous[0])
    torch.set_autocast_dtype("cuda", previous[1])
