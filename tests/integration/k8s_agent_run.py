#!/usr/bin/env python3
"""Reads deploy/k8s/base and prints, one per line, the podman options that
run the agent container exactly as the DaemonSet would: its capabilities,
host PID namespace, read-only root, seccomp and host mounts (secrets and the
service-account token become tmpfs mounts). With --check,
verifies the manifests' promises instead (exit 1 with the reasons)."""
import sys
import yaml

base = sys.argv[1]
docs = []
for name in ("namespace.yaml", "agent-rbac.yaml", "agent-daemonset.yaml", "collector.yaml"):
    with open(f"{base}/{name}") as f:
        docs += [d for d in yaml.safe_load_all(f) if d]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
ds = by_kind["DaemonSet"][0]
pod = ds["spec"]["template"]["spec"]
agent = pod["containers"][0]
sc = agent["securityContext"]

if "--check" in sys.argv:
    problems = []
    def need(cond, what):
        if not cond:
            problems.append(what)
    need(pod.get("hostPID") is True, "DaemonSet: hostPID true")
    need(sc.get("privileged") is False, "agent: privileged false")
    need(sc.get("readOnlyRootFilesystem") is True, "agent: read-only root filesystem")
    need(sc["capabilities"]["drop"] == ["ALL"], "agent: drops ALL capabilities")
    need(set(sc["capabilities"]["add"]) <= {"BPF", "PERFMON", "SYS_PTRACE", "DAC_READ_SEARCH",
                                            "CHECKPOINT_RESTORE"},
         "agent: only the listed capabilities")
    need({"operator": "Exists"} in pod.get("tolerations", []), "DaemonSet: tolerates every taint")
    for c in pod["containers"]:
        need("requests" in c.get("resources", {}) and "limits" in c["resources"],
             f"{c['name']}: resource requests and limits")
    # the agent reads its node's pods and nothing else
    need(pod.get("automountServiceAccountToken") is True, "agent: API token mounted")
    need(pod.get("serviceAccountName") == "edgeprof-agent", "agent: its own service account")
    roles = by_kind.get("ClusterRole", [])
    need(len(roles) == 1 and not by_kind.get("Role") and not by_kind.get("RoleBinding"),
         "RBAC: one ClusterRole, no Role")
    need(roles and roles[0].get("rules") == [{"apiGroups": [""], "resources": ["pods"],
                                              "verbs": ["get", "list", "watch"]}],
         "RBAC: exactly get/list/watch on pods")
    bindings = by_kind.get("ClusterRoleBinding", [])
    need(len(bindings) == 1 and roles and bindings[0]["roleRef"]["name"] == roles[0]["metadata"]["name"]
         and bindings[0]["subjects"] == [{"kind": "ServiceAccount", "name": "edgeprof-agent",
                                          "namespace": "edgeprof"}],
         "RBAC: the ClusterRole bound to the agent's service account only")
    env = {e["name"]: e for e in agent.get("env", [])}
    need(env.get("NODE_NAME", {}).get("valueFrom") == {"fieldRef": {"fieldPath": "spec.nodeName"}},
         "agent: NODE_NAME from the downward API (spec.nodeName)")
    dep = by_kind["Deployment"][0]["spec"]["template"]["spec"]
    need(dep.get("automountServiceAccountToken") is False, "collector: no API token mounted")
    need(dep["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True,
         "collector: read-only root filesystem")
    need(by_kind.get("Service") and by_kind.get("PersistentVolumeClaim"),
         "collector Service and PersistentVolumeClaim")
    for v in pod["volumes"] + dep["volumes"]:
        if "secret" in v:
            need(v["secret"].get("defaultMode") == 0o400, f"secret volume {v['name']}: mode 0400")
    for p in problems:
        print("manifest:", p)
    sys.exit(1 if problems else 0)

opts = ["--cap-drop=all"] + [f"--cap-add={c}" for c in sc["capabilities"]["add"]]
if pod.get("hostPID"):
    opts.append("--pid=host")
if sc.get("readOnlyRootFilesystem"):
    opts.append("--read-only")
if sc.get("seccompProfile", {}).get("type") == "Unconfined":
    opts.append("--security-opt=seccomp=unconfined")
vols = {v["name"]: v for v in pod["volumes"]}
for m in agent["volumeMounts"]:
    v = vols[m["name"]]
    if "hostPath" in v and v["hostPath"]["path"].startswith("/sys/"):
        opts.append(f"--volume={v['hostPath']['path']}:{m['mountPath']}"
                    + (":ro" if m.get("readOnly") else ""))
    else:  # host state (spool) and secrets: a scratch place in the test
        opts.append(f"--tmpfs={m['mountPath']}")
if pod.get("automountServiceAccountToken"):
    # where the kubelet mounts the token; empty here, and no
    # KUBERNETES_SERVICE_HOST: the agent's pod names are off
    opts.append("--tmpfs=/var/run/secrets/kubernetes.io/serviceaccount")
print("\n".join(opts))
