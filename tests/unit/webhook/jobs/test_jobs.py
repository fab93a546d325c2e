"""Job admission: Volcano's defaulting (`mutate_job.go`) and validation (`admit_job.go`, VAP) with its messages."""

import copy

import jsonpatch
import pytest

from tests.service.reviews import container, job, queue, review, task, training_job
from webhook.context import AdmissionContext, AdmissionSettings
from webhook.jobs import mutate_job, validate_job
from webhook.jobs.policies import VALID_SUFFIX
from webhook.listers import MemoryQueues
from webhook.review import AdmissionReview

QUEUES = MemoryQueues(
    [
        queue("default"),
        queue("root", parent=None),
        queue("ml-training"),
        queue("closed", state="Closed"),
        queue("fresh", state=None),
        queue("parent-q"),
        queue("child-q", parent="parent-q"),
    ]
)
CTX = AdmissionContext(queues=QUEUES)


def run(rule, obj, operation="CREATE", old=None, ctx=CTX):
    return rule(AdmissionReview.model_validate(review(obj, operation, old)).request, ctx)


def defaulted(obj, ctx=CTX):
    outcome = run(mutate_job, obj, ctx=ctx)
    assert outcome.allowed, outcome.message
    return jsonpatch.apply_patch(obj, list(outcome.patch)), outcome


def denial(obj, operation="CREATE", old=None):
    outcome = run(validate_job, obj, operation, old)
    assert not outcome.allowed
    return outcome.message


# --- defaulting ---------------------------------------------------------------------------------------------


