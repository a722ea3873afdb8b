#!/usr/bin/env python3
"""A fabricated GPU host's sysfs tree and nvidia-smi answers, for the test switch
hostfacts:RANK:DIR (stdlib only): GPUs with NVLink links and PCIe links, RDMA NICs under the
same PCIe switches, /proc/modules. The switch puts DIR in place of the host's root and of
nvidia-smi (files nvidia-smi-gpus.csv, nvidia-smi-nvlink.txt, nvidia-smi-topo.txt).

    build("/tmp/h1", gpus=8, nics=4, downtrained={2: 8}, nvlink_down={5: 2})

    python launch/fakesysfs.py DIR [--gpus 8] [--nics 4] [--downtrain GPU:WIDTH] [--nvlink-down GPU:N]
"""
from __future__ import annotations

import argparse
import os

H100 = "NVIDIA H100 80GB HBM3"
NDR = "400 Gb/sec (4X NDR)"
GEN4 = "16.0 GT/s PCIe"
NVLINK4 = 26.562        # GB/s a link, as nvidia-smi nvlink -s prints it for an H100


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def _device(root: str, parents: list[str], bus: str, vendor: str, klass: str, speed: str,
            width: int, max_speed: str, max_width: int) -> str:
    """A PCI device under its bridges, linked from sys/bus/pci/devices; its folder."""
    d = os.path.join(root, "sys/devices", *parents, bus)
    for name, value in (("vendor", vendor), ("class", klass), ("current_link_speed", speed),
                        ("current_link_width", str(width)), ("max_link_speed", max_speed),
                        ("max_link_width", str(max_width))):
        _write(os.path.join(d, name), value)
    link = os.path.join(root, "sys/bus/pci/devices", bus)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(os.path.relpath(d, os.path.dirname(link)), link)
    return d


def build(root: str, gpus: int = 8, nics: int = 4, model: str = H100, links: int = 18,
          link_GBps: float = NVLINK4, nic_rate: str = NDR, downtrained: dict[int, int] | None = None,
          nvlink_down: dict[int, int] | None = None, nic_rates: dict[int, str] | None = None) -> str:
    """The tree under root: GPU i at PCIe Gen4 x16 (x downtrained[i]), with `links` NVLink links
    (nvlink_down[i] of them inactive); NIC k (mlx5_k, rate nic_rates[k] or nic_rate) under the
    PCIe switch of GPUs 2k and 2k+1; two root complexes. Returns root."""
    downtrained, nvlink_down, nic_rates = downtrained or {}, nvlink_down or {}, nic_rates or {}
    per_switch = max(1, gpus // max(nics, 1))
    csv, nvlink = [], []
    for i in range(gpus):
        rc = f"{0x10 + 0x80 * (i * 2 // gpus):02x}"
        switch = f"0000:{rc}:{1 + i // per_switch:02x}.0"
        bus = f"0000:{int(rc, 16) + 1 + i:02x}:00.0"
        _device(root, [f"pci0000:{rc}", switch], bus, "0x10de", "0x030200", GEN4,
                downtrained.get(i, 16), GEN4, 16)
        csv.append(f"{model}, 550.54.15, 0000{bus.upper()}")
        down = nvlink_down.get(i, 0)
        nvlink.append(f"GPU {i}: {model} (UUID: GPU-{i:08x}-fake)")
        nvlink += [f"\t Link {j}: " + ("<inactive>" if j >= links - down else f"{link_GBps} GB/s")
                   for j in range(links)]
    for k in range(nics):
        i = min(k * per_switch, gpus - 1) if gpus else 0
        rc = f"{0x10 + 0x80 * (i * 2 // max(gpus, 1)):02x}"
        switch = f"0000:{rc}:{1 + i // per_switch:02x}.0"
        bus = f"0000:{int(rc, 16) + 0x40 + k:02x}:00.0"
        d = _device(root, [f"pci0000:{rc}", switch], bus, "0x15b3", "0x020700", GEN4, 16, GEN4, 16)
        port = os.path.join(root, "sys/class/infiniband", f"mlx5_{k}", "ports", "1")
        _write(os.path.join(port, "state"), "4: ACTIVE")
        _write(os.path.join(port, "rate"), nic_rates.get(k, nic_rate))
        _write(os.path.join(port, "link_layer"), "InfiniBand")
        dev = os.path.join(root, "sys/class/infiniband", f"mlx5_{k}", "device")
        os.symlink(os.path.relpath(d, os.path.dirname(dev)), dev)
    net = os.path.join(root, "sys/class/net/eth0")
    _write(os.path.join(net, "operstate"), "up")
    _write(os.path.join(net, "speed"), "25000")
    _write(os.path.join(root, "proc/modules"), "\n".join(
        f"{m} 16384 0 - Live 0x0" for m in ("ib_core", "ib_uverbs", "rdma_ucm", "mlx5_ib")))
    _write(os.path.join(root, "nvidia-smi-gpus.csv"), "\n".join(csv))
    _write(os.path.join(root, "nvidia-smi-nvlink.txt"), "\n".join(nvlink))
    head = "\t".join(["", *(f"GPU{i}" for i in range(gpus))])
    rows = ["\t".join([f"GPU{i}", *("X" if j == i else f"NV{links}" for j in range(gpus))])
            for i in range(gpus)]
    _write(os.path.join(root, "nvidia-smi-topo.txt"), "\n".join([head, *rows]))
    return root


def _pairs(items: list[str]) -> dict[int, int]:
    return {int(a): int(b) for a, b in (x.split(":") for x in items)}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--nics", type=int, default=4)
    p.add_argument("--downtrain", action="append", default=[], metavar="GPU:WIDTH")
    p.add_argument("--nvlink-down", action="append", default=[], metavar="GPU:N")
    a = p.parse_args()
    print(build(a.dir, a.gpus, a.nics, downtrained=_pairs(a.downtrain), nvlink_down=_pairs(a.nvlink_down)))
