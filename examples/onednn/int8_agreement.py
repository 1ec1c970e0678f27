# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Top-1 agreement of a statically quantized (int8) classifier with its fp32 self.

    python -m examples.onednn.int8_agreement [--model trained_cnn] [--images 1000]

Quantizes a classifier with each delegate's own PT2E quantizer (calibrated on the same inputs), runs
the int8 .pte through the ExecuTorch runtime on other inputs and counts how often its top-1 class is
the fp32 eager model's. Issue target: >= 99% over >= 1000 inputs. Each row also gives the agreement of
the converted PT2E model run eagerly (the quantization scheme without the runtime), so a miss can be
told apart as the scheme's or the delegate's.

Why a trained model. Top-1 agreement only means something where the model's decisions have margins,
as a real classifier's do. A random-weight network's logits are near ties, which any int8 rounding
flips (899/1000 on `resnet_small`, 37.5% on ResNet-18): that measures the weights, not the
quantization. So the default model, `trained_cnn`, is the zoo's `resnet_small` (conv+bn, residual
adds, relu, max and average pooling, a linear head) trained here, in seconds on one core, on a
generated 10-class image task:

- each class is a fixed random low-frequency pattern (3x32x32, spatial frequencies up to 3 cycles per
  image, periodic, so a shift is an exact translation);
- a sample of class c is its pattern blended with a random other class's pattern (weight uniform in
  [0, 0.45]), rolled by up to 8 pixels each way, scaled by a contrast in [0.5, 1.5], offset by a
  per-channel brightness, plus Gaussian noise of twice the pattern's standard deviation.

The blend and the noise put some samples near a decision boundary, as in real data: fp32 accuracy on
held-out samples is about 95%, not 100%. Training, calibration and evaluation samples come from
different seeds. `--model` still selects the random-weight zoo models; their head is first made to
depend on the input (no bias, rows projected off the mean feature of the calibration images), as with
random weights it would otherwise pick one class for every input.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from executorch.backends.onednn.cli.zoo import MODELS
from executorch.exir import to_edge_transform_and_lower
from torch import nn
from torch.nn import functional as F

from examples.onednn.benchmark_flows import _onednn, _onednn_quantizer, _xnnpack, _xnnpack_quantizer

TARGET = 0.99
TRAINED = "trained_cnn"
DELEGATES: dict[str, tuple[Callable[[], Any], Callable[[], list[Any]]]] = {
    "onednn": (_onednn_quantizer, _onednn),
    "xnnpack": (_xnnpack_quantizer, _xnnpack),
}
# Disjoint seeds: prototypes, training batches (TRAIN_SEED + step), calibration, evaluation.
TASK_SEED, TRAIN_SEED, CALIBRATION_SEED, EVALUATION_SEED = 0, 1_000_000, 1, 2


# --- the generated task -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    """A 10-class image task: one low-frequency prototype per class, samples distorted from it."""

    prototypes: torch.Tensor  # (classes, 3, 32, 32), each of unit standard deviation
    blend: float = 0.45  # the most of another class's prototype mixed into a sample
    shift: int = 8  # pixels, each way
    noise: float = 2.0  # Gaussian noise's standard deviation

    @property
    def classes(self) -> int:
        return self.prototypes.shape[0]

    def samples(self, count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`count` samples (count, 3, 32, 32) and their labels, a deterministic function of `seed`."""
        generator = torch.Generator().manual_seed(seed)
        labels = torch.randint(self.classes, (count,), generator=generator)
        others = (labels + torch.randint(1, self.classes, (count,), generator=generator)) % self.classes
        blend = (torch.rand(count, generator=generator) * self.blend).view(count, 1, 1, 1)
        clean = (1 - blend) * self.prototypes[labels] + blend * self.prototypes[others]
        shifts = torch.randint(-self.shift, self.shift + 1, (count, 2), generator=generator).tolist()
        moved = torch.stack([torch.roll(image, shift, dims=(1, 2)) for image, shift in zip(clean, shifts)])
        contrast = 0.5 + torch.rand(count, 1, 1, 1, generator=generator)
        brightness = 0.3 * torch.randn(count, 3, 1, 1, generator=generator)
        noise = self.noise * torch.randn(moved.shape, generator=generator)
        return moved * contrast + brightness + noise, labels


def prototypes(seed: int, classes: int = 10, frequencies: int = 3) -> torch.Tensor:
    """Random periodic patterns with spatial frequencies up to `frequencies` cycles per image: smooth
    shapes a small CNN can tell apart under strong pixel noise, unlike white-noise prototypes."""
    generator = torch.Generator().manual_seed(seed)
    rows, cols = 2 * frequencies + 1, frequencies + 1  # rows: 0..f and -f..-1; cols: 0..f (real FFT)
    low = torch.complex(
        torch.randn(classes, 3, rows, cols, generator=generator),
        torch.randn(classes, 3, rows, cols, generator=generator),
    )
    spectrum = torch.zeros(classes, 3, 32, 17, dtype=torch.complex64)
    spectrum[..., : frequencies + 1, :cols] = low[..., : frequencies + 1, :]
    spectrum[..., -frequencies:, :cols] = low[..., frequencies + 1 :, :]
    spectrum[..., 0, 0] = 0  # no constant term: brightness is a distortion, not a class feature
    patterns = torch.fft.irfft2(spectrum, s=(32, 32))
    return patterns / patterns.flatten(1).std(1).view(classes, 1, 1, 1)


def train(model: nn.Module, task: Task, steps: int, batch: int = 64, learning_rate: float = 3e-3) -> float:
    """Adam with a cosine-decayed learning rate, a fresh batch of samples per step; returns seconds.

    Fresh samples each step mean no overfitting to watch for; the decay settles the weights, so
    accuracy does not depend on where the last noisy step left them.
    """
    start = time.perf_counter()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate * 0.5 * (1 + math.cos(math.pi * step / steps))
        inputs, labels = task.samples(batch, seed=TRAIN_SEED + step)
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return time.perf_counter() - start


def trained_cnn(steps: int = 600) -> tuple[nn.Module, Task, float]:
    """The zoo's `resnet_small` trained on the generated task; the model, the task, training seconds."""
    model, _ = MODELS["resnet_small"]()  # seeded initial weights
    task = Task(prototypes(TASK_SEED))  # training draws only from seeded generators: no global state
    return model, task, train(model, task, steps)


# --- random-weight models -----------------------------------------------------------------------------
def images(count: int, shape: tuple[int, ...], seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) for _ in range(count)]


