# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""`export-llm`: ExecuTorch's `export_llm` with our partitioner in place of XNNPACK's.

It takes export_llm's own configuration (`LlmConfig`: `--config FILE.yaml` and `base.* model.* export.*
...` overrides) and reuses its pipeline (`executorch.examples.models.llama.export_llama_lib`: the model,
its source transforms, the export and the metadata methods), so the .pte runs under ExecuTorch's
`TextLLMRunner` and `llama_main` unchanged. What it does not take yet is refused with a line saying so."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import CliError, Stage

PRECISIONS = ("fp32", "bf16")
GROUP_SCALES = ("bf16", "f32")
# The linear layers' quantization (ops/affine.py): torchao's affine ops for int8 rows x int4 or int8
# weights and for int4 weights under f32 (or bf16) rows; export_llm's own weight-only int8 module.
QMODES = ("8da4w", "8da8w", "4w", "int8")
# Other backends' switches: export-llm is the backend choice.
OTHER_BACKENDS = ("xnnpack", "coreml", "vulkan", "qnn", "mps", "openvino", "tosa", "ethosu", "vgf", "mlx")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export-llm",
        help="export an LLM the way ExecuTorch's export_llm does, delegated to oneDNN",
        description="ExecuTorch's export_llm (same LlmConfig: --config FILE.yaml and key=value overrides such "
        "as base.params=P.json base.checkpoint=C.pth model.use_kv_cache=True), lowered with the oneDNN "
        "partitioner. Drop backend.xnnpack.enabled=True.",
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="LlmConfig overrides, as for export_llm")
    parser.add_argument("--config", type=Path, help="an LlmConfig YAML file (overrides apply on top)")
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="fp32, or bf16: the delegate computes the fp32 model in bf16 (inputs and outputs stay fp32)",
    )
    parser.add_argument(
        "--group-scales",
        choices=GROUP_SCALES,
        default="bf16",
        help="the type 4-bit linear layers' group scales are stored in: bf16 (as XNNPACK stores them; a "
        "tenth fewer bytes a decode step at group 32) or f32 (exactly as torchao computed them)",
    )
    parser.set_defaults(run=run)


def read_config(config: Path | None, overrides: list[str]) -> Any:
    """The LlmConfig that export_llm would build from the same file and overrides."""
    from executorch.extension.llm.export.config.llm_config import LlmConfig
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    malformed = [item for item in overrides if "=" not in item]
    if malformed:
        raise CliError(f"overrides are KEY=VALUE, got {malformed[0]!r}")
    try:
        merged = OmegaConf.structured(LlmConfig)
        if config is not None:
            if not config.is_file():
                raise CliError(f"{config}: no such config file")
            merged = OmegaConf.merge(merged, OmegaConf.load(config))
        merged = OmegaConf.merge(merged, OmegaConf.from_dotlist(overrides))
        return OmegaConf.to_object(merged)
    except (OmegaConfBaseException, ValueError) as error:
        raise CliError(f"the configuration is not an LlmConfig: {str(error).splitlines()[0]}") from error


def check_supported(llm_config: Any) -> None:
    """What this command does not do yet, said before minutes of exporting."""
    enabled = [name for name in OTHER_BACKENDS if getattr(getattr(llm_config.backend, name, None), "enabled", False)]
    if enabled:
        raise CliError(f"backend.{enabled[0]}.enabled=True: export-llm lowers to oneDNN; drop that override")
    quantization = llm_config.quantization
    if quantization.qmode and quantization.qmode not in QMODES:
        raise CliError(
            f"quantization.qmode={quantization.qmode} is not supported by export-llm yet: "
            f"use one of {', '.join(QMODES)}"
        )
    if quantization.pt2e_quantize:
        raise CliError(
            "quantization.pt2e_quantize is not supported by export-llm yet: "
            f"quantize the linear layers with quantization.qmode ({', '.join(QMODES)})"
        )
    if llm_config.multimethod.enabled:
        raise CliError("multimethod exports are not supported by export-llm yet")


def initialized_buffer_passes(llm_config: Any) -> list[Any]:
    """The buffers export_llama serializes with their initial values (ExecuTorch keeps only the shape of
    a mutated buffer otherwise), for the model classes and options it does it for."""
    from executorch.examples.models.llama.export_llama_lib import TORCHTUNE_DEFINED_MODELS
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    passes = []
    if llm_config.base.model_class.value in TORCHTUNE_DEFINED_MODELS:
        passes.append(InitializedMutableBufferPass(["kv_cache_pos"]))
    if llm_config.model.use_attention_sink:
        passes.append(InitializedMutableBufferPass(["cache_positions"]))
    return passes


def export_llm(llm_config: Any, precision: str = "fp32", group_scales: str = "bf16") -> Path:
    """Runs export_llm's pipeline with the oneDNN partitioner; returns the .pte written."""
    from executorch.backends.onednn import OneDnnPartitioner
    from executorch.examples.models.llama import export_llama_lib as llama

    check_supported(llm_config)
    with Stage("building and exporting the model (export_llm's pipeline)"):
        manager = llama._prepare_for_llama_export(llm_config)
        exported = manager.export()
        exported.run_canonical_optimizations()
    with Stage(f"lowering to oneDNN ({precision}, {group_scales} group scales)"):
        partitioner = OneDnnPartitioner(precision=precision, group_scales=group_scales)
        lowered = exported.to_edge_transform_and_lower([partitioner])
        program = lowered.to_executorch(passes=initialized_buffer_passes(llm_config))
    output = Path(llama._get_output_filename(llm_config, exported.modelname, program.output_dir, program.dtype))
    program.save_to_pte(str(output))
    return output


def run(args: argparse.Namespace) -> int:
    llm_config = read_config(args.config, args.overrides)
    output = export_llm(llm_config, args.precision, args.group_scales)
    print(f"wrote {output}")
    return 0
