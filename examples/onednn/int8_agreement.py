"""Top-1 agreement of a statically quantized (int8) classifier with its fp32 self.

    python -m examples.onednn.int8_agreement [--model resnet18] [--images 1000]

Quantizes the built-in classifier with each delegate's own PT2E quantizer (calibrated on the same
generated images), runs the int8 .pte through the ExecuTorch runtime on other generated images and
counts how often its top-1 class is the fp32 eager model's. Issue target: >= 99% over >= 1000 images.

With random weights the classifier's head picks one class for every input (its bias and the mean
feature dominate the logits), which would make any agreement 100%. So the head is first made to
depend on the input: no bias, and its rows projected off the mean feature of the calibration images.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import torch
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime

from examples.onednn.benchmark_flows import _onednn, _onednn_quantizer, _xnnpack, _xnnpack_quantizer
from examples.onednn.models import MODELS

TARGET = 0.99
DELEGATES: dict[str, tuple[Callable[[], Any], Callable[[], list[Any]]]] = {
    "onednn": (_onednn_quantizer, _onednn),
    "xnnpack": (_xnnpack_quantizer, _xnnpack),
}


def images(count: int, shape: tuple[int, ...], seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) for _ in range(count)]


def input_dependent_head(model: torch.nn.Module, calibration: list[torch.Tensor]) -> int:
    """Zeroes the final linear's bias and removes the mean feature from its rows; returns how many
    distinct classes the fp32 model then predicts on the calibration images."""
    head = [module for module in model.modules() if isinstance(module, torch.nn.Linear)][-1]
    features: list[torch.Tensor] = []
    hook = head.register_forward_hook(lambda module, args, out: features.append(args[0].detach()))
    with torch.no_grad():
        for image in calibration:
            model(image)
        hook.remove()
        mean = torch.cat(features).mean(0)
        head.weight -= torch.outer(head.weight @ mean, mean) / (mean @ mean)
        if head.bias is not None:
            head.bias.zero_()
        return len({int(model(image).argmax()) for image in calibration})


def quantized_program(model: torch.nn.Module, example: torch.Tensor, delegate: str, calibration: int) -> bytes:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer, partitioners = DELEGATES[delegate]
    prepared = prepare_pt2e(torch.export.export(model, (example,)).module(), quantizer())
    with torch.no_grad():
        for image in images(calibration, tuple(example.shape), seed=1):
            prepared(image)
    exported = torch.export.export(convert_pt2e(prepared), (example,))
    return to_edge_transform_and_lower(exported, partitioner=partitioners()).to_executorch().buffer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet18", choices=sorted(MODELS))
    parser.add_argument("--images", type=int, default=1000, help="generated images to compare on")
    parser.add_argument("--calibration", type=int, default=32, help="generated images to calibrate on")
    parser.add_argument("--delegates", default="onednn,xnnpack", help=f"comma-separated: {', '.join(DELEGATES)}")
    args = parser.parse_args(argv)

    import executorch.backends.onednn  # noqa: F401  (registers the runtime)

    model, (example,) = MODELS[args.model]()
    classes = input_dependent_head(model, images(args.calibration, tuple(example.shape), seed=1))
    evaluation = images(args.images, tuple(example.shape), seed=2)
    with torch.no_grad():
        reference = [int(model(image).argmax()) for image in evaluation]
    print(
        f"{args.model}: top-1 agreement of int8 with fp32 eager over {args.images} generated images "
        f"(fp32 predicts {len(set(reference))} distinct classes; {classes} on the calibration images)"
    )
    ok = True
    for delegate in args.delegates.split(","):
        buffer = quantized_program(model, example, delegate, args.calibration)
        program = Runtime.get().load_program(buffer)  # keep the program alive while its method runs
        method = program.load_method("forward")
        agree = sum(int(method.execute([image])[0].argmax()) == want for image, want in zip(evaluation, reference))
        share = agree / len(evaluation)
        print(f"| {delegate} int8 | {agree}/{len(evaluation)} | {share:.1%} |")
        ok = ok and (delegate != "onednn" or share >= TARGET)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
