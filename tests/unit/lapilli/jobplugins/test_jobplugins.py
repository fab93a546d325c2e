"""What each job plugin gives a Job's pods and which objects it needs (Volcano's `pkg/controllers/job/plugins`)."""

import base64
import copy
import json

import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import given, settings
from hypothesis import strategies as st

from lapilli.jobplugins import (
    KNOWN_PLUGINS,
    apply_plugins,
    generate_keypair,
    implied_plugins,
    job_resources,
    plugin_errors,
)


def make_job(plugins, tasks=(("master", 1), ("worker", 2)), name="job1", hostname=None):
    def template():
        spec = {"containers": [{"name": "main", "image": "busybox"}], "initContainers": [{"name": "init"}]}
        if hostname:
            spec["hostname"] = hostname
        return {"spec": spec}

    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns1", "uid": "uid-1"},
        "spec": {
            "plugins": plugins,
            "tasks": [{"name": t, "replicas": r, "template": template()} for t, r in tasks],
        },
    }


def pod_of(job, task, index):
    spec = next(t for t in job["spec"]["tasks"] if t["name"] == task)["template"]["spec"]
    return {"metadata": {"name": f"{job['metadata']['name']}-{task}-{index}"}, "spec": copy.deepcopy(spec)}


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def render(plugins, task, index, **kw):
    job = make_job(plugins, **kw)
    return job, apply_plugins(job, task, index, pod_of(job, task, index))


def test_env_gives_task_index_to_every_container():
    _, pod = render({"env": []}, "worker", 1)
    for container in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert env_of(container) == {"VK_TASK_INDEX": "1", "VC_TASK_INDEX": "1"}


def test_svc_pod_hostname_env_and_mount():
    _, pod = render({"svc": []}, "worker", 0, tasks=(("ps-a", 1), ("worker", 2)))
    spec = pod["spec"]
    assert spec["hostname"] == "job1-worker-0"
    assert spec["subdomain"] == "job1"
    assert {"name": "job1-svc", "configMap": {"name": "job1-svc"}} in spec["volumes"]
    for container in spec["containers"] + spec["initContainers"]:
        env = env_of(container)
        assert env["VC_PS_A_HOSTS"] == {"configMapKeyRef": {"name": "job1-svc", "key": "VC_PS_A_HOSTS"}}
        assert env["VC_WORKER_NUM"] == {"configMapKeyRef": {"name": "job1-svc", "key": "VC_WORKER_NUM"}}
        assert {"name": "job1-svc", "mountPath": "/etc/volcano"} in container["volumeMounts"]


def test_svc_keeps_template_hostname_and_can_skip_env():
    job = make_job({"svc": ["--inject-hosts-env=false"]}, hostname="fixed")
    pod = apply_plugins(job, "worker", 1, pod_of(job, "worker", 1))
    assert pod["spec"]["hostname"] == "fixed"
    assert "env" not in pod["spec"]["containers"][0]


