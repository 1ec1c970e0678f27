# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Our flows for ExecuTorch's backend conformance suite (`executorch.backends.test.suite`).

Each flow lowers with `OneDnnPartitioner` (after `OneDnnQuantizer` for the static int8 flows) and runs
the `.pte` through the suite's own Serialize stage, i.e. the pybindings runtime, in which importing
`executorch.backends.onednn` has registered `OneDnnBackend`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import executorch.backends.onednn  # noqa: F401  (registers OneDnnBackend with the runtime the suite runs)
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.backends.onednn.quantizer import OneDnnQuantizer
from executorch.backends.test.harness import Tester
from executorch.backends.test.harness.stages import Quantize, StageType, ToEdgeTransformAndLower
from executorch.backends.test.suite.flow import TestFlow

BACKEND = "onednn"


class OneDnnToEdgeTransformAndLower(ToEdgeTransformAndLower):
    def __init__(self, partitioner_options: dict[str, Any]) -> None:
        # The base stage ignores `partitioners` unless a default partitioner class is given too.
        super().__init__(default_partitioner_cls=partial(OneDnnPartitioner, **partitioner_options))


class OneDnnTester(Tester):
    """The suite's Tester with our lowering; `partitioner_options` go to OneDnnPartitioner."""

    __test__ = False

    def __init__(
        self,
        module: torch.nn.Module,
        example_inputs: tuple[torch.Tensor, ...],
        dynamic_shapes: tuple[Any, ...] | None = None,
        partitioner_options: dict[str, Any] | None = None,
    ) -> None:
        stages = Tester.default_stage_classes() | {
            StageType.TO_EDGE_TRANSFORM_AND_LOWER: partial(OneDnnToEdgeTransformAndLower, partitioner_options or {}),
            StageType.QUANTIZE: partial(Quantize, quantizer=OneDnnQuantizer()),  # flows pass their own
        }
        super().__init__(module, example_inputs, stage_classes=stages, dynamic_shapes=dynamic_shapes)


def _flow(name: str, quantizer: OneDnnQuantizer | None = None, **partitioner_options: Any) -> TestFlow:
    factory: Callable[..., Tester] = partial(OneDnnTester, partitioner_options=partitioner_options)
    return TestFlow(
        name,
        backend=BACKEND,
        tester_factory=factory,
        quantize=quantizer is not None,
        quantize_stage_factory=(lambda: Quantize(quantizer=quantizer)) if quantizer is not None else None,
    )


ONEDNN_FLOWS: list[TestFlow] = [
    _flow("onednn"),
    _flow("onednn_bf16", precision="bf16"),
    _flow("onednn_static_int8_per_channel", OneDnnQuantizer()),
    _flow("onednn_static_int8_per_tensor", OneDnnQuantizer(per_channel=False)),
    _flow("onednn_dynamic_int8_per_channel", dynamic_int8=True),
]