def input_dependent_head(model: nn.Module, calibration: list[torch.Tensor]) -> int:
    """Zeroes the final linear's bias and removes the mean feature from its rows; returns how many
    distinct classes the fp32 model then predicts on the calibration images."""
    head = [module for module in model.modules() if isinstance(module, nn.Linear)][-1]
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


# --- quantizing and running ---------------------------------------------------------------------------
def quantized_program(
    model: nn.Module, example: torch.Tensor, delegate: str, calibration: list[torch.Tensor]
) -> tuple[torch.fx.GraphModule, bytes]:
    """The converted PT2E model (the eager reference for the scheme) and the lowered int8 .pte."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer, partitioners = DELEGATES[delegate]
    prepared = prepare_pt2e(torch.export.export(model, (example,)).module(), quantizer())
    with torch.no_grad():
        for image in calibration:
            prepared(image)
    converted = convert_pt2e(prepared)
    exported = torch.export.export(converted, (example,))
    return converted, to_edge_transform_and_lower(exported, partitioner=partitioners()).to_executorch().buffer


def predictions(buffer: bytes, inputs: list[torch.Tensor]) -> list[int]:
    """Top-1 class of the .pte on each input, through the ExecuTorch runtime (module-level and
    picklable, so a test can run it in a worker process)."""
    import executorch.backends.onednn  # noqa: F401  (registers the runtime)
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(buffer)  # keep the program alive while its method runs
    method = program.load_method("forward")
    return [int(method.execute([image])[0].argmax()) for image in inputs]


def eager_predictions(model: Callable[[torch.Tensor], torch.Tensor], inputs: list[torch.Tensor]) -> list[int]:
    with torch.no_grad():
        return [int(model(image).argmax()) for image in inputs]


def share(got: list[int], want: list[int]) -> float:
    return sum(a == b for a, b in zip(got, want)) / len(want)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=TRAINED, choices=[TRAINED, *sorted(MODELS)])
    parser.add_argument("--images", type=int, default=1000, help="inputs to compare on")
    parser.add_argument("--calibration", type=int, default=32, help="inputs to calibrate on, one at a time")
    parser.add_argument("--steps", type=int, default=600, help=f"training steps of {TRAINED} (batch 64)")
    parser.add_argument("--delegates", default="onednn,xnnpack", help=f"comma-separated: {', '.join(DELEGATES)}")
    args = parser.parse_args(argv)

    labels: list[int] | None = None
    if args.model == TRAINED:
        model, task, seconds = trained_cnn(args.steps)
        calibration = list(task.samples(args.calibration, seed=CALIBRATION_SEED)[0].split(1))
        evaluation_batch, label_tensor = task.samples(args.images, seed=EVALUATION_SEED)
        evaluation, labels, example = list(evaluation_batch.split(1)), label_tensor.tolist(), calibration[0]
        print(f"{TRAINED}: resnet_small trained {args.steps} steps of batch 64 in {seconds:.1f} s")
    else:
        model, (example,) = MODELS[args.model]()
        calibration = images(args.calibration, tuple(example.shape), seed=CALIBRATION_SEED)
        classes = input_dependent_head(model, calibration)
        evaluation = images(args.images, tuple(example.shape), seed=EVALUATION_SEED)
        print(f"{args.model}: random weights; fp32 predicts {classes} distinct classes on the calibration images")
    reference = eager_predictions(model, evaluation)
    accuracy = f", fp32 accuracy {share(reference, labels):.1%}" if labels else ""
    print(
        f"top-1 agreement of int8 with fp32 eager over {len(evaluation)} held-out inputs "
        f"(fp32 predicts {len(set(reference))} distinct classes{accuracy}; {len(calibration)} calibration inputs)"
    )
    print("| delegate | .pte agrees | share | PT2E reference agrees | int8 accuracy | seconds |")
    ok = True
    for delegate in args.delegates.split(","):
        start = time.perf_counter()
        converted, buffer = quantized_program(model, example, delegate, calibration)
        got = predictions(buffer, evaluation)
        seconds = time.perf_counter() - start
        agreement, scheme = share(got, reference), share(eager_predictions(converted, evaluation), reference)
        int8_accuracy = f"{share(got, labels):.1%}" if labels else "-"
        count = f"{round(agreement * len(evaluation))}/{len(evaluation)}"
        print(f"| {delegate} int8 | {count} | {agreement:.1%} | {scheme:.1%} | {int8_accuracy} | {seconds:.1f} |")
        ok = ok and (delegate != "onednn" or agreement >= TARGET)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