def test_defaults_in_volcano_order():
    obj = job("j", task(None, 2), task("worker", 3, minAvailable=1))
    out, outcome = defaulted(obj)
    assert [op["path"] for op in outcome.patch] == [
        "/spec/queue",
        "/spec/schedulerName",
        "/spec/maxRetry",
        "/spec/tasks/0/name",
        "/spec/tasks/0/minAvailable",
        "/spec/tasks/0/maxRetry",
        "/spec/tasks/1/maxRetry",
        "/spec/minAvailable",
    ]
    spec = out["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"], spec["minAvailable"]) == (
        "default",
        "volcano",
        3,
        3,
    )
    assert [(t["name"], t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [
        ("default0", 2, 3),
        ("worker", 1, 3),
    ]
    assert outcome.warnings == ()  # nothing the user wrote was changed


def test_complete_job_gets_an_empty_patch():
    obj = job("j", task("w", 2, minAvailable=2, maxRetry=1), queue="q", schedulerName="s", maxRetry=1, minAvailable=2)
    assert run(mutate_job, obj).patch == ()


def test_explicit_zeros_are_replaced_with_warnings():
    _, outcome = defaulted(job("j", task("w", 4, maxRetry=0), minAvailable=0, maxRetry=0))
    assert outcome.warnings == (
        "spec.maxRetry 0 replaced by the default 3",
        "spec.tasks[0].maxRetry 0 replaced by the default 3",
        "spec.minAvailable 0 replaced by 4, the sum of the tasks' minAvailable",
    )


def test_scheduler_name_comes_from_settings():
    ctx = AdmissionContext(settings=AdmissionSettings(scheduler_names=("lapilli", "volcano")), queues=QUEUES)
    out, _ = defaulted(job(), ctx)
    assert out["spec"]["schedulerName"] == "lapilli"


def test_partitioned_task_min_available_and_host_network_dns_policy():
    t = task("w", 8, partitionPolicy={"totalPartitions": 4, "partitionSize": 2, "minPartitions": 3})
    t["template"]["spec"]["hostNetwork"] = True
    out, _ = defaulted(job("j", t))
    assert out["spec"]["tasks"][0]["minAvailable"] == 6
    assert out["spec"]["tasks"][0]["template"]["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert out["spec"]["minAvailable"] == 6


@pytest.mark.parametrize(
    ("plugins", "added"),
    [
        ({"pytorch": []}, {"svc": []}),
        ({"tensorflow": []}, {"svc": []}),
        ({"ray": []}, {"svc": []}),
        ({"mpi": ["--master=m"]}, {"svc": [], "ssh": []}),
        ({"mpi": [], "svc": ["--disable-network-policy"], "ssh": []}, {}),
        ({"env": []}, {}),
    ],
)
def test_implied_plugins(plugins, added):
    out, outcome = defaulted(job("j", plugins=copy.deepcopy(plugins)))
    assert out["spec"]["plugins"] == {**plugins, **added}
    assert len([w for w in outcome.warnings if w.startswith("plugin")]) == len(added)


def test_no_plugins_no_plugin_patch():
    _, outcome = defaulted(job())
    assert not any(op["path"].startswith("/spec/plugins") for op in outcome.patch)


def test_unparseable_plugin_arguments_warn():
    _, outcome = defaulted(job("j", plugins={"pytorch": ["--prot=1"]}))
    assert "plugin pytorch: flag provided but not defined: -prot; later arguments ignored" in outcome.warnings


def test_job_without_spec_gets_a_spec_first():
    obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "n"}}
    out, outcome = defaulted(obj)
    assert outcome.patch[0] == {"op": "add", "path": "/spec", "value": {}}
    assert out["spec"]["queue"] == "default"


def test_mutation_of_a_malformed_job_is_denied_with_the_field():
    outcome = run(mutate_job, job("j", task("w", "three")))
    assert not outcome.allowed
    assert outcome.message == 'spec.tasks[0].replicas: expected an integer, got "three"'


def test_update_is_not_mutated():
    assert run(mutate_job, job(), "UPDATE", old=job()).patch == ()


# --- CREATE validation ----------------------------------------------------------------------------------------


def valid(obj):
    return defaulted(obj)[0]


def test_realistic_job_is_admitted_after_defaulting():
    outcome = run(validate_job, valid(training_job()))
    assert outcome.allowed, outcome.message


def test_min_available_above_replicas():
    obj = valid(job("job1", task("worker", 2, minAvailable=3)))
    assert denial(obj) == (
        "'minAvailable' is greater than 'replicas' in task: worker, job: job1; "
        "job 'minAvailable' should not be greater than total replicas in tasks;"
    )


def test_job_min_available_above_total_replicas():
    obj = valid(job("job1", task("a", 1), task("b", 1), minAvailable=3))
    assert denial(obj) == "job 'minAvailable' should not be greater than total replicas in tasks;"


def test_duplicated_task_name_stops_task_checks():
    # the second "worker" is still checked up to the duplicate test; "Bad_Name" after it is never looked at
    obj = valid(job("job1", task("worker", 1), task("worker", 1, minAvailable=2), task("Bad_Name", 1), minAvailable=1))
    assert denial(obj) == (
        "'minAvailable' is greater than 'replicas' in task: worker, job: job1; duplicated task name worker;"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"minAvailable": -1}, "job 'minAvailable' must be >= 0."),
        ({"maxRetry": -1}, "'maxRetry' cannot be less than zero."),
        ({"ttlSecondsAfterFinished": -5}, "'ttlSecondsAfterFinished' cannot be less than zero."),
        ({"tasks": []}, "No task specified in job spec"),
        ({"plugins": {"mpi": ["--master=boss"]}}, "The specified mpi master task was not found"),
    ],
)
def test_checks_that_stop_at_once(spec, message):
    obj = valid(job("job1"))
    obj["spec"].update(spec)
    assert denial(obj) == message


def test_negative_replicas_and_min_available():
    obj = valid(job("job1", task("a", -1, minAvailable=-1), minAvailable=1))
    assert denial(obj).startswith("'replicas' < 0 in task: a, job: job1; 'minAvailable' < 0 in task: a, job: job1;")


def test_task_name_must_be_a_dns_label():
    obj = valid(job("job1", task("Worker_A", 1)))
    assert denial(obj) == (
        "[a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
        "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')];"
    )


