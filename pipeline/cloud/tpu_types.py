"""The Vertex AI TPU machines the Trainer can run on, and the TensorFlow runtime each needs.

Vertex AI names a TPU by machine type, accelerator enum (google.cloud.aiplatform_v1
AcceleratorType), chip count and, for v5e, topology. TensorFlow reaches v2 and v3 through the
stream executor built into tensorflow-tpu; v5e only through the PJRT plugin: the worker must
set NEXT_PLUGGABLE_DEVICE_USE_C_API=true and TF_PLUGGABLE_DEVICE_LIBRARY_PATH to a libtpu.so
that the image holds in /lib (Vertex AI's "Training with TPU accelerators" page; Dockerfile.tpu
puts it there). TensorFlow has no support from v6e on, so no later type is listed.
"""

import dataclasses

STREAM_EXECUTOR = "stream_executor"
PJRT = "pjrt"
LIBTPU_PATH = "/lib/libtpu.so"
# What a PJRT worker's container needs in its environment.
PJRT_ENV = {
    "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
    "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": LIBTPU_PATH,
}


@dataclasses.dataclass(frozen=True)
class TpuType:
    """One Vertex AI TPU machine.

    machine_type: Vertex's machine type for it.
    accelerator_type: the AcceleratorType enum name.
    accelerator_count: chips (v5e) or cores (v2/v3) of the machine.
    topology: the chips' arrangement ('' where Vertex takes none).
    runtime: STREAM_EXECUTOR or PJRT, how TensorFlow reaches the chips.
    """

    machine_type: str
    accelerator_type: str
    accelerator_count: int
    topology: str
    runtime: str

    @property
    def env(self) -> dict[str, str]:
        """The container environment this type's runtime needs."""
        return dict(PJRT_ENV) if self.runtime == PJRT else {}


TPU_TYPES: dict[str, TpuType] = {
    "v2-8": TpuType("cloud-tpu", "TPU_V2", 8, "", STREAM_EXECUTOR),
    "v3-8": TpuType("cloud-tpu", "TPU_V3", 8, "", STREAM_EXECUTOR),
    "v5e-1": TpuType("ct5lp-hightpu-1t", "TPU_V5_LITEPOD", 1, "1x1", PJRT),
    "v5e-4": TpuType("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, "2x2", PJRT),
    "v5e-8": TpuType("ct5lp-hightpu-8t", "TPU_V5_LITEPOD", 8, "2x4", PJRT),
}
