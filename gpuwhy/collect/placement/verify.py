"""``--verify``: compare the predicted placement with TensorFlow's real one.

Only meaningful where the predicted device exists: predicting for a GPU on a
machine without one gives a clear "not verified" instead of a comparison with
the all-CPU placement TF would make here. Node names change when TF inlines
bodies: a PartitionedCall's body node ``mul`` runs as ``PartitionedCall/mul``,
a lowered cond branch node as ``cond/then/_3/cond/add``; nodes are matched on
the call-site prefix and the body node name, and only matched nodes count.
"""

from __future__ import annotations

from gpuwhy.collect.placement.graph import device_type
from gpuwhy.collect.placement.names import qualified
from gpuwhy.facts import Disagreement, PlacementCheck
from gpuwhy.tfapi.run_metadata import placed_devices

__all__ = ["verify_placement"]


def _device_present(kind: str) -> bool:
    if kind == "CPU":
        return True
    import tensorflow as tf

    try:
        return bool(tf.config.list_physical_devices(kind))
    except Exception:  # noqa: BLE001 - the user's code may raise anything
        return False


def verify_placement(audited, target_device: str) -> PlacementCheck:
    target = audited.target
    if target.example_args is None and target.example_kwargs is None:
        return PlacementCheck(ran=False, reason="no example arguments to run the function with")
    if not _device_present(target_device):
        return PlacementCheck(
            ran=False,
            reason=f"no {target_device} on this machine: the placement shown is a prediction from "
            "TensorFlow's kernel registry",
        )
    try:
        actual = placed_devices(target.function, target.example_args or (), target.example_kwargs)
    except Exception as error:  # noqa: BLE001 - the user's function failed: say so, do not crash the audit
        return PlacementCheck(
            ran=False, reason=f"running the function failed: {type(error).__name__}: {error}"
        )
    if not actual:
        return PlacementCheck(
            ran=False,
            reason="TensorFlow recorded no placement: it records one only when it first "
            "instantiates a function, and this one had already run in this process",
        )
    placed = audited.placed
    flat = placed.flat
    top: dict[str, int] = {}
    nested: dict[str, list[int]] = {}
    for node in flat.nodes:
        if node.role != "op":
            continue
        if not node.call_chain:
            top[node.name] = node.id
        else:
            nested.setdefault(node.name, []).append(node.id)
    compared = 0
    disagreements = []
    for name, actual_device in actual.items():
        actual_type = device_type(actual_device)
        node_id = top.get(name)
        if node_id is None:
            node_id = _match_nested(name, nested, flat)
        if node_id is None:
            continue
        compared += 1
        predicted = placed.device[node_id]
        if predicted != actual_type:
            disagreements.append(
                Disagreement(
                    node=qualified(flat, node_id),
                    op=flat.nodes[node_id].op,
                    predicted=predicted,
                    actual=actual_type,
                )
            )
    return PlacementCheck(
        ran=True, device=target_device, nodes_compared=compared, disagreements=tuple(disagreements)
    )


def _match_nested(name: str, nested: dict[str, list[int]], flat) -> int | None:
    position = name.find("/")
    while position != -1:
        candidates = nested.get(name[position + 1 :])
        if candidates:
            for node_id in candidates:
                if name.startswith(flat.nodes[node_id].call_chain[0] + "/"):
                    return node_id
        position = name.find("/", position + 1)
    return None
