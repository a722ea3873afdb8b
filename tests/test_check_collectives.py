"""Every collective check accepts, on 2 namespace hosts x 2 ranks: the per-host test runs in
a group of each host's ranks, whose buffers must be laid out by the rank in that group."""
import json
import os

import pytest

from mpibench.commands.check import COLLECTIVES

from launch_helpers import LAUNCH, env
import fakecluster  # noqa: E402  (launch_helpers put launch/ on sys.path)
from fakecluster import FakeCluster  # noqa: E402

needs_hosts = pytest.mark.usefixtures("hosts")

# Floors far below anything real: this test is about every rank finishing every test with
# figures, not about this two-core machine's noise between hosts.
FLOORS = '{"intra": {"min_busbw_GBps": 1e-6}, "pair": {"min_busbw_GBps": 1e-6}}'


@needs_hosts
def test_every_check_collective_on_two_hosts_of_two_ranks(tmp_path):
    expect = tmp_path / "expect.json"
    expect.write_text(FLOORS)
    with FakeCluster(hosts=2, rates="1gbit") as c:
        spec = ",".join(f"{h}:2" for h in c.hosts)
        for coll in COLLECTIVES:
            out = tmp_path / f"{coll}.json"
            argv = [LAUNCH / "mpirun.sh", "--host", spec, "--mca", "plm_rsh_agent", c.agent,
                    "--", "check", "--collectives", coll, "-b", "64K", "-n", "2", "-w", "1",
                    "--expect", expect, "--json", out]
            try:
                r = c.run_on(c.hosts[0], [str(a) for a in argv], env=env(), timeout=120)
            finally:
                c._kill_strays()
            assert r.returncode == 0, f"{coll}\n{r.stdout}\n{r.stderr}"
            doc = json.loads(out.read_text())
            hosts = doc["check"]["hosts"]
            assert [h["host"] for h in hosts] == c.hosts
            assert all(h["intra"]["busbw_GBps"] > 0 and h["verdict"] == "PASS" for h in hosts), doc
            assert doc["results"][0]["collective"] == coll
