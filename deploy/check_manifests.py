#!/usr/bin/env python3
"""Consistency checks of deploy/: the rendered Kubernetes objects of each
kustomize target, the bare-metal example configs and the systemd units.

Run by deploy/check.sh, which renders the targets and gives their YAML:

    check_manifests.py --rendered base=FILE --rendered dev=FILE ... \
        [--k8s-versions 1.30.0,1.37.0] [--extract-configs DIR]

Prints one `ok` line per check that passed and one `FAIL` line per check
that did not; exits 1 when any failed. With --extract-configs it also
writes every voter and gateway config the targets carry, plus those of
deploy/configs, into DIR (listed in DIR/index.tsv) for `ursula config check`.
"""

import argparse
import base64
import ipaddress
import json
import os
import re
import shlex
import sys
from urllib.parse import urlsplit

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(REPO, "deploy")
SPEC_DIR = os.environ.get("URSULA_SPEC_DIR", os.path.join(os.path.dirname(REPO), "shared", "spec"))

# What the product documents (spec/35 "Graceful voter shutdown", README):
# a voter exits at most 20 s after the first SIGTERM.
VOTER_STOP_DEADLINE_SECS = 20
READY_PATH = "/__ursula/ready"
IMAGE = "ursula:0.9.0"
VOTER_LABELS = {"app.kubernetes.io/name": "ursula", "app.kubernetes.io/component": "voter"}
GATEWAY_LABELS = {"app.kubernetes.io/name": "ursula", "app.kubernetes.io/component": "gateway"}

# Per target: voters, gateways (Deployment replicas = HPA minReplicas), and
# what only production must have.
EXPECT = {
    "base": {"voters": 3, "gateways": 2},
    "dev": {"voters": 1, "gateways": 1},
    "production": {"voters": 3, "gateways": 2, "s3": True, "network_policy": True, "access_control": True},
}


class Report:
    def __init__(self):
        self.failures = 0

    def check(self, scope, what, ok, detail=""):
        if ok:
            print(f"ok    {scope}: {what}")
        else:
            self.failures += 1
            print(f"FAIL  {scope}: {what}" + (f": {detail}" if detail else ""))
        return ok


R = Report()


class Bad(Exception):
    """A check that cannot go on (a missing object or file)."""


# ---------------------------------------------------------------- helpers


def host_port(addr):
    """`host:port` (IPv6 in brackets) -> (host, port)."""
    m = re.fullmatch(r"\[?([^\]]*)\]?:(\d+)", addr or "")
    if not m:
        raise Bad(f"{addr!r} is not host:port")
    return m.group(1), int(m.group(2))


def url_parts(url):
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname or u.port is None or u.path not in ("", "/"):
        raise Bad(f"{url!r} is not http(s)://host:port")
    return u.hostname, u.port


def is_loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def find(docs, kind, name=None):
    found = [d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    return found


def one(docs, kind, name):
    found = find(docs, kind, name)
    if len(found) != 1:
        raise Bad(f"expected one {kind} {name}, found {len(found)}")
    return found[0]


def object_data(docs, kind, name):
    obj = find(docs, kind, name)
    if not obj:
        return None
    obj = obj[0]
    data = dict(obj.get("data") or {})
    if kind == "Secret":
        data = {k: base64.b64decode(v).decode() for k, v in data.items()}
        data.update(obj.get("stringData") or {})
    return data


def pod_files(docs, pod, container, claims=()):
    """The files the container sees from ConfigMaps and Secrets: path -> text.
    `claims`: the volumeClaimTemplates of a StatefulSet (no files of ours)."""
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    volumes.update({c: {"name": c, "persistentVolumeClaim": {}} for c in claims})
    files = {}

    def add_source(kind, name, items, optional, mount, subpath):
        data = object_data(docs, kind, name)
        if data is None:
            if optional:
                return
            raise Bad(f"{kind} {name} (mounted at {mount}) is not among the rendered objects")
        pairs = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
        for key, rel in pairs:
            if key not in data:
                raise Bad(f"{kind} {name} has no key {key}")
            if subpath:
                if rel == subpath:
                    files[mount] = data[key]
            else:
                files[os.path.join(mount, rel)] = data[key]

    for vm in container.get("volumeMounts") or []:
        vol = volumes.get(vm["name"])
        if vol is None:
            raise Bad(f"volumeMount {vm['name']} names no volume")
        mount, sub = vm["mountPath"], vm.get("subPath")
        sources = []
        if "configMap" in vol:
            sources.append(("ConfigMap", vol["configMap"]))
        if "secret" in vol:
            s = dict(vol["secret"])
            s["name"] = s.get("secretName")
            sources.append(("Secret", s))
        for src in (vol.get("projected") or {}).get("sources") or []:
            if "configMap" in src:
                sources.append(("ConfigMap", src["configMap"]))
            if "secret" in src:
                sources.append(("Secret", src["secret"]))
        for kind, src in sources:
            add_source(kind, src["name"], src.get("items"), src.get("optional", False), mount, sub)
    return files


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env") or [] if "value" in e}


def port_number(container, port):
    """A probe's or Service's port (number or name) as a number of the container."""
    if isinstance(port, int):
        return port
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return p["containerPort"]
    raise Bad(f"port name {port!r} is not a port of container {container['name']}")


def duration_secs(probe):
    return probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)


