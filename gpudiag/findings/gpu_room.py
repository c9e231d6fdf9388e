"""Whether GPU work (torch_caps' CUDA checks, `--deep`, `repro`) can run on a host at all, read from its evidence:
the GPUs env lists and the GPUs its live servers hold. Advice offers GPU work, or `--force`, only where the probes'
own policy (probes/gpu_layer.py: a serving GPU is never touched, not even with --force) would let it run.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudiag.findings.server_flags import servers_of
from gpudiag.findings.server_scope import server_label
from gpudiag.models import HostResult
from gpudiag.probe_view import as_list, dig, probe
from probes.gpu_layer import FORCE_HINT  # the probes' own words for "busy with something else": one place


@dataclass(frozen=True)
class GpuRoom:
    known: bool  # env listed the host's GPUs
    gpus: tuple[int, ...]
    serving: tuple[int, ...]  # GPUs a live sglang server holds
    servers: tuple[str, ...]  # those servers, named

    @property
    def free(self) -> tuple[int, ...]:
        return tuple(g for g in self.gpus if g not in self.serving)

    def blocked(self) -> str | None:
        """Why no GPU work can run here ("all 8 GPUs serve server pid 2211 (…)"); None when some GPU is free."""
        if not self.known:
            return None  # the GPU list was not read: the probe's own policy decides on the host
        if not self.gpus:
            return "the host has no GPU"
        if self.free:
            return None
        return f"all {len(self.gpus)} GPUs serve {', '.join(self.servers)}" if self.servers else "every GPU serves"

    def blocked_gap(self) -> str | None:
        """The blocked reason with what would make the work possible, for a `not checked` answer."""
        why = self.blocked()
        if why is None or not self.gpus:
            return why
        return f"{why}, never touched even with --force: it needs a drained host or a maintenance window"


def _visible(value: object, gpus: tuple[int, ...], uuids: dict[str, int]) -> tuple[int, ...]:
    """A server's CUDA_VISIBLE_DEVICES as indices; unset or unreadable means every GPU."""
    text = str(value or "").strip()
    if not text:
        return gpus
    found = []
    for part in text.split(","):
        part = part.strip()
        if part.isdigit():
            found.append(int(part))
        elif part.lower().startswith("gpu-"):
            matches = [i for u, i in uuids.items() if u.lower().startswith(part.lower())]
            if len(matches) != 1:
                return gpus  # a UUID the list cannot place: assume the server may hold any GPU
            found.append(matches[0])
        else:
            return gpus
    return tuple(found)


def room(host: HostResult) -> GpuRoom:
    devices = [d for d in as_list(dig(probe(host, "env"), "gpus", "devices")) if isinstance(d, dict)]
    known = probe(host, "env") is not None
    gpus = tuple(int(d["index"]) for d in devices if isinstance(d.get("index"), int))
    uuids = {str(d["uuid"]): int(d["index"]) for d in devices if d.get("uuid") and isinstance(d.get("index"), int)}
    serving: set[int] = set()
    names = []
    for server in servers_of(host):
        visible = server.get("cuda_visible_devices") or dig(server, "env", "CUDA_VISIBLE_DEVICES")
        serving.update(_visible(visible, gpus, uuids))
        names.append(server_label(server))
    return GpuRoom(known=known, gpus=gpus, serving=tuple(sorted(serving & set(gpus))), servers=tuple(names))


def force_helps(reasons: list[str]) -> bool:
    """Whether --force would let a check run: some GPU was refused as busy with something else, not as serving."""
    return any(FORCE_HINT in r for r in reasons)