def test_svc_resources():
    job = make_job({"svc": ["--publish-not-ready-addresses"]}, tasks=(("ps-a", 1), ("worker", 3)))
    service, configmap, policy = job_resources(job)
    assert service["metadata"] == {
        "name": "job1",
        "namespace": "ns1",
        "ownerReferences": [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": "job1",
                "uid": "uid-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"volcano.sh/job-name": "job1", "volcano.sh/job-namespace": "ns1"}
    assert configmap["metadata"]["name"] == "job1-svc"
    assert configmap["data"] == {
        "ps_a.host": "job1-ps-a-0.job1",
        "VC_PS_A_HOSTS": "job1-ps-a-0.job1",
        "VC_PS_A_NUM": "1",
        "worker.host": "job1-worker-0.job1\njob1-worker-1.job1\njob1-worker-2.job1",
        "VC_WORKER_HOSTS": "job1-worker-0.job1,job1-worker-1.job1,job1-worker-2.job1",
        "VC_WORKER_NUM": "3",
    }
    assert policy["kind"] == "NetworkPolicy"
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": service["spec"]["selector"]}}]}]


def test_svc_explicit_hostname_lists_one_host_and_network_policy_can_be_disabled():
    job = make_job({"svc": ["--disable-network-policy"]}, hostname="fixed")
    kinds = [o["kind"] for o in job_resources(job)]
    assert kinds == ["Service", "ConfigMap"]
    assert job_resources(job)[1]["data"]["VC_WORKER_HOSTS"] == "fixed.job1"


def test_ssh_secret_holds_a_usable_rsa_pair_and_config():
    job = make_job({"ssh": ["--ssh-port=2222"]})
    (secret,) = job_resources(job)
    assert secret["metadata"]["name"] == "job1-ssh"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert data["id_rsa"].startswith(b"-----BEGIN RSA PRIVATE KEY-----")  # PKCS#1
    key = serialization.load_pem_private_key(data["id_rsa"], password=None)
    assert key.key_size == 2048
    assert data["authorized_keys"] == data["id_rsa.pub"]
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert data["id_rsa.pub"] == public + b"\n"
    assert data["config"].decode() == (
        "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        "Host job1-master-0\n  HostName job1-master-0.job1\n  Port 2222\n"
        "Host job1-worker-0\n  HostName job1-worker-0.job1\n  Port 2222\n"
        "Host job1-worker-1\n  HostName job1-worker-1.job1\n  Port 2222\n"
    )


def test_ssh_reuses_a_given_pair_or_the_user_key():
    pair = generate_keypair()
    job = make_job({"ssh": []})
    (secret,) = job_resources(job, ssh_keypair=pair)
    assert base64.b64decode(secret["data"]["id_rsa"]) == pair.private_pem
    job = make_job({"ssh": ["--ssh-private-key=PRIV", "--ssh-public-key=PUB"]})
    (secret,) = job_resources(job)
    assert base64.b64decode(secret["data"]["id_rsa"]) == b"PRIV"
    assert base64.b64decode(secret["data"]["authorized_keys"]) == b"PUB"


@pytest.mark.parametrize(
    ("args", "path", "mode"), [([], "/root/.ssh", 0o600), (["--ssh-key-file-path=/home/u/.ssh"], "/home/u/.ssh", 0o644)]
)
def test_ssh_volume_and_mounts(args, path, mode):
    _, pod = render({"ssh": args}, "master", 0)
    (volume,) = pod["spec"]["volumes"]
    assert volume["secret"]["secretName"] == "job1-ssh"
    assert volume["secret"]["defaultMode"] == mode
    assert [i["path"] for i in volume["secret"]["items"]] == [
        ".ssh/id_rsa",
        ".ssh/id_rsa.pub",
        ".ssh/authorized_keys",
        ".ssh/config",
    ]
    for container in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        assert container["volumeMounts"] == [{"name": "job1-ssh", "mountPath": path, "subPath": ".ssh"}]


@pytest.mark.parametrize(("task", "index", "rank"), [("master", 0, "0"), ("worker", 0, "1"), ("worker", 1, "2")])
def test_pytorch_env_and_port(task, index, rank):
    _, pod = render({"pytorch": ["--port=29500"]}, task, index)
    main = pod["spec"]["containers"][0]
    assert env_of(main) == {
        "MASTER_ADDR": "job1-master-0.job1",
        "MASTER_PORT": "29500",
        "WORLD_SIZE": "3",
        "RANK": rank,
    }
    assert main["ports"] == [{"name": "pytorchjob-port", "containerPort": 29500}]
    assert "env" not in pod["spec"]["initContainers"][0]  # pytorch touches regular containers only


def test_pytorch_without_master_task_leaves_pods_alone():
    job, pod = render({"pytorch": ["--master=chief"]}, "worker", 0)
    assert pod == pod_of(job, "worker", 0)


def test_pytorch_wait_for_master_init_container():
    _, pod = render({"pytorch": ["--wait-master-enabled", "--wait-master-timeout=60"]}, "worker", 0)
    first = pod["spec"]["initContainers"][0]
    assert first["name"] == "wait-for-master"
    assert first["image"] == "busybox:1.36.1"
    assert "timeout 60" in first["command"][2] and "job1-master-0.job1 23456" in first["command"][2]
    _, master = render({"pytorch": ["--wait-master-enabled"]}, "master", 0)
    assert [c["name"] for c in master["spec"]["initContainers"]] == ["init"]


def test_mpi_hosts_on_master_and_port_everywhere():
    plugins = {"mpi": ["--master=mpimaster", "--worker=mpiworker"]}
    tasks = (("mpimaster", 1), ("mpiworker", 2))
    _, master = render(plugins, "mpimaster", 0, tasks=tasks)
    _, worker = render(plugins, "mpiworker", 1, tasks=tasks)
    for container in master["spec"]["containers"] + master["spec"]["initContainers"]:
        assert env_of(container) == {"MPI_HOST": "job1-mpiworker-0.job1,job1-mpiworker-1.job1"}
        assert container["ports"] == [{"name": "mpijob-port", "containerPort": 22}]
    assert "env" not in worker["spec"]["containers"][0]
    assert worker["spec"]["containers"][0]["ports"] == [{"name": "mpijob-port", "containerPort": 22}]


def test_tensorflow_config():
    _, pod = render({"tensorflow": ["--port=3333"]}, "worker", 1, tasks=(("ps", 1), ("worker", 2)))
    config = json.loads(env_of(pod["spec"]["containers"][0])["TF_CONFIG"])
    assert config == {
        "cluster": {"ps": ["job1-ps-0.job1:3333"], "worker": ["job1-worker-0.job1:3333", "job1-worker-1.job1:3333"]},
        "task": {"type": "worker", "index": 1},
    }
    # compact JSON, keys in Go's struct order
    assert env_of(pod["spec"]["containers"][0])["TF_CONFIG"].startswith('{"cluster":{"ps":[')


def test_tensorflow_standalone_gets_nothing():
    _, pod = render({"tensorflow": []}, "worker", 0, tasks=(("worker", 1),))
    assert "env" not in pod["spec"]["containers"][0]


def test_ray_commands_ports_and_service():
    tasks = (("head", 1), ("worker", 2))
    job = make_job({"ray": []}, tasks=tasks)
    for task in job["spec"]["tasks"]:
        task["template"]["spec"]["containers"][0]["name"] = task["name"]
    head = apply_plugins(job, "head", 0, pod_of(job, "head", 0))
    worker = apply_plugins(job, "worker", 0, pod_of(job, "worker", 0))
    assert head["spec"]["containers"][0]["command"][2].startswith("ray start --head --block")
    assert [p["name"] for p in head["spec"]["containers"][0]["ports"]] == ["gcs", "dashboard", "client-server"]
    assert worker["spec"]["containers"][0]["command"] == [
        "sh",
        "-c",
        "ray start --block --address=job1-head-0.job1:6379",
    ]
    (service,) = job_resources(job)
    assert service["spec"]["selector"]["volcano.sh/task-spec"] == "head"
    # with svc (which the job mutator adds for ray) the headless Service owns the name <job>
    job["spec"]["plugins"]["svc"] = []
    services = [o for o in job_resources(job) if o["kind"] == "Service"]
    assert len(services) == 1 and services[0]["spec"]["clusterIP"] == "None"


@pytest.mark.parametrize(
    ("plugins", "task", "index", "rank"),
    [
        ({"hcclrank": []}, "master", 0, "0"),
        ({"hcclrank": []}, "worker", 1, "2"),
        ({"pytorch": [], "hcclrank": []}, "worker", 1, "2"),
    ],
)
def test_hcclrank_annotation(plugins, task, index, rank):
    _, pod = render(plugins, task, index)
    assert pod["metadata"]["annotations"]["hccl/rankIndex"] == rank


def test_pod_that_already_has_plugin_env_is_left_alone():
    job = make_job({"env": [], "pytorch": []})
    pod = pod_of(job, "worker", 0)
    pod["spec"]["containers"][0]["env"] = [{"name": "RANK", "value": "7"}, {"name": "VC_TASK_INDEX", "value": "9"}]
    pod["spec"]["containers"][0]["ports"] = [{"name": "mine", "containerPort": 23456}]
    out = apply_plugins(job, "worker", 0, pod)
    env = env_of(out["spec"]["containers"][0])
    assert env["RANK"] == "7" and env["VC_TASK_INDEX"] == "9" and env["VK_TASK_INDEX"] == "0"
    assert out["spec"]["containers"][0]["ports"] == [{"name": "mine", "containerPort": 23456}]


def test_input_pod_is_not_modified():
    job = make_job({"env": [], "svc": [], "ssh": [], "mpi": []})
    pod = pod_of(job, "master", 0)
    before = copy.deepcopy(pod)
    apply_plugins(job, "master", 0, pod)
    assert pod == before


def test_pod_without_name_uses_the_controller_pod_name():
    job = make_job({"svc": []})
    out = apply_plugins(job, "worker", 1, {"metadata": {"generateName": "x-"}, "spec": {"containers": [{}]}})
    assert out["spec"]["hostname"] == "job1-worker-1"


def test_implied_plugins():
    assert implied_plugins({"pytorch": []}) == {"svc": []}
    assert implied_plugins({"mpi": []}) == {"svc": [], "ssh": []}
    assert implied_plugins({"mpi": [], "svc": ["--x"], "ssh": []}) == {}
    assert implied_plugins({"env": []}) == {}
    assert set(PLUGIN_NAMES) == KNOWN_PLUGINS


def test_plugin_errors_and_unknown_plugins_are_skipped():
    job = make_job({"pytorch": ["--mastr=x"], "nope": []})
    assert plugin_errors(job) == {"pytorch": "flag provided but not defined: -mastr"}
    assert apply_plugins(job, "worker", 0, pod_of(job, "worker", 0))["spec"]["containers"][0]["ports"]


def test_malformed_job_does_not_raise():
    job = {"metadata": "x", "spec": {"plugins": {"svc": "oops", "env": None}, "tasks": [None, {"replicas": "3"}]}}
    out = apply_plugins(job, "t", 0, {"spec": {"containers": [{"name": "c"}]}})
    assert out["spec"]["containers"][0]["env"][0]["name"] == "VK_TASK_INDEX"
    assert [o["kind"] for o in job_resources(job)] == ["Service", "ConfigMap", "NetworkPolicy"]


PLUGIN_NAMES = ["env", "svc", "ssh", "pytorch", "mpi", "tensorflow", "ray", "hcclrank"]


@settings(max_examples=60, deadline=None)
@given(
    plugins=st.sets(st.sampled_from(PLUGIN_NAMES), min_size=1),
    replicas=st.tuples(st.integers(0, 3), st.integers(0, 3)),
    task=st.sampled_from(["master", "worker"]),
    index=st.integers(0, 3),
)
def test_apply_plugins_is_idempotent(plugins, replicas, task, index):
    job = make_job({p: [] for p in plugins}, tasks=(("master", replicas[0]), ("worker", replicas[1])))
    once = apply_plugins(job, task, index, pod_of(job, task, index))
    assert apply_plugins(job, task, index, once) == once
