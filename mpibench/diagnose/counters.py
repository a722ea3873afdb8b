"""A host's port error counters and link state, read before and after each of `check`'s
rounds. Only error counters are kept (byte and packet counts move on every healthy link)."""
import os

from .hostfacts import listdir, number, read_text

IB_ERRORS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
             "port_xmit_discards", "port_rcv_remote_physical_errors",
             "port_rcv_switch_relay_errors", "local_link_integrity_errors",
             "excessive_buffer_overrun_errors", "port_xmit_constraint_errors",
             "port_rcv_constraint_errors", "VL15_dropped")
NET_ERRORS = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped", "rx_crc_errors",
              "rx_frame_errors", "rx_fifo_errors", "tx_fifo_errors", "rx_missed_errors",
              "rx_over_errors", "tx_carrier_errors", "tx_aborted_errors")


def snapshot(root="/"):
    """{port: {'state', 'speed', 'counters'}}, port 'mlx5_0/1' (device/port) or 'eth1'."""
    ib, net = os.path.join(root, "sys/class/infiniband"), os.path.join(root, "sys/class/net")
    # (port, its folder, the counters' folder, their names, the state and speed files)
    ports = [(f"{dev}/{port}", os.path.join(ib, dev, "ports", port), "counters", IB_ERRORS,
              "state", "rate") for dev in listdir(ib) for port in listdir(os.path.join(ib, dev, "ports"))]
    ports += [(name, os.path.join(net, name), "statistics", NET_ERRORS, "operstate", "speed")
              for name in listdir(net) if name != "lo"]
    out = {}
    for port, d, folder, names, state, speed in ports:
        found = {c: number(read_text(os.path.join(d, folder, c))) for c in names}
        out[port] = {"state": (read_text(os.path.join(d, state)) or "unknown").split(":")[-1].strip(),
                     "speed": read_text(os.path.join(d, speed)),
                     "counters": {c: v for c, v in found.items() if v is not None}}
    return out


def delta(before, after):
    """[{'port', 'what', 'moved' or 'from'/'to'}]: what rose, changed, came or went."""
    moved = []
    for port in sorted(set(before) | set(after)):
        a, b = before.get(port), after.get(port)
        if a is None or b is None:
            moved.append({"port": port, "what": "port", "from": "absent" if a is None else "present",
                          "to": "absent" if b is None else "present"})
            continue
        for key in ("state", "speed"):
            if a[key] != b[key]:
                moved.append({"port": port, "what": key, "from": a[key], "to": b[key]})
        for name, value in b["counters"].items():
            old = a["counters"].get(name)
            if old is not None and value > old:
                moved.append({"port": port, "what": name, "moved": value - old})
    return moved


def describe(changes):
    """'eth1 rx_dropped +3, eth1 state up -> down' (empty text for none)."""
    return ", ".join(f"{c['port']} {c['what']} +{c['moved']}" if "moved" in c
                     else f"{c['port']} {c['what']} {c['from']} -> {c['to']}" for c in changes)


def on_ports(changes, ports):
    """The changes on the named ports (all of them when ports is empty or None)."""
    return [c for c in changes if not ports or c["port"] in ports or c["port"].split("/")[0] in ports]
