#!/usr/bin/env python3
"""torch.nn.utils.prune's own masks on fixed weights, for the pruning masks'
tests (tests/pruner_test.cpp) to match exactly:

    /usr/bin/python3 tests/reference/pruning_reference.py OUT.json

Three nn.Linear layers (fc1 8x5, fc2 4x8, fc3 2x4) get seeded weights whose
magnitudes are all distinct, so PyTorch's order among equal values (which
topk leaves unspecified) never decides a mask. Each case starts from fresh
copies of these weights and applies a list of steps, exactly as a user calls
them: prune.global_unstructured(..., pruning_method=prune.L1Unstructured),
prune.l1_unstructured and prune.ln_structured (n = 1, 2, inf; dim 0 and 1),
with fractions whose product with the candidate count ends in .5 (Python's
round goes to the even neighbour), int amounts, and repeated pruning, where
only the entries or slices not pruned yet compete. The mask of every layer
after every step is written, and the weights after prune.remove.

The script refuses to write a case whose outcome would hang on rounding
noise: before every step it checks that the candidates' magnitudes or slice
norms are separated by more than float32 rounding, and that a case named
"half" really has a product ending in .5.
"""
import json
import math
import sys

import torch
import torch.nn as nn
import torch.nn.utils.prune as prune

LAYERS = [("fc1", 5, 8), ("fc2", 8, 4), ("fc3", 4, 2)]  # name, in_features, out_features
ALL = [name for name, _, _ in LAYERS]


def global_l1(names, amount):
    return {"method": "global_l1_unstructured", "tensors": names, **amount_of(amount)}


def l1(name, amount):
    return {"method": "l1_unstructured", "tensor": name, **amount_of(amount)}


def ln(name, amount, n, dim):
    return {"method": "ln_structured", "tensor": name, "n": "inf" if math.isinf(n) else n, "dim": dim,
            **amount_of(amount)}


def amount_of(amount):
    # JSON cannot tell 1 from 1.0, and PyTorch can: say which one it is.
    return {"amount": amount, "amount_kind": "count" if isinstance(amount, int) else "fraction"}


INF = float("inf")
# (name, steps, index of the step whose product must end in .5 or None)
CASES = [
    ("global_fraction_half_rounds_down", [global_l1(ALL, 0.03125)], 0),         # 80 * 0.03125 = 2.5 -> 2
    ("global_fraction_half_rounds_up", [global_l1(ALL, 0.04375)], 0),           # 80 * 0.04375 = 3.5 -> 4
    ("global_fraction_0_4", [global_l1(ALL, 0.4)], None),
    ("global_count", [global_l1(ALL, 7)], None),
    ("global_two_layers", [global_l1(["fc2", "fc1"], 0.3)], None),
    ("global_repeated", [global_l1(ALL, 0.4), global_l1(ALL, 0.4)], None),
    ("global_repeated_half", [global_l1(ALL, 0.25), global_l1(ALL, 0.075)], 1),  # 60 * 0.075 = 4.5 -> 4
    ("global_count_then_fraction", [global_l1(ALL, 7), global_l1(ALL, 0.5)], None),
    ("l1_fraction_half_rounds_down", [l1("fc1", 0.0625)], 0),                    # 40 * 0.0625 = 2.5 -> 2
    ("l1_fraction_half_rounds_up", [l1("fc2", 0.109375)], 0),                    # 32 * 0.109375 = 3.5 -> 4
    ("l1_count", [l1("fc2", 5)], None),
    ("l1_repeated", [l1("fc2", 0.4), l1("fc2", 0.4)], None),
    ("l1_then_global", [l1("fc1", 0.5), global_l1(ALL, 0.25)], None),
    ("ln2_dim0_half_rounds_down", [ln("fc1", 0.3125, 2, 0)], 0),                 # 8 rows * 0.3125 = 2.5 -> 2
    ("ln2_dim0_half_rounds_up", [ln("fc1", 0.4375, 2, 0)], 0),                   # 8 rows * 0.4375 = 3.5 -> 4
    ("ln2_dim1_half_rounds_down", [ln("fc1", 0.5, 2, 1)], 0),                    # 5 columns * 0.5 = 2.5 -> 2
    ("ln2_dim1_half_rounds_up", [ln("fc1", 0.7, 2, 1)], 0),                      # 5 columns * 0.7 = 3.5 -> 4
    ("ln1_dim0", [ln("fc2", 0.5, 1, 0)], None),
    ("ln1_dim1", [ln("fc2", 0.375, 1, 1)], 0),                                   # 8 columns * 0.375 = 3
    ("ln1_dim1_half", [ln("fc2", 0.3125, 1, 1)], 0),                             # 8 columns * 0.3125 = 2.5 -> 2
    ("ln1_dim_minus_1", [ln("fc1", 0.4, 1, -1)], None),
    ("lninf_dim0_count", [ln("fc1", 3, INF, 0)], None),
    ("ln2_dim0_repeated", [ln("fc1", 0.3125, 2, 0), ln("fc1", 0.5, 2, 0)], None),  # 2 of 8, then 3 of 6
    ("ln1_dim1_repeated_half", [ln("fc1", 0.5, 1, 1), ln("fc1", 0.5, 1, 1)], 1),   # 2 of 5, then 1.5 -> 2 of 3
    ("l1_then_ln2", [l1("fc1", 0.3), ln("fc1", 0.4, 2, 1)], None),
    ("ln2_then_global", [ln("fc1", 0.25, 2, 0), global_l1(ALL, 0.4)], None),
    ("ln2_then_l1", [ln("fc2", 0.25, 2, 0), l1("fc2", 0.5)], None),
]


