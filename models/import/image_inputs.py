"""What a vision-language model's processor hands its forward for samples with images.

Only the multimodal Gemma 3 is planned with images (Gemma3ForConditionalGeneration, a
SigLIP vision tower beside the text model). Its processor (processing_gemma3.py,
Gemma3Processor: `full_image_sequence`, pan-and-scan off by default) puts each image in
the text as "\\n\\n", <boi>, mm_tokens_per_image image tokens, <eoi>, "\\n\\n", resizes it
to the vision tower's image_size, and returns `token_type_ids` 1 on the image tokens
(they attend to each other both ways: modeling_gemma3.py, create_masks_for_vision_model).
The sequence length counts the image tokens: a sample holds its images' tokens and at
least one text token.
"""

IMAGE_TYPES = ("gemma3",)
# Tokens around an image's tokens (Gemma3Processor.full_image_sequence): "\n\n" and <boi>
# before, <eoi> and "\n\n" after, one token each in Gemma's vocabulary.
FRAME_TOKENS = 4


def check_images(config, images):
    """Raises SystemExit with one line unless `config` is planned with `images` per sample."""
    if not images and config.model_type in IMAGE_TYPES:
        # Without images the tower's weights load but no op reads them: they take no
        # gradient, and AdamW keeps no state for them (torch/optim/adamw.py, _init_group
        # skips a parameter whose grad is None), which the graph does not express.
        text = config.get_text_config().model_type
        raise SystemExit(f"model_type '{config.model_type}' without images: its vision "
                         f"tower's weights would load unread, which is not modelled; plan it "
                         f"with --images N, or its text_config as a config.json (model_type "
                         f"'{text}') for the language model alone")
    if images and config.model_type not in IMAGE_TYPES:
        vision = hasattr(config, "vision_config")
        raise SystemExit(f"model_type '{config.model_type}': "
                         + ("images are planned for the multimodal Gemma 3 only (model_type "
                            "'gemma3'); its vision tower and image tokens are not modelled"
                            if vision else "it has no vision tower; plan it without --images"))


def image_tokens(config, images):
    """The tokens `images` images take in one sample's sequence."""
    return images * (config.mm_tokens_per_image + FRAME_TOKENS) if images else 0


def image_batch(config, micro_batch, seq_len, images, vocab_size):
    """input_ids [b, s] with each sample's images first, and the forward's other inputs
    (pixel_values in fp32 as the image processor returns them, token_type_ids)."""
    import torch

    if not images:
        return torch.randint(0, vocab_size, (micro_batch, seq_len)), {}
    ids = torch.randint(0, min(vocab_size, config.image_token_id), (micro_batch, seq_len))
    if seq_len <= image_tokens(config, images):
        raise SystemExit(f"a sequence of {seq_len} tokens holds no text beside {images} "
                         f"images of {config.mm_tokens_per_image} tokens")
    for k in range(images):
        start = k * image_tokens(config, 1) + 2
        ids[:, start - 1] = config.boi_token_index
        ids[:, start:start + config.mm_tokens_per_image] = config.image_token_id
        ids[:, start + config.mm_tokens_per_image] = config.eoi_token_index
    vision = config.vision_config
    pixel_values = torch.zeros(micro_batch * images, vision.num_channels, vision.image_size,
                               vision.image_size)
    return ids, {"pixel_values": pixel_values,
                 "token_type_ids": (ids == config.image_token_id).long()}