def test_pod_name_too_long():
    obj = valid(job("j" * 40, task("t" * 30, 1)))
    assert denial(obj) == (
        f"create pod with name {'j' * 40}-{'t' * 30}-0 validate failed [name part must be no more than 63 characters];"
    )


POLICY_SUFFIX = (
    " valid events are [* PodFailed PodEvicted PodPending Unknown TaskCompleted TaskFailed JobUpdated], "
    "valid actions are [AbortJob RestartJob RestartTask RestartPod RestartPartition TerminateJob CompleteJob "
    "ResumeJob];"
)


@pytest.mark.parametrize(
    ("policies", "error"),
    [
        (
            [{"event": "PodFailed", "exitCode": 3, "action": "RestartJob"}],
            "must not specify event and exitCode simultaneously",
        ),
        ([{"action": "RestartJob"}], "either event and exitCode should be specified"),
        (
            [{"event": "OutOfSync", "action": "RestartJob"}],
            'spec.policies: Invalid value: "OutOfSync": invalid policy event',
        ),
        (
            [{"event": "PodFailed", "action": "SyncJob"}],
            'spec.policies: Invalid value: "SyncJob": invalid policy action',
        ),
        (
            [
                {"event": "PodFailed", "action": "RestartJob"},
                {"events": ["PodEvicted", "PodFailed"], "action": "AbortJob"},
            ],
            "duplicate event PodFailed  across different policy",
        ),
        ([{"exitCode": 0, "action": "RestartJob"}], "0 is not a valid error code"),
        ([{"exitCode": 3, "action": "RestartJob"}, {"exitCode": 3, "action": "AbortJob"}], "duplicate exitCode 3"),
        (
            [{"event": "*", "action": "RestartJob"}, {"event": "PodFailed", "action": "AbortJob"}],
            "if there's * here, no other policy should be here",
        ),
    ],
)
def test_job_policies(policies, error):
    obj = valid(job("job1", policies=policies))
    assert denial(obj) == error + POLICY_SUFFIX


def test_task_policies_use_the_task_path_and_valid_ones_pass():
    obj = valid(job("job1", task("w", 1, policies=[{"event": "Nope", "action": "RestartJob"}])))
    assert denial(obj) == 'spec.tasks.policies: Invalid value: "Nope": invalid policy event' + POLICY_SUFFIX
    ok = [
        {"events": ["PodFailed", "PodFailed"], "action": "RestartPod"},
        {"exitCode": 137, "action": "RestartJob"},
        {"event": "PodPending", "action": "RestartPod", "timeout": "5m"},
    ]
    assert run(validate_job, valid(job("job1", task("w", 1, policies=ok)))).allowed


def test_unknown_plugin():
    assert denial(valid(job("job1", plugins={"env": [], "horovod": []}))) == "unable to find job plugin: horovod;"


@pytest.mark.parametrize(
    ("volumes", "message"),
    [
        ([{"volumeClaimName": "a"}], "mountPath is required;"),
        (
            [{"mountPath": "/d", "volumeClaimName": "a"}, {"mountPath": "/d", "volumeClaimName": "b"}],
            "duplicated mountPath: /d;",
        ),
        ([{"mountPath": "/d"}], "either VolumeClaim or VolumeClaimName must be specified;"),
        (
            [{"mountPath": "/d", "volumeClaimName": "a", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}],
            "conflict: If you want to use an existing PVC, just specify VolumeClaimName.If you want to create a new "
            "PVC, you do not need to specify VolumeClaimName",
        ),
    ],
)
def test_volumes(volumes, message):
    assert denial(valid(job("job1", volumes=volumes))) == message


def test_bad_claim_name():
    assert denial(valid(job("job1", volumes=[{"mountPath": "/d", "volumeClaimName": "Bad"}]))).startswith(
        "invalid VolumeClaimName Bad : [a lowercase RFC 1123 subdomain must consist of"
    )