# ------------------------------------------------- the gateway's flags


def gateway_flags_spec():
    """GatewayArgs of gateway/src/flags.rs: field -> (flag, kind), kind one of
    'value', 'repeat', 'switch'. `check` is a mode of the binary, no setting."""
    path = os.path.join(REPO, "gateway", "src", "flags.rs")
    text = open(path, encoding="utf-8").read()
    m = re.search(r"pub struct GatewayArgs \{(.*?)\n\}", text, re.S)
    if not m:
        raise Bad(f"{path}: no `pub struct GatewayArgs`")
    spec, attrs = {}, []
    for line in m.group(1).splitlines():
        line = line.strip()
        if line.startswith("#[arg("):
            attrs.append(line)
            continue
        f = re.match(r"pub (\w+):\s*(.+?),?$", line)
        if f:
            field, ty = f.group(1), f.group(2)
            attr = " ".join(attrs)
            attrs = []
            named = re.search(r'long\s*=\s*"([^"]+)"', attr)
            if named:
                flag = named.group(1)
            elif re.search(r"\blong\b", attr):
                flag = field.replace("_", "-")
            else:
                continue
            kind = "repeat" if ty.startswith("Vec<") else "switch" if ty == "bool" else "value"
            spec[field] = ("--" + flag, kind)
    spec.pop("check", None)
    if "upstreams" not in spec or "listen" not in spec:
        raise Bad(f"{path}: GatewayArgs parsed without upstreams or listen: {sorted(spec)}")
    return spec


def gateway_flags(settings, spec):
    """A gateway TOML as the command-line flags it stands for."""
    args = []
    for key, value in settings.items():
        if key not in spec:
            raise Bad(f"gateway setting {key!r} is no field of GatewayArgs (known: {', '.join(sorted(spec))})")
        flag, kind = spec[key]
        if kind == "repeat":
            if not isinstance(value, list):
                raise Bad(f"gateway setting {key} must be an array")
            for v in value:
                args += [flag, str(v)]
        elif kind == "switch":
            if not isinstance(value, bool):
                raise Bad(f"gateway setting {key} must be true or false")
            if value:
                args.append(flag)
        else:
            if isinstance(value, (list, dict, bool)):
                raise Bad(f"gateway setting {key} must be a string or a number")
            args += [flag, str(value)]
    return args


# ------------------------------------------------- the voters' config


class Voter:
    """What the checks need from a voter config."""

    def __init__(self, cfg, origin):
        self.cfg, self.origin = cfg, origin
        server = cfg.get("server") or {}
        raft = cfg.get("raft") or {}
        self.listen = host_port(server.get("listen", "127.0.0.1:4437"))
        self.cluster = host_port(server["cluster_listen"]) if server.get("cluster_listen") else None
        self.admin = host_port(server.get("admin_listen", "127.0.0.1:4438"))
        self.cluster_id = server.get("cluster_id")
        self.peers = raft.get("peers") or []
        self.group_count = raft.get("group_count")
        self.wal = (raft.get("wal") or {}).get("path")
        self.init_membership = raft.get("init_membership_per_group", False)
        self.cold = (cfg.get("storage") or {}).get("cold") or {}

    @property
    def raft_port(self):
        """The port peers dial: the cluster listener, else the client one."""
        return (self.cluster or self.listen)[1]


def check_voter_config(scope, v):
    R.check(scope, "admin plane on loopback (server.admin_listen)", is_loopback(v.admin[0]), v.admin)
    R.check(scope, "client, cluster and admin listeners on distinct ports",
            len({v.listen[1], v.raft_port, v.admin[1]}) == (3 if v.cluster else 2))
    if not v.peers:
        R.check(scope, "single node: no server.cluster_listen without peers (it would serve nothing)", v.cluster is None)
        return
    ids = [p["node_id"] for p in v.peers]
    R.check(scope, "peers have distinct node ids 1..N", sorted(ids) == list(range(1, len(ids) + 1)), ids)
    R.check(scope, "server.cluster_id set (required with peers)", bool(v.cluster_id))
    R.check(scope, "raft.wal.path set (required with peers)", bool(v.wal))
    R.check(scope, "raft.init_membership_per_group = true", v.init_membership is True)
    ok = True
    for p in v.peers:
        url_port = url_parts(p["url"])[1]
        client_port = url_parts(p.get("client_url") or p["url"])[1]
        if v.cluster and (url_port != v.cluster[1] or client_port != v.listen[1]):
            ok = False
        if not v.cluster and url_port != v.listen[1]:
            ok = False
    R.check(scope, "every peer's url names the cluster port and its client_url the client port", ok,
            [(p["node_id"], p["url"], p.get("client_url")) for p in v.peers])


