# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Test-only speed-up of torch.export's decompositions (about a third of every lowering here).

`ExportedProgram.run_decompositions` collects the CompositeImplicitAutograd ops of every op namespace,
and for each namespace `torch._export.utils._materialize_cpp_cia_ops` walks all of the dispatcher's CIA
registrations again (torch 2.13: 43 walks per collection, 6 collections per `to_edge_transform_and_lower`
with a partitioner that checks ops; 0.45 s each on a 2-core EPYC). The walk only resolves
`torch.ops.<ns>.<op>.<overload>` attributes, so a second walk over the same registrations changes
nothing: this skips it until the list of registrations changes (torch does not cache it because
custom ops can be registered later; they change the list). Results are those of torch's own function.
"""

from __future__ import annotations

import torch
import torch._export.utils as export_utils

_walk_registrations = export_utils._materialize_cpp_cia_ops
_walked: list[str] | None = None


def _materialize_when_registrations_change() -> None:
    global _walked
    registrations = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    if registrations != _walked:
        _walk_registrations()
        _walked = registrations


def install() -> None:
    export_utils._materialize_cpp_cia_ops = _materialize_when_registrations_change