def test_queue_must_exist_and_be_open():
    missing = run(validate_job, valid(job("job1", queue="nope")))
    assert (missing.allowed, missing.code, missing.reason) == (False, 403, "Forbidden")
    assert missing.message == 'unable to find job queue: queue.scheduling.volcano.sh "nope" not found;'
    assert denial(valid(job("job1", queue="closed"))) == (
        "can only submit job to queue with state `Open`, queue `closed` status is `Closed`;"
    )
    assert run(validate_job, valid(job("job1", queue="fresh"))).allowed  # not yet synced: treated as Open


def test_queue_must_be_a_leaf_and_not_root():
    assert denial(valid(job("job1", queue="root"))) == "can not submit job to root queue;"
    assert denial(valid(job("job1", queue="parent-q"))) == (
        "can only submit job to leaf queue, queue `parent-q` has 1 child queues;"
    )
    assert run(validate_job, valid(job("job1", queue="child-q"))).allowed


def test_spec_and_queue_problems_are_concatenated_with_bad_request():
    outcome = run(validate_job, valid(job("job1", task("w", 1, minAvailable=2), queue="closed")))
    assert (outcome.code, outcome.reason) == (400, "BadRequest")
    assert outcome.message.endswith("queue `closed` status is `Closed`;")


def test_dependencies_must_form_a_dag():
    cyclic = [task("a", 1, dependsOn={"name": ["b"]}), task("b", 1, dependsOn={"name": ["a"]})]
    assert denial(valid(job("job1", *cyclic))) == (
        "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);"
    )
    chain = [task("a", 1), task("b", 1, dependsOn={"name": ["a"]}), task("c", 1, dependsOn={"name": ["a", "b"]})]
    assert run(validate_job, valid(job("job1", *chain))).allowed


def test_pod_template_errors():
    t = task("w", 1)
    t["template"]["spec"]["containers"] = [container(image=""), container(name="main")]
    t["template"]["spec"]["containers"][1]["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    t["template"]["spec"]["restartPolicy"] = "Sometimes"
    assert denial(valid(job("job1", t))) == (
        "spec.task[0].template.spec.containers[0].image: Required value. "
        'template.spec.containers[1].name: Duplicate value: "main". '
        'template.spec.containers[1].resources.requests: Invalid value: "2": must be less than or equal to cpu limit. '
        'template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never".'
    )
    empty = task("w", 1)
    empty["template"]["spec"]["containers"] = []
    assert denial(valid(job("job1", empty))) == "spec.task[0].template.spec.containers: Required value."


def test_topology_policy_needs_guaranteed_integer_cpus():
    burstable = task("w", 1, topologyPolicy="single-numa-node")
    assert denial(valid(job("job1", burstable))) == "spec.task[0] isn't Guaranteed pod, kind=Burstable"
    fractional = task("w", 1, topologyPolicy="best-effort")
    fractional["template"]["spec"]["containers"] = [container(resources={"limits": {"cpu": "1500m", "memory": "1Gi"}})]
    assert denial(valid(job("job1", fractional))) == "the cpu request isn't an integer in spec.task[0] container[0]."
    whole = task("w", 1, topologyPolicy="restricted")
    whole["template"]["spec"]["containers"] = [container(resources={"limits": {"cpu": "2", "memory": "1Gi"}})]
    assert run(validate_job, valid(job("job1", whole))).allowed


def test_partition_policy():
    bad = task("w", 5, minAvailable=4, partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1})
    # Volcano's validatePartitionPolicy is an else-if chain: the first broken rule only
    assert denial(valid(job("job1", bad))) == (
        "'Replicas' are not equal to TotalPartitions*PartitionSize in task: w, job: job1;"
    )
    zero = task("w", 0, partitionPolicy={"totalPartitions": 0, "partitionSize": 0})
    assert denial(valid(job("job1", zero))).startswith(
        "'TotalPartitions' must be greater than 0 in task: w, job: job1;"
    )


def test_malformed_job_is_denied_not_crashed():
    obj = valid(job("job1"))
    obj["spec"]["tasks"][0]["policies"] = "always"
    assert denial(obj) == 'spec.tasks[0].policies: expected a list, got "always"'


# --- UPDATE validation ----------------------------------------------------------------------------------------


