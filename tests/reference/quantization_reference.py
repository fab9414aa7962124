#!/usr/bin/env python3
"""PyTorch's own quantization parameters on fixed inputs, for the
Quantizer's tests (tests/quantizer_test.cpp) to match:

    /usr/bin/python3 tests/reference/quantization_reference.py OUT.json

Observers (torch.ao.quantization): MinMaxObserver (quint8 affine, with and
without reduce_range; qint8 symmetric), MovingAverageMinMaxObserver
(averaging_constant 0.01), PerChannelMinMaxObserver (qint8
per_channel_symmetric) with quantize_per_channel, and quantize_per_tensor.
The input batches are written too, so both sides see the same numbers.
"""
import json
import sys

import torch
from torch.ao.quantization import MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver


def qparams(obs):
    scale, zp = obs.calculate_qparams()
    return {"scale": float(scale.reshape(-1)[0]), "zero_point": int(zp.reshape(-1)[0]),
            "min": float(obs.min_val), "max": float(obs.max_val)}


def main(out):
    g = torch.Generator().manual_seed(1234)
    # Batches with different ranges, one all positive, one with an outlier.
    batches = [torch.randn(256, generator=g) * 2.0 + 0.5,
               torch.rand(256, generator=g) * 3.0,
               torch.randn(256, generator=g) * 0.5 - 1.0]
    batches[2][17] = 9.0
    ref = {"batches": [b.tolist() for b in batches]}
    cases = {
        "min_max_affine": lambda: MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_affine),
        "min_max_affine_reduced": lambda: MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_affine,
                                                         reduce_range=True),
        "min_max_symmetric": lambda: MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric),
        "moving_average_affine": lambda: MovingAverageMinMaxObserver(averaging_constant=0.01, dtype=torch.quint8,
                                                                     qscheme=torch.per_tensor_affine),
    }
    for name, make in cases.items():
        obs = make()
        for b in batches:
            obs(b)
        ref[name] = qparams(obs)

    weight = torch.randn(6, 40, generator=g) * torch.tensor([0.01, 0.1, 1.0, 3.0, 0.5, 2.0]).unsqueeze(1)
    weight[3, 5] = 0.0
    per_channel = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    per_channel(weight)
    scales, zps = per_channel.calculate_qparams()
    q = torch.quantize_per_channel(weight, scales, zps, 0, torch.qint8)
    ref["weight"] = {"values": weight.tolist(), "scales": scales.tolist(), "int": q.int_repr().tolist()}

    x = torch.randn(300, generator=g) * 4.0
    scale, zp = 0.037, 117
    ref["quantize_per_tensor"] = {"x": x.tolist(), "scale": scale, "zero_point": zp,
                                  "int": torch.quantize_per_tensor(x, scale, zp, torch.quint8).int_repr().tolist()}
    with open(out, "w") as f:
        json.dump(ref, f)


if __name__ == "__main__":
    main(sys.argv[1])
