# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The test-only cache of torch.export's CIA walk (cia_materialization.py) changes no result."""

from __future__ import annotations

import cia_materialization
import torch
import torch._export.utils as export_utils


def test_the_cache_is_installed_and_collects_what_torch_collects() -> None:
    assert export_utils._materialize_cpp_cia_ops is cia_materialization._materialize_when_registrations_change
    cached = export_utils._collect_all_valid_cia_ops()
    export_utils._materialize_cpp_cia_ops = cia_materialization._walk_registrations
    try:
        assert export_utils._collect_all_valid_cia_ops() == cached
    finally:
        cia_materialization.install()


def test_an_op_registered_later_is_still_found() -> None:
    export_utils._collect_all_valid_cia_ops()  # the walk is now cached
    library = torch.library.Library("onednn_cia_test", "DEF")
    library.define("twice(Tensor x) -> Tensor")
    library.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
    try:
        names = {op.name() for op in export_utils._collect_all_valid_cia_ops()}
        assert "onednn_cia_test::twice" in names
    finally:
        library._destroy()


def test_torch_ops_callable_stand_in_subscribes_and_checks_as_callable() -> None:
    from collections.abc import Callable
    from typing import ParamSpec, TypeVar

    import torch._ops as torch_ops

    stand_in = torch_ops.Callable
    assert isinstance(stand_in, cia_materialization._CallableOnce)
    parameters, result = ParamSpec("parameters"), TypeVar("result")
    assert stand_in[parameters, result] is stand_in[parameters, result]  # built once
    assert stand_in[parameters, result] == Callable[parameters, result]
    assert stand_in[[int], str] == Callable[[int], str]  # unhashable: built each time
    assert isinstance(len, stand_in) and isinstance(lambda: 0, stand_in)
    assert not isinstance(3, stand_in) and not isinstance("text", stand_in)
    # torch's own use of it: an op registers and dispatches a Python kernel as before.
    operator = torch.ops.aten.relu.default
    saved = operator.py_kernels.copy()
    try:
        operator.py_impl(torch._C.DispatchKey.CompositeImplicitAutograd)(lambda x: x)
        assert operator.py_kernels[torch._C.DispatchKey.CompositeImplicitAutograd](7) == 7
    finally:
        operator.py_kernels.clear()
        operator.py_kernels.update(saved)
        operator._dispatch_cache.clear()
