"""The process prefix in front of a vLLM line's header, in the forms real logs show.

vLLM's own (``decorate_logs``, every process from 0.10.1; V0's worker processes from 0.4.3): ``(APIServer
pid=3887) ``, ``(EngineCore_DP0 pid=5512) ``, ``(VllmWorker rank=1 pid=12231) ``. Ray's, for a process it runs,
whose output it forwards to the driver's: ``(RayWorkerWrapper pid=104699) ``; from another node with the node's
address, ``(RayWorkerWrapper pid=2433683, ip=192.168.4.105) ``; an actor with no name, ``(pid=2433683,
ip=192.168.4.105) `` (gpustack/gpustack#2415, vLLM's docs deployment/frameworks/lws.md; tests/data/unseen)."""

from __future__ import annotations

# inside a regex, no group: the parenthesised prefix (a name, the pid, Ray's node address)
PROCESS = r"\((?:[\w -]* )?pid=\d+(?:, ip=[^)\s]+)?\)"
# the same where a paste may have cut the '(' off
PROCESS_CUT = r"\(?" + PROCESS.removeprefix(r"\(")
# the process id read from the prefix's inside ('RayWorkerWrapper pid=169, ip=10.20.0.197'; the address is not read)
PID = r"(?:^|\s)pid=([0-9]+)"
