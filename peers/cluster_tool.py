#!/usr/bin/python3
"""Small helpers of scripts/peers.sh around a `tessera up` cluster.

  cluster_tool.py copy-config SRC DST FIRST_PORT
      Writes a copy of cluster file SRC to DST with the cluster renamed peers-<name without
      "local-"> and the nodes' ports renumbered FIRST_PORT, FIRST_PORT + 1, ... in file order, so
      that the study never touches another user's cluster, run folder or ports. Prints the new name.
  cluster_tool.py nodes EMULATION_JSON
      One line per node, in cluster order, of what `tessera up` recorded in emulation.json
      (emulation/include/tessera/emulation/emulation.hpp):
        name cgroup_path netns host_address node_address
      with "-" for what the node does not have (no cgroup: not CPU-emulated; no netns: it lives in
      the root network namespace).
  cluster_tool.py report-summary REPORT_JSON
      "makespan_s slowest_compute_s yes|no" of a `tessera multiply --report` file: the makespan,
      the longest any node spent multiplying (its kernel time), and whether C verified.
  cluster_tool.py report-nodes REPORT_JSON
      One CSV line per node of that report: name,1,gflop,cpu_s,compute_s (gflop: its rows' share
      of 2 m n k; cpu_s: its worker's CPU time, multiplying and communicating).
"""
import json
import re
import sys


def copy_config(source, destination, first_port):
    text = open(source, encoding="utf-8").read()
    match = re.search(r"^cluster:\s*(\S+)", text, flags=re.M)
    if not match:
        sys.exit(f"cluster_tool: {source} has no 'cluster:' line")
    name = "peers-" + match.group(1).removeprefix("local-")
    text = text[: match.start()] + f"cluster: {name}" + text[match.end():]
    ports = iter(range(first_port, first_port + 1000))
    text = re.sub(r"\bport:\s*\d+", lambda _: f"port: {next(ports)}", text)
    with open(destination, "w", encoding="utf-8") as out:
        out.write(f"# Copy of {source} for scripts/peers.sh (own cluster name and ports).\n" + text)
    print(name)


def nodes(emulation_json):
    state = json.load(open(emulation_json, encoding="utf-8"))
    for node in state["nodes"]:
        fields = [node["node"], node.get("cgroup_path", ""), node.get("netns", ""), node.get("host_address", ""),
                  node.get("node_address", "")]
        print(" ".join(field if field else "-" for field in fields))


def report_summary(path):
    report = json.load(open(path, encoding="utf-8"))
    slowest = max((node["compute_s"] for node in report["nodes"]), default=0.0)
    print(report["makespan_s"], slowest, "yes" if report["verified"] else "no")


def report_nodes(path):
    report = json.load(open(path, encoding="utf-8"))
    for node in report["nodes"]:
        gflop = 2.0 * node["rows"] * report["n"] * report["k"] * 1e-9
        cpu = node["worker_compute_cpu_s"] + node["worker_io_cpu_s"]
        print(f"{node['name']},1,{gflop:.3f},{cpu:.3f},{node['compute_s']:.3f}")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "copy-config":
        copy_config(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) == 3 and sys.argv[1] == "nodes":
        nodes(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "report-summary":
        report_summary(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "report-nodes":
        report_nodes(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
