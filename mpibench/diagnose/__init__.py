"""Stage 4, diagnose: which rank, host or link is slow, and why.

rankfacts and hostfacts read each rank's and host's facts (hostfacts also its line rate);
preamble puts them in a command's preamble and document; findings turns host facts into
findings; nccllog and ncclprobe read NCCL's choices; stragglers names slow ranks and hosts
from per-iteration times; pairs plans the pairs, reads each one's time and names slow
links; links is the link check between hosts (run and p2p); sink routes the engine's
rows and probes to results and stragglers; limits holds check's thresholds; checkverdict
judges check's figures per host, pair and rail and names the hosts to drain; topology
reads the switch tree (topology.conf); fabricplan plans check's pair rounds over leaves
and rails; tomography names the links, rails, uplinks and switches the failed paths
condemn; counters reads port error counters.

May import: errors, launch, measure, results.
"""
