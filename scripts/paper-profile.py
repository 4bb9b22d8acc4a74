#!/usr/bin/env python3
"""A profile for a cluster on paper: every node of CONFIG gets the measured figures of a node of
another cluster's profile, chosen by its `kind`, so that `tessera model` can forecast a lab nobody
has profiled (64 boards one cannot emulate on one machine) from nodes that were measured.

    scripts/paper-profile.py configs/pi-lab-64.yaml --from configs/local-mixed-lan.profile.yaml \
        --like desktop=desktop --like pi=pi1 --link pi=1gbit --out configs/pi-lab-64.profile.yaml

--like KIND=NODE   nodes of that kind take NODE's figures (speed curve, graph rates, CPU figures);
--link KIND=RATE   and their link that rate each way (tc-style: 1gbit, 100mbit) instead of NODE's.
The file says at its top that it is on paper and where its figures come from; every node is its
own host (named after the node), and the switch's uplink is left to the cluster file's rate.
"""
import argparse
import copy
import re
import sys

import yaml

UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1.0}


def rate_bytes_per_second(text):
    for unit, bits in UNITS.items():
        if text.endswith(unit):
            try:
                value = float(text[: -len(unit)])
            except ValueError:
                break
            if value > 0:
                return value * bits / 8.0
    sys.exit(f"paper-profile: {text!r} is not a rate; write e.g. 1gbit or 100mbit")


def pairs(items, flag):
    out = {}
    for item in items or []:
        if "=" not in item:
            sys.exit(f"paper-profile: {flag} {item!r}: write KIND=VALUE")
        key, value = item.split("=", 1)
        out[key] = value
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("--from", dest="source", required=True, help="a measured profile")
    parser.add_argument("--like", action="append", required=True, help="KIND=NODE of the measured profile")
    parser.add_argument("--link", action="append", help="KIND=RATE")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    with open(args.config) as f:
        cluster = yaml.safe_load(f)
    with open(args.source) as f:
        text = f.read()
    measured = yaml.safe_load(text)
    # Times stay the text they were (YAML would read them as datetimes and write them back otherwise).
    stamps = dict(re.findall(r"^\s*(?:- )?name: (\S+)\n(?:.*\n)*?\s*measured_at: (\S+)", text, re.M))
    top_stamp = re.search(r"^measured_at: (\S+)", text, re.M).group(1)
    by_name = {node["name"]: node for node in measured.get("nodes", [])}
    like = pairs(args.like, "--like")
    links = {kind: rate_bytes_per_second(rate) for kind, rate in pairs(args.link, "--link").items()}
    for kind, name in like.items():
        if name not in by_name:
            sys.exit(f"paper-profile: {args.source} has no node {name!r}; it has {', '.join(by_name)}")

    nodes = []
    for node in cluster["nodes"]:
        kind = node.get("kind", "")
        if kind not in like:
            sys.exit(f"paper-profile: node {node['name']!r} is of kind {kind!r}; say whose figures it takes with --like {kind or 'KIND'}=NODE")
        entry = copy.deepcopy(by_name[like[kind]])
        entry["name"] = node["name"]
        entry["endpoint"] = f"{node['host']}:{node['port']}"
        entry["hostname"] = node["name"]
        entry["fingerprint"] = "on paper"
        entry["measured_at"] = stamps.get(like[kind], top_stamp)
        if kind in links:
            entry["link"]["to_node_bytes_per_s"] = links[kind]
            entry["link"]["from_node_bytes_per_s"] = links[kind]
        nodes.append(entry)

    profile = {
        "cluster": cluster["cluster"],
        "measured_at": top_stamp,
        "coordinator_send_bytes_per_s": measured["coordinator_send_bytes_per_s"],
        "nodes": nodes,
    }
    if "coordinator_cpu_s_per_byte" in measured:
        profile["coordinator_cpu_s_per_byte"] = measured["coordinator_cpu_s_per_byte"]
    note = ", ".join(f"{kind} as {name}" for kind, name in like.items())
    link_note = ", ".join(f"{kind} links {rate}" for kind, rate in pairs(args.link, "--link").items())
    with open(args.out, "w") as f:
        f.write("# On paper, not measured: written by scripts/paper-profile.py from "
                f"{args.source} ({note}{'; ' + link_note if link_note else ''}).\n")
        f.write("# Forecasts from it say what such a lab would do if its nodes were those measured ones.\n")
        yaml.safe_dump(profile, f, sort_keys=False, default_flow_style=None, width=200)


if __name__ == "__main__":
    main()