def test_update_may_scale_and_change_priority():
    old = valid(job("job1", task("w", 2), minAvailable=2))
    new = copy.deepcopy(old)
    new["spec"]["tasks"][0].update(replicas=4, minAvailable=3)
    new["spec"].update(minAvailable=3, priorityClassName="high")
    new["metadata"]["labels"] = {"x": "y"}
    assert run(validate_job, new, "UPDATE", old).allowed


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s["tasks"][0].update(replicas=-1), "'replicas' must be >= 0 in task: w"),
        (lambda s: s["tasks"][0].update(minAvailable=-1), "'minAvailable' must be >= 0 in task: w"),
        (lambda s: s["tasks"][0].update(minAvailable=9), "'minAvailable' must be <= 'replicas' in task: w"),
        (lambda s: s.update(minAvailable=5), "job 'minAvailable' must not be greater than total replicas"),
        (lambda s: s.update(minAvailable=-1), "job 'minAvailable' must be >= 0"),
        (lambda s: s["tasks"].append(copy.deepcopy(s["tasks"][0])), "job updates may not add or remove tasks"),
        (
            lambda s: s.update(queue="other"),
            "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and "
            "`PriorityClassName`",
        ),
        (
            lambda s: s["tasks"][0]["template"]["spec"]["containers"][0].update(image="other"),
            "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and "
            "`PriorityClassName`",
        ),
    ],
)
def test_update_rules(change, message):
    old = valid(job("job1", task("w", 2)))
    new = copy.deepcopy(old)
    change(new["spec"])
    assert denial(new, "UPDATE", old) == message


def test_update_compares_semantically():
    old = valid(job("job1", task("w", 2), volumes=[{"mountPath": "/d", "volumeClaim": {"resources": {}}}]))
    new = copy.deepcopy(old)
    new["spec"]["volumes"][0]["volumeClaimName"] = "job1-pvc-abc"  # filled in by the controller
    new["spec"]["tasks"][0]["template"]["metadata"] = {}  # empty equals absent
    new["spec"]["ttlSecondsAfterFinished"] = None
    assert run(validate_job, new, "UPDATE", old).allowed


def test_delete_and_connect_are_not_judged():
    assert run(validate_job, None, "DELETE", old=job()).allowed


# --- the one Job model read shape-only (lapilli.api.Job.from_admission) --------------------------------------


@pytest.mark.parametrize(("change", "message"), [
    (lambda s: s["plugins"].update(ssh="x"), 'spec.plugins[ssh]: expected a list, got "x"'),
    (lambda s: s["plugins"].update(ssh=[1]), "spec.plugins[ssh][0]: expected a string, got an integer 1"),
    (lambda s: s["tasks"][0].update(policies=[{"events": ["PodFailed", 7], "action": "RestartJob"}]),
     "spec.tasks[0].policies[0].events[1]: expected a string, got an integer 7"),
    (lambda s: s.update(maxRetry=2**31), "spec.maxRetry: expected a 32-bit integer, got an integer 2147483648"),
    (lambda s: s["tasks"][0].update(dependsOn={"name": "a"}), 'spec.tasks[0].dependsOn.name: expected a list, got "a"'),
    (lambda s: s.update(minAvailable=True), "spec.minAvailable: expected an integer, got a boolean True"),
])
def test_wrong_types_anywhere_in_the_job_are_denied_naming_the_field(change, message):
    obj = job()
    obj["spec"]["plugins"] = {}
    change(obj["spec"])
    assert denial(obj) == message


def test_values_the_rules_judge_reach_the_rules_and_nulls_read_as_absent():
    obj = job()
    obj["spec"]["plugins"] = {"ssh": None, "svc": []}  # `ssh:` with nothing after it
    obj["spec"]["priorityClassName"] = None
    obj["spec"]["tasks"][0]["policies"] = [{"event": "PodExploded", "action": "RestartJob"}]
    assert denial(obj) == ('spec.tasks.policies: Invalid value: "PodExploded": invalid policy event'
                           + VALID_SUFFIX)
