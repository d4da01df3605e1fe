"""The training script check_exports.py hands to `accelerate launch` with headroom's
exported accelerate-FSDP config: a transformers model prepared by accelerate (its own
FSDP2 wrap, fsdp2_prepare_model) trains like distributed_run.py's ranks, each measuring
its peak with PeakMeter, and prints `RANK_RESULT {json}`.

    accelerate launch --config_file exported.yaml accelerate_run.py '{"config": ...}'

accelerate 1.15 sets DistributedType.FSDP only for a multi-accelerator machine
(state.py, AcceleratorState.__init__: the MULTI_GPU/... branch); on a machine with no
GPU it leaves the torchrun-launched processes undistributed, whatever the config says.
let_accelerate_shard_on_cpu() relabels gloo's MULTI_CPU as MULTI_GPU before the first
Accelerator, so the exported config runs here as it would on GPUs: the same launcher,
plugin and wrap. It is the only change to accelerate, and test-only.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def let_accelerate_shard_on_cpu():
    # set_device() would divide by torch.cuda.device_count() (0) without a device.
    os.environ.setdefault("ACCELERATE_TORCH_DEVICE", "cpu")
    import accelerate.state as state
    original = state.PartialState._prepare_backend

    def prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        backend, kind = original(self, True, sagemaker_dp, backend)  # gloo, MULTI_CPU
        if kind == state.DistributedType.MULTI_CPU:
            kind = state.DistributedType.MULTI_GPU
        return backend, kind

    state.PartialState._prepare_backend = prepare_backend


def main():
    case = json.loads(sys.argv[1])
    let_accelerate_shard_on_cpu()
    import torch
    import transformers
    from accelerate import Accelerator
    from accelerate.utils import DistributedType

    import distributed_run
    import hf_training_run
    from peak_meter import PeakMeter

    accelerator = Accelerator()
    if accelerator.distributed_type != DistributedType.FSDP or not accelerator.is_fsdp2:
        raise RuntimeError(f"accelerate runs {accelerator.distributed_type}, not FSDP2")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    hf_config = transformers.AutoConfig.from_pretrained(case["config_dir"])
    rank = accelerator.process_index
    gen = torch.Generator().manual_seed(1 + rank)
    distributed_run.settle_collectives()
    meter = PeakMeter(unmeasured_phase="build", collective_frees=True)
    with meter:
        with meter.phase("build"):
            model = hf_training_run.build_model(case, hf_config)
            # The optimizer is built on the whole parameters and handed to prepare with
            # the model, as accelerate asks for FSDP2; it swaps in the sharded ones.
            optimizer = hf_training_run.build_optimizer(
                case, [p for p in model.parameters() if p.requires_grad])
            model, optimizer = accelerator.prepare(model, optimizer)
        distributed_run.train_steps(meter, case, hf_config, gen, model, accelerator.backward,
                                    optimizer)
    units = sum(1 for m in model.modules() if type(m).__name__.startswith("FSDP"))
    # One write: the ranks share the launcher's pipe (see distributed_run.py).
    sys.stdout.write("RANK_RESULT " + json.dumps({"rank": rank, "measured_peak_bytes": meter.peak_bytes,
                                                  "phase": meter.peak_phase,
                                                  "fsdp_units": units}) + "\n")
    sys.stdout.flush()
    accelerator.end_training()


if __name__ == "__main__":
    main()