def manifest_matches(scope, manifest, v, client_host_of):
    """The ursulactl manifest lists exactly the config's voters, URL for URL."""
    nodes = manifest.get("nodes") or []
    allowed = {"id", "admin_port", "admin_url", "host", "http_url", "client_url", "metrics_url",
               "expected_process_incarnation"}
    R.check(scope, "manifest: only the fields ursulactl reads (spec/34 \"Manifest format\")",
            all(set(n) <= allowed for n in nodes), [sorted(set(n) - allowed) for n in nodes])
    if v.peers:
        want = {p["node_id"]: (p["url"], p.get("client_url") or p["url"]) for p in v.peers}
    else:
        want = {1: (None, f"http://{client_host_of(1)}:{v.listen[1]}")}
    have = {n["id"]: (n.get("http_url"), n.get("client_url")) for n in nodes}
    R.check(scope, "manifest: node ids equal the config's peers", sorted(have) == sorted(want),
            f"{sorted(have)} vs {sorted(want)}")
    R.check(scope, "manifest: each node's http_url and client_url equal its peer url and client_url",
            have == want, f"{have} vs {want}")
    hosts_ok = all(n.get("host") in (None, urlsplit(n.get("client_url") or "").hostname) for n in nodes)
    R.check(scope, "manifest: each host is its node's address", hosts_ok)
    return nodes


# ------------------------------------------------- one rendered target