def fixed_weights():
    g = torch.Generator().manual_seed(20240611)
    weights = {}
    for name, fan_in, fan_out in LAYERS:
        weights[name] = (torch.randn(fan_out, fan_in, generator=g) * 0.5).float()
    return weights


def candidates_count(module, step):
    mask = getattr(module, "weight_mask", None)
    w = module.weight
    if step["method"] != "ln_structured":
        return int((mask == 1).sum()) if mask is not None else w.numel()
    dim = step["dim"] % w.dim()
    if mask is None:
        return w.shape[dim]
    other = [d for d in range(w.dim()) if d != dim]
    return int((mask.sum(dim=other) != 0).sum())


def check_separated(values, what):
    values = sorted(values)
    for a, b in zip(values, values[1:]):
        if not b - a > 1e-5 * max(abs(b), 1e-30):
            raise SystemExit("pruning_reference.py: %s: %r and %r are too close to rank reliably; "
                             "change the seed" % (what, a, b))


def check_step_is_unambiguous(case, modules, step):
    if step["method"] == "ln_structured":
        m = modules[step["tensor"]]
        w = m.weight.detach().double()
        dim = step["dim"] % w.dim()
        other = [d for d in range(w.dim()) if d != dim]
        n = INF if step["n"] == "inf" else step["n"]
        norms = torch.linalg.vector_norm(w, ord=n, dim=other)
        mask = getattr(m, "weight_mask", None)
        alive = (mask.sum(dim=other) != 0) if mask is not None else torch.ones_like(norms, dtype=torch.bool)
        check_separated(norms[alive].tolist(), case + ": slice norms")
    else:
        names = step["tensors"] if step["method"] == "global_l1_unstructured" else [step["tensor"]]
        mags = []
        for name in names:
            m = modules[name]
            mask = getattr(m, "weight_mask", torch.ones_like(m.weight))
            mags += m.weight.detach()[mask == 1].abs().tolist()
        check_separated(mags, case + ": magnitudes")


def apply_step(modules, step):
    amount = step["amount"]
    if step["method"] == "global_l1_unstructured":
        prune.global_unstructured([(modules[n], "weight") for n in step["tensors"]],
                                  pruning_method=prune.L1Unstructured, amount=amount)
    elif step["method"] == "l1_unstructured":
        prune.l1_unstructured(modules[step["tensor"]], "weight", amount=amount)
    else:
        n = INF if step["n"] == "inf" else step["n"]
        prune.ln_structured(modules[step["tensor"]], "weight", amount=amount, n=n, dim=step["dim"])


def run_case(weights, name, steps, half_step):
    modules = {}
    for layer, fan_in, fan_out in LAYERS:
        m = nn.Linear(fan_in, fan_out)
        with torch.no_grad():
            m.weight.copy_(weights[layer])
        modules[layer] = m
    masks_after_steps = []
    for i, step in enumerate(steps):
        check_step_is_unambiguous(name, modules, step)
        if i == half_step and step["amount_kind"] == "fraction":
            names = step.get("tensors", [step.get("tensor")])
            candidates = sum(candidates_count(modules[n], step) for n in names)
            product = step["amount"] * candidates
            if "half" in name and product % 1 != 0.5:
                raise SystemExit("pruning_reference.py: %s: %r * %d = %r does not end in .5"
                                 % (name, step["amount"], candidates, product))
            step = dict(step, candidates=candidates, product=product)
            steps[i] = step
        apply_step(modules, step)
        masks_after_steps.append({layer: m.weight_mask.int().tolist()
                                  for layer, m in modules.items() if hasattr(m, "weight_mask")})
    for m in modules.values():
        if hasattr(m, "weight_mask"):
            prune.remove(m, "weight")
    return {"name": name, "steps": steps, "masks_after_steps": masks_after_steps,
            "weights_after_remove": {layer: m.weight.detach().tolist() for layer, m in modules.items()}}


def main(out):
    weights = fixed_weights()
    all_mags = torch.cat([w.reshape(-1) for w in weights.values()]).abs().tolist()
    check_separated(all_mags, "fixed weights")
    ref = {"format_version": 1, "generator": "tests/reference/pruning_reference.py",
           "torch_version": torch.__version__,
           "layers": [{"name": n, "in_features": i, "out_features": o} for n, i, o in LAYERS],
           "weights": {n: w.tolist() for n, w in weights.items()},
           "cases": [run_case(weights, n, [dict(s) for s in steps], h) for n, steps, h in CASES]}
    with open(out, "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: pruning_reference.py OUT.json")
    main(sys.argv[1])
