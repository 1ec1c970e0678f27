# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Test-only speed-ups of torch.export's decompositions, which take most of every lowering's time here.

`ExportedProgram.run_decompositions` collects the CompositeImplicitAutograd ops of every op namespace,
and for each namespace `torch._export.utils._materialize_cpp_cia_ops` walks all of the dispatcher's CIA
registrations again (torch 2.13: 43 walks per collection, 6 collections per `to_edge_transform_and_lower`
with a partitioner that checks ops; 0.45 s each on a 2-core EPYC). The walk only resolves
`torch.ops.<ns>.<op>.<overload>` attributes, so a second walk over the same registrations changes
nothing: this skips it until the list of registrations changes (torch does not cache it because
custom ops can be registered later; they change the list). Results are those of torch's own function.

Then `_override_composite_implicit_decomp` registers a kernel for each of those ops (about 12,000
`OpOverload.py_impl` calls per `run_decompositions`), and each call defines a function annotated
`Callable[_P, _T]`: Python 3.11 builds those two annotation objects anew every time, 0.1 s per
`run_decompositions` on a 2-core Zen 3. torch/_ops.py reads `Callable` for annotations and one isinstance
check, so there it becomes a stand-in that builds each subscription once and answers isinstance as
`Callable` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch._export.utils as export_utils
import torch._ops as torch_ops

_walk_registrations = export_utils._materialize_cpp_cia_ops
_walked: list[str] | None = None


def _materialize_when_registrations_change() -> None:
    global _walked
    registrations = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    if registrations != _walked:
        _walk_registrations()
        _walked = registrations


class _CallableOnce:
    """`collections.abc.Callable` whose subscriptions are built once (unhashable ones every time)."""

    def __init__(self) -> None:
        self._aliases: dict[object, object] = {}

    def __getitem__(self, parameters: Any) -> object:
        try:
            return self._aliases[parameters]
        except KeyError:
            alias = self._aliases[parameters] = Callable[parameters]
            return alias
        except TypeError:  # a list of argument types
            return Callable[parameters]

    def __instancecheck__(self, instance: object) -> bool:
        return isinstance(instance, Callable)


def install() -> None:
    export_utils._materialize_cpp_cia_ops = _materialize_when_registrations_change
    if torch_ops.Callable is Callable:
        torch_ops.Callable = _CallableOnce()  # type: ignore[attr-defined]