def check_target(name, docs, flag_spec, extract):
    expect = EXPECT.get(name, {})
    scope = name
    # Every object that runs our image.
    pods = []
    for d in docs:
        tpl = (d.get("spec") or {}).get("template")
        if d["kind"] in ("StatefulSet", "Deployment", "Job") and tpl:
            pods.append((d, tpl["spec"], tpl["metadata"].get("labels") or {}))

    # ---- the voters
    sts = one(docs, "StatefulSet", "ursula")
    pod = sts["spec"]["template"]["spec"]
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    container = next(c for c in pod["containers"] if c["name"] == "ursula")
    env = env_of(container)
    claims = [c["metadata"]["name"] for c in sts["spec"].get("volumeClaimTemplates") or []]
    files = pod_files(docs, pod, container, claims)
    config_path = env.get("URSULA_CONFIG", "/etc/ursula/ursula.toml")
    manifest_path = env.get("URSULA_MANIFEST", "/etc/ursula/cluster-manifest.json")
    if config_path not in files:
        raise Bad(f"the voter container has no {config_path} (mounted: {sorted(files)})")
    v = Voter(tomllib.loads(files[config_path]), f"{name}:{config_path}")
    replicas = sts["spec"].get("replicas", 1)
    check_voter_config(f"{scope} voter config", v)
    R.check(scope, f"voter replicas: {expect.get('voters', replicas)}", replicas == expect.get("voters", replicas), replicas)
    R.check(scope, "voters: one [[raft.peers]] entry per replica (none for a single node)",
            len(v.peers) == replicas or (replicas == 1 and not v.peers), f"{replicas} replicas, {len(v.peers)} peers")
    R.check(scope, "voters: podManagementPolicy Parallel", sts["spec"].get("podManagementPolicy") == "Parallel")
    service_name = sts["spec"].get("serviceName")
    R.check(scope, "voters: serviceName is the peer Service ursula-peers", service_name == "ursula-peers")

    def pod_host(node_id):
        return f"ursula-{node_id - 1}.{service_name}"

    if v.peers:
        hosts_ok = all(url_parts(p["url"])[0] == pod_host(p["node_id"])
                       and url_parts(p.get("client_url") or p["url"])[0] == pod_host(p["node_id"]) for p in v.peers)
        R.check(scope, "peers: node N is pod ursula-(N-1) under the peer Service", hosts_ok,
                [(p["node_id"], p["url"]) for p in v.peers])

    # ports
    cports = {p["containerPort"]: p.get("name") for p in container.get("ports") or []}
    want_ports = {v.listen[1]} | ({v.cluster[1]} if v.cluster and v.peers else set())
    R.check(scope, "voter containerPorts are exactly the client and cluster listeners",
            set(cports) == want_ports, f"{sorted(cports)} vs {sorted(want_ports)}")
    R.check(scope, "voter admin port is not a containerPort (loopback only)", v.admin[1] not in cports)
    R.check(scope, "voter port names: client = server.listen, cluster = server.cluster_listen",
            cports.get(v.listen[1]) == "client" and (not v.cluster or not v.peers or cports.get(v.cluster[1]) == "cluster"))

    # the client Service
    svc = one(docs, "Service", "ursula")
    sports = svc["spec"].get("ports") or []
    R.check(scope, "client Service ursula exposes only the client port",
            len(sports) == 1 and sports[0]["port"] == v.listen[1]
            and port_number(container, sports[0].get("targetPort", sports[0]["port"])) == v.listen[1],
            sports)
    R.check(scope, "client Service is ClusterIP", svc["spec"].get("type", "ClusterIP") == "ClusterIP")
    R.check(scope, "client Service selects the voter pods", labels_match(svc["spec"].get("selector"), pod_labels))

    # the peer Service
    peers_svc = one(docs, "Service", "ursula-peers")
    pspec = peers_svc["spec"]
    R.check(scope, "peer Service is headless with publishNotReadyAddresses",
            pspec.get("clusterIP") == "None" and pspec.get("publishNotReadyAddresses") is True)
    targets = {port_number(container, p.get("targetPort", p["port"])): p["port"] for p in pspec.get("ports") or []}
    R.check(scope, "peer Service names the cluster plane's port (the client port without a cluster plane)",
            targets.get(v.raft_port) == v.raft_port, targets)
    R.check(scope, "peer Service ports are container ports, port = targetPort",
            all(t in cports and t == p for t, p in targets.items()), targets)
    R.check(scope, "peer Service selects the voter pods", labels_match(pspec.get("selector"), pod_labels))

    # probes
    for kind in ("startupProbe", "readinessProbe"):
        probe = container.get(kind) or {}
        get = probe.get("httpGet") or {}
        R.check(scope, f"voter {kind}: HTTP GET {READY_PATH} on the client port",
                get.get("path") == READY_PATH and port_number(container, get.get("port", 0)) == v.listen[1], probe)
    startup = container.get("startupProbe") or {}
    R.check(scope, "voter startupProbe budget at least 5 minutes", duration_secs(startup) >= 300, duration_secs(startup))
    live = container.get("livenessProbe")
    R.check(scope, "voter livenessProbe absent or lenient (>= 60 s of failures)",
            live is None or duration_secs(live) >= 60, live)

    # data volume
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts") or []}
    R.check(scope, "PVC template raft-data mounted at raft.wal.path",
            "raft-data" in claims and mounts.get("raft-data") == v.wal, (claims, mounts.get("raft-data"), v.wal))

    # entrypoint and preStop
    command = (container.get("command") or []) + (container.get("args") or [])
    entry_path = next((c for c in command if c.endswith("entrypoint.sh")), None)
    entry = files.get(entry_path or "", "")
    common = files.get(os.path.join(os.path.dirname(entry_path or "/"), "common.sh"), "")
    R.check(scope, "voter entrypoint: node id = StatefulSet ordinal + 1",
            "NODE_ID=$((ordinal + 1))" in common and '"${pod##*-}"' in common, entry_path)
    R.check(scope, "voter entrypoint execs `ursula --config $URSULA_CONFIG --node-id $NODE_ID`",
            'exec ursula --config "$URSULA_CONFIG" --node-id "$NODE_ID"' in entry)
    grace = pod.get("terminationGracePeriodSeconds", 30)
    hook = (((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
    hook_path = next((c for c in hook if c.endswith(".sh")), None)
    prestop = files.get(hook_path or "", "")
    drain = re.search(r'ursulactl drain --config "\$URSULA_MANIFEST" --node "\$NODE_ID"\s*\\?\s*--timeout-secs "\$drain_timeout"', prestop)
    R.check(scope, "preStop runs `ursulactl drain --config <manifest> --node <id> --timeout-secs N`",
            bool(hook_path) and bool(drain), hook)
    drain_timeout = int(env.get("URSULA_PRESTOP_DRAIN_TIMEOUT_SECS", "0") or 0)
    deadline = int(env.get("URSULA_PRESTOP_DEADLINE_SECS", "0") or 0)
    R.check(scope, "preStop: drain timeout < hook deadline, hook deadline + voter stop (20 s) < grace period",
            0 < drain_timeout < deadline and deadline + VOTER_STOP_DEADLINE_SECS < grace,
            f"drain {drain_timeout} s, deadline {deadline} s, grace {grace} s")
    R.check(scope, "preStop never fails the hook (ends with exit 0, drain bounded by its deadline)",
            prestop.rstrip().endswith("exit 0") and 'bounded "$deadline" ursulactl drain' in prestop)

    # the ursulactl manifest
    if manifest_path not in files:
        raise Bad(f"the voter container has no {manifest_path}")
    manifest = json.loads(files[manifest_path])
    nodes = manifest_matches(f"{scope} manifest", manifest, v, pod_host)
    admin = f"http://{v.admin[0]}:{v.admin[1]}"
    R.check(f"{scope} manifest", "admin_url of every node is the pod's loopback admin plane (for the in-pod drain)",
            all(n.get("admin_url") == admin for n in nodes), admin)

    # the voters' PDB
    pdbs = [p for p in find(docs, "PodDisruptionBudget") if labels_match(p["spec"].get("selector", {}).get("matchLabels"), pod_labels)]
    if R.check(scope, "one PodDisruptionBudget selects the voters", len(pdbs) == 1, len(pdbs)):
        spec = pdbs[0]["spec"]
        mu = spec.get("maxUnavailable")
        if replicas >= 3:
            ok = isinstance(mu, int) and 1 <= mu <= (replicas - 1) // 2 and "minAvailable" not in spec
            R.check(scope, f"voter PDB: maxUnavailable {mu} <= (replicas-1)//2 = {(replicas - 1) // 2}: a quorum stays up", ok, spec)
        else:
            # A lone voter has no quorum to keep; maxUnavailable 0 would block
            # every node drain for good, so one eviction is allowed.
            R.check(scope, "voter PDB for a single voter: maxUnavailable 1 (never blocks a node drain)", mu == 1, spec)

    # ---- the gateways
    dep = one(docs, "Deployment", "ursula-gateway")
    gpod = dep["spec"]["template"]["spec"]
    glabels = dep["spec"]["template"]["metadata"]["labels"]
    gc = gpod["containers"][0]
    gfiles = pod_files(docs, gpod, gc)
    gpath = "/etc/ursula/gateway.toml"
    if gpath not in gfiles:
        raise Bad(f"the gateway container has no {gpath}")
    gsettings = tomllib.loads(gfiles[gpath])
    want_args = ["gateway"] + gateway_flags(gsettings, flag_spec)
    R.check(scope, "gateway args are gateway.toml as flags", gc.get("command") == ["ursula"] and gc.get("args") == want_args,
            f"{gc.get('command')} {gc.get('args')} vs {want_args}")
    glisten = host_port(gsettings.get("listen", "127.0.0.1:4437"))
    gports = {p["containerPort"] for p in gc.get("ports") or []}
    R.check(scope, "gateway containerPort is its listen port", gports == {glisten[1]}, (gports, glisten))
    upstreams = gsettings.get("upstreams") or []
    clients = [p.get("client_url") or p["url"] for p in v.peers] or [f"http://{pod_host(1)}:{v.listen[1]}"]
    R.check(scope, "gateway upstreams are the voters' client_url values", upstreams == clients, (upstreams, clients))
    gsvc = one(docs, "Service", "ursula-gateway")
    gsp = gsvc["spec"].get("ports") or []
    R.check(scope, "gateway Service: its one port is the listen port",
            len(gsp) == 1 and gsp[0]["port"] == glisten[1]
            and port_number(gc, gsp[0].get("targetPort", gsp[0]["port"])) == glisten[1], gsp)
    R.check(scope, "gateway Service selects the gateway pods", labels_match(gsvc["spec"].get("selector"), glabels))
    auth = bool(gsettings.get("auth_issuer"))
    probe = gc.get("readinessProbe") or {}
    if auth:
        tcp = probe.get("tcpSocket") or {}
        R.check(scope, "gateway readiness (access control conceals /__ursula/): TCP on the listen port",
                "httpGet" not in probe and port_number(gc, tcp.get("port", 0)) == glisten[1], probe)
    else:
        get = probe.get("httpGet") or {}
        R.check(scope, f"gateway readiness: HTTP GET {READY_PATH} on the listen port",
                get.get("path") == READY_PATH and port_number(gc, get.get("port", 0)) == glisten[1], probe)
    for key in ("auth_policy", "quota_policy"):
        if key in gsettings:
            R.check(scope, f"gateway {key} {gsettings[key]} is mounted in the pod", gsettings[key] in gfiles)
    greplicas = dep["spec"].get("replicas", 1)
    hpas = [h for h in find(docs, "HorizontalPodAutoscaler") if h["spec"]["scaleTargetRef"].get("name") == "ursula-gateway"]
    if R.check(scope, "one HPA (autoscaling/v2) scales the gateway Deployment",
               len(hpas) == 1 and hpas[0]["apiVersion"] == "autoscaling/v2"
               and hpas[0]["spec"]["scaleTargetRef"].get("kind") == "Deployment"):
        h = hpas[0]["spec"]
        cpu = any(m.get("type") == "Resource" and m["resource"]["name"] == "cpu" for m in h.get("metrics") or [])
        R.check(scope, "gateway HPA on CPU, minReplicas = Deployment replicas <= maxReplicas",
                cpu and h.get("minReplicas", 1) == greplicas <= h["maxReplicas"], h)
        R.check(scope, "gateway container requests CPU (the HPA's utilization base)",
                "cpu" in ((gc.get("resources") or {}).get("requests") or {}))
    want_g = expect.get("gateways", greplicas)
    R.check(scope, f"gateway replicas: {want_g}", greplicas == want_g, greplicas)
    gpdbs = [p for p in find(docs, "PodDisruptionBudget") if labels_match(p["spec"].get("selector", {}).get("matchLabels"), glabels)]
    if R.check(scope, "one PodDisruptionBudget selects the gateways", len(gpdbs) == 1, len(gpdbs)):
        s = gpdbs[0]["spec"]
        least = min([greplicas] + [h["spec"].get("minReplicas", 1) for h in hpas])
        ok = (isinstance(s.get("minAvailable"), int) and s["minAvailable"] < least) or (
            isinstance(s.get("maxUnavailable"), int) and s["maxUnavailable"] >= 1 and "minAvailable" not in s)
        R.check(scope, f"gateway PDB lets one of {least} gateways go (never blocks a node drain)", ok, s)

    # ---- the wait-ready Job
    job = one(docs, "Job", "ursula-wait-ready")
    jpod = job["spec"]["template"]["spec"]
    jc = jpod["containers"][0]
    jargs = (jc.get("command") or []) + (jc.get("args") or [])
    jfiles = pod_files(docs, jpod, jc)

    def arg(flag):
        return jargs[jargs.index(flag) + 1] if flag in jargs and jargs.index(flag) + 1 < len(jargs) else None

    R.check(scope, "Job runs `ursulactl wait-ready --config <manifest> --expected-groups N`",
            jargs[:2] == ["ursulactl", "wait-ready"] and arg("--config") in jfiles and arg("--expected-groups"), jargs)
    R.check(scope, "Job's manifest is the voters' manifest", jfiles.get(arg("--config") or "") == files[manifest_path])
    R.check(scope, "Job's --expected-groups is raft.group_count",
            str(v.group_count) == str(arg("--expected-groups")), (arg("--expected-groups"), v.group_count))

    # ---- every pod: image, identity
    for d, spec, _ in pods:
        where = f"{d['kind']} {d['metadata']['name']}"
        sc = spec.get("securityContext") or {}
        R.check(scope, f"{where}: runAsNonRoot, uid 10001",
                sc.get("runAsNonRoot") is True and sc.get("runAsUser") == 10001, sc)
        images = {c["image"] for c in spec["containers"]}
        R.check(scope, f"{where}: image {IMAGE}", images == {IMAGE}, images)
        R.check(scope, f"{where}: no service links, no service account token",
                spec.get("enableServiceLinks") is False and spec.get("automountServiceAccountToken") is False)

    # ---- the cold tier
    if expect.get("s3"):
        s3 = v.cold.get("s3") or {}
        R.check(scope, "S3 cold tier: backend s3 with root, bucket and region",
                v.cold.get("backend") == "s3" and v.cold.get("root") and s3.get("bucket") and s3.get("region"), v.cold)
        R.check(scope, "S3 credentials not in the config (workload identity or the optional Secret)",
                not ({"access_key_id", "secret_access_key", "session_token"} & set(s3)))
    if expect.get("access_control"):
        secret_sources = [src["secret"]["name"] for vol in gpod.get("volumes") or []
                          for src in ((vol.get("projected") or {}).get("sources") or []) if "secret" in src]
        secret_sources += [vol["secret"]["secretName"] for vol in gpod.get("volumes") or [] if "secret" in vol]
        R.check(scope, "gateway access control: issuer, audience and the policy file from a Secret",
                auth and bool(gsettings.get("auth_audience")) and gsettings.get("auth_policy") in gfiles
                and bool(secret_sources), (gsettings, secret_sources))

    # ---- the NetworkPolicy
    nps = [n for n in find(docs, "NetworkPolicy") if labels_match(n["spec"]["podSelector"].get("matchLabels"), pod_labels)]
    if expect.get("network_policy"):
        R.check(scope, "NetworkPolicy for the voters present", len(nps) == 1, len(nps))
    for np in nps:
        rules = np["spec"].get("ingress") or []
        cluster_rules = [r for r in rules if any(p.get("port") in (v.raft_port, "cluster") for p in r.get("ports") or [])]
        only_voters = bool(cluster_rules) and all(
            r.get("from") and all(labels_match((f.get("podSelector") or {}).get("matchLabels"), pod_labels)
                                  and set(f) == {"podSelector"} for f in r["from"])
            for r in cluster_rules)
        R.check(scope, f"NetworkPolicy: cluster port {v.raft_port} only from the voters", only_voters, cluster_rules)
        client = any(any(p.get("port") in (v.listen[1], "client") for p in r.get("ports") or []) for r in rules)
        R.check(scope, f"NetworkPolicy: client port {v.listen[1]} admitted", client)
        R.check(scope, "NetworkPolicy: Ingress only (egress open)", np["spec"].get("policyTypes") == ["Ingress"])
        R.check(scope, "NetworkPolicy: no rule names the admin port",
                all(p.get("port") != v.admin[1] for r in rules for p in r.get("ports") or []))

    if extract:
        base = f"{name}"
        extract.voter(f"{base}-ursula.toml", files[config_path], [p["node_id"] for p in v.peers] or [1])
        extract.gateway(f"{base}-gateway.toml", gsettings, flag_spec, gfiles)


# ------------------------------------------------- deploy/configs and systemd


def spec_block(page, lang, after):
    text = open(os.path.join(SPEC_DIR, page), encoding="utf-8").read()
    text = text[text.index(after):]
    m = re.search(r"```" + lang + r"\n(.*?)```", text, re.S)
    return m.group(1)


def check_configs(flag_spec, extract):
    scope = "deploy/configs"
    cdir = os.path.join(DEPLOY, "configs")
    voter_text = open(os.path.join(cdir, "voter.toml"), encoding="utf-8").read()
    voter = tomllib.loads(voter_text)
    v = Voter(voter, "deploy/configs/voter.toml")
    check_voter_config(f"{scope} voter.toml", v)
    manifest = json.load(open(os.path.join(cdir, "cluster-manifest.json"), encoding="utf-8"))
    manifest_matches(f"{scope} cluster-manifest.json", manifest, v, lambda _: None)
    if os.path.isdir(SPEC_DIR):
        section = "## Without Kubernetes"
        spec_voter = tomllib.loads(spec_block("06-deploy-a-cluster.md", "toml", section))
        R.check(scope, "voter.toml is spec/06's three-voter example, key for key", voter == spec_voter)
        heredoc = spec_block("06-deploy-a-cluster.md", "bash", "Verify the cluster with a one-file manifest")
        body = re.search(r"<<'JSON'\n(.*?)\nJSON", heredoc, re.S).group(1)
        R.check(scope, "cluster-manifest.json is spec/06's manifest", manifest == json.loads(body))
    else:
        print(f"skip  {scope}: spec/06 comparison ({SPEC_DIR} not found; set URSULA_SPEC_DIR)")
    gateway = tomllib.load(open(os.path.join(cdir, "gateway.toml"), "rb"))
    gargs = gateway_flags(gateway, flag_spec)
    R.check(scope, "gateway.toml: upstreams are voter.toml's client_url values",
            gateway.get("upstreams") == [p["client_url"] for p in v.peers])
    env = read_env(os.path.join(DEPLOY, "systemd", "ursula-gateway.env"))
    R.check(scope, "systemd/ursula-gateway.env: URSULA_GATEWAY_ARGS is gateway.toml as flags",
            shlex.split(env.get("URSULA_GATEWAY_ARGS", "")) == gargs, (env.get("URSULA_GATEWAY_ARGS"), gargs))
    if extract:
        extract.voter("configs-voter.toml", voter_text, [p["node_id"] for p in v.peers])
        extract.gateway("configs-gateway.toml", gateway, flag_spec, {})
    return v


def read_env(path):
    env = {}
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, val = line.split("=", 1)
            env[k.strip()] = shlex.split(val)[0] if val.strip() else ""
    return env


def read_unit(path):
    """A unit file as {section: {key: [values]}} (keys may repeat)."""
    unit, section = {}, None
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = unit.setdefault(line.strip("[]"), {})
            continue
        k, val = line.split("=", 1)
        section.setdefault(k.strip(), []).append(val.strip())
    return unit


def check_systemd(v):
    sdir = os.path.join(DEPLOY, "systemd")
    for unit_name, voter in (("ursula.service", True), ("ursula-gateway.service", False)):
        scope = f"deploy/systemd/{unit_name}"
        svc = read_unit(os.path.join(sdir, unit_name)).get("Service", {})

        def one_value(key):
            vals = svc.get(key) or [None]
            return vals[-1]

        stop = one_value("TimeoutStopSec") or "0"
        R.check(scope, f"TimeoutStopSec {stop} s above the {VOTER_STOP_DEADLINE_SECS} s stop deadline, KillSignal SIGTERM",
                int(stop.rstrip("s")) > VOTER_STOP_DEADLINE_SECS and one_value("KillSignal") == "SIGTERM")
        R.check(scope, "User=ursula, Restart=on-failure, EnvironmentFile",
                one_value("User") == "ursula" and one_value("Restart") == "on-failure" and one_value("EnvironmentFile"))
        hard = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                "PrivateDevices": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
                "ProtectKernelLogs": "yes", "ProtectControlGroups": "yes", "CapabilityBoundingSet": "",
                "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "LimitNOFILE": "1048576"}
        missing = {k: one_value(k) for k, want in hard.items() if one_value(k) != want}
        R.check(scope, "hardening settings", not missing, missing)
        exec_start = one_value("ExecStart") or ""
        if voter:
            R.check(scope, "ExecStart: ursula --config /etc/ursula/ursula.toml --node-id from the EnvironmentFile",
                    exec_start.endswith("ursula --config /etc/ursula/ursula.toml --node-id ${URSULA_NODE_ID}"), exec_start)
            R.check(scope, f"ReadWritePaths is raft.wal.path {v.wal}", one_value("ReadWritePaths") == v.wal)
            env = read_env(os.path.join(sdir, "ursula.env"))
            R.check(scope, "ursula.env sets URSULA_NODE_ID to a peer's node id",
                    env.get("URSULA_NODE_ID", "").isdigit() and int(env["URSULA_NODE_ID"]) in [p["node_id"] for p in v.peers])
        else:
            R.check(scope, "ExecStart: ursula gateway $URSULA_GATEWAY_ARGS (split into flags)",
                    exec_start.endswith("ursula gateway $URSULA_GATEWAY_ARGS"), exec_start)


# ------------------------------------------------- extraction for `ursula config check`


class Extract:
    def __init__(self, out):
        self.out = out
        os.makedirs(out, exist_ok=True)
        self.index = open(os.path.join(out, "index.tsv"), "w", encoding="utf-8")

    def voter(self, fname, text, node_ids):
        # The WAL path points at an empty directory of ours: nothing in a
        # check depends on /var/lib/ursula existing on this machine.
        wal = os.path.join(self.out, fname + ".wal")
        os.makedirs(wal, exist_ok=True)
        cfg = tomllib.loads(text)
        old = (cfg.get("raft") or {}).get("wal", {}).get("path")
        if old:
            text = re.sub(r'(?m)^(path\s*=\s*)"' + re.escape(old) + '"', lambda m: f'{m.group(1)}"{wal}"', text)
        path = os.path.join(self.out, fname)
        open(path, "w", encoding="utf-8").write(text)
        for nid in node_ids:
            self.index.write(f"voter\t{path}\t{nid}\n")

    def gateway(self, fname, settings, spec, mounted):
        # Files the gateway names (policies) are extracted beside it.
        settings = dict(settings)
        for key in ("auth_policy", "quota_policy"):
            if key in settings and settings[key] in mounted:
                copy = os.path.join(self.out, f"{fname}.{key}.toml")
                open(copy, "w", encoding="utf-8").write(mounted[settings[key]])
                settings[key] = copy
        path = os.path.join(self.out, fname)
        with open(path, "w", encoding="utf-8") as f:
            for k, val in settings.items():
                f.write(f"{k} = {json.dumps(val)}\n")
        open(path + ".flags", "w", encoding="utf-8").write("\n".join(gateway_flags(settings, spec)) + "\n")
        self.index.write(f"gateway\t{path}\t-\n")

    def close(self):
        self.index.close()


# ------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rendered", action="append", default=[], metavar="NAME=FILE")
    ap.add_argument("--k8s-versions", default="1.30.0,1.37.0")
    ap.add_argument("--extract-configs", metavar="DIR")
    args = ap.parse_args()
    extract = Extract(args.extract_configs) if args.extract_configs else None

    import kubernetes_validate  # noqa: E402 (the venv's)

    versions = [x for x in args.k8s_versions.split(",") if x]
    flag_spec = gateway_flags_spec()
    print(f"ok    gateway flags: {len(flag_spec)} settings read from gateway/src/flags.rs (GatewayArgs)")
    for item in args.rendered:
        name, path = item.split("=", 1)
        docs = [d for d in yaml.safe_load_all(open(path, encoding="utf-8")) if d]
        errors = []
        for d in docs:
            for ver in versions:
                try:
                    kubernetes_validate.validate(d, ver, strict=True)
                except Exception as e:  # ValidationError, SchemaNotFoundError
                    msg = getattr(e, "message", str(e))
                    errors.append(f"{d.get('kind')}/{d.get('metadata', {}).get('name')} (k8s {ver}): {msg}")
        kinds = sorted({d["kind"] for d in docs})
        R.check(name, f"{len(docs)} objects valid against the Kubernetes {', '.join(versions)} schemas (strict): "
                + ", ".join(kinds), not errors, "; ".join(errors))
        try:
            check_target(name, docs, flag_spec, extract)
        except (Bad, KeyError, StopIteration, ValueError) as e:
            R.check(name, "consistency checks ran to the end", False, f"{type(e).__name__}: {e}")
    try:
        v = check_configs(flag_spec, extract)
        check_systemd(v)
    except (Bad, KeyError, ValueError, OSError) as e:
        R.check("deploy/configs, deploy/systemd", "checks ran to the end", False, f"{type(e).__name__}: {e}")
    if extract:
        extract.close()
    if R.failures:
        print(f"{R.failures} check(s) FAILED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
