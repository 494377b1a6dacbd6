#!/usr/bin/env python3
"""Leaderships of a loopback cluster made by scripts/cluster-up.sh.

  leaders.py count DIR         how many groups each voter leads, as node 1 sees them
  leaders.py to-node1 DIR      hands every group's leadership to node 1 through the
                               other voters' admin planes (start the cluster with
                               the balancer off, or it spreads them again)

Used by bench.sh (LEADERS=one) and callgrind-cluster.sh.
"""
import collections
import json
import re
import sys
import time
import urllib.request


def admin(d, i):
    return re.search(r'admin_listen = "([^"]+)"', open(f"{d}/n{i}.toml").read()).group(1)


def metrics(d, i):
    return json.load(urllib.request.urlopen(f"http://{admin(d, i)}/__ursula/metrics"))


def voters(d):
    return sorted(int(m) for m in re.findall(r"node_id = (\d+)", open(f"{d}/n1.toml").read())[1:])


def count(d):
    c = collections.Counter(g["current_leader"] for g in metrics(d, 1)["raft_groups"])
    print("leaders by node:", dict(sorted(c.items())))


def to_node1(d):
    for _ in range(50):
        moved = 0
        for i in voters(d):
            if i == 1:
                continue
            m = metrics(d, i)
            for g in m["raft_groups"]:
                if g["current_leader"] != i:
                    continue
                url = f"http://{admin(d, i)}/__ursula/raft/{g['raft_group_id']}/leader/transfer/1"
                req = urllib.request.Request(
                    url, method="POST", headers={"x-ursula-process-incarnation": m["process_incarnation"]}
                )
                try:
                    urllib.request.urlopen(req).read()
                except Exception:
                    pass
                moved += 1
        if moved == 0:
            return
        time.sleep(0.5)


if __name__ == "__main__":
    {"count": count, "to-node1": to_node1}[sys.argv[1]](sys.argv[2])
