"""A task's pod template checked as kube-apiserver checks a PodTemplateSpec, and the Job size limits."""

import copy

import pytest

from tests.service.reviews import job, queue, review, task
from webhook.context import AdmissionContext, AdmissionSettings
from webhook.jobs import mutate_job, validate_job
from webhook.jobs.podschema import TABLE, build, load
from webhook.listers import MemoryQueues
from webhook.review import AdmissionReview

CTX = AdmissionContext(queues=MemoryQueues([queue("default")]))


def run(rule, obj, operation="CREATE", old=None, ctx=CTX):
    return rule(AdmissionReview.model_validate(review(obj, operation, old)).request, ctx)


def with_template(change) -> dict:
    obj = job("j", task("worker", 2), queue="default")
    change(obj["spec"]["tasks"][0]["template"])
    return obj


def denial(obj, **kw) -> str:
    outcome = run(validate_job, obj, **kw)
    assert not outcome.allowed, "admitted"
    return outcome.message


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: t.update(metadata="x"),
     'spec.tasks[0].template.metadata: expected an object (v1.ObjectMeta), got "x"'),
    (lambda t: t["spec"]["containers"][0].update(resources=-1),
     "spec.tasks[0].template.spec.containers[0].resources: expected an object (v1.ResourceRequirements), "
     "got an integer -1"),
    (lambda t: t.update(metadata={"labels": {"a": 1}}),
     "spec.tasks[0].template.metadata.labels[a]: expected a string, got an integer 1"),
    (lambda t: t["spec"]["containers"][0].update(ports=[{"name": "http"}]),
     "spec.tasks[0].template.spec.containers[0].ports[0].containerPort: Required value"),
    (lambda t: t["spec"]["containers"][0].update(ports=[{"containerPort": "80"}]),
     'spec.tasks[0].template.spec.containers[0].ports[0].containerPort: expected an integer, got "80"'),
    (lambda t: t["spec"]["containers"][0].update(env={"A": "1"}),
     "spec.tasks[0].template.spec.containers[0].env: expected a list, got an object"),
    (lambda t: t["spec"].update(volumes=[{"emptyDir": {}}]),
     "spec.tasks[0].template.spec.volumes[0].name: Required value"),
    (lambda t: t["spec"]["containers"][0]["resources"]["requests"].update(cpu="lots"),
     'spec.tasks[0].template.spec.containers[0].resources.requests[cpu]: Invalid value: "lots": quantities must '
     "match the regular expression"),
    (lambda t: t["spec"]["containers"][0]["resources"]["requests"].update(cpu=True),
     "spec.tasks[0].template.spec.containers[0].resources.requests[cpu]: expected a quantity (a string or a "
     "number), got a boolean True"),
    (lambda t: t["spec"]["containers"][0]["resources"]["requests"].update(cpu="9" * 5000),
     'quantities must match the regular expression'),
    (lambda t: t["spec"].update(hostNetwork="yes"),  # decode_job's own check, still first
     'spec.tasks[0].template.spec.hostNetwork: expected a boolean, got "yes"'),
    (lambda t: t["spec"].update(tolerations=[{"tolerationSeconds": 1.5}]),
     "spec.tasks[0].template.spec.tolerations[0].tolerationSeconds: expected an integer, got a number 1.5"),
    (lambda t: t["spec"].update(nodeSelector=["a"]),
     "spec.tasks[0].template.spec.nodeSelector: expected an object, got a list"),
])
def test_wrong_types_and_missing_required_fields_are_denied(change, message):
    assert message in denial(with_template(change))


def test_a_denial_names_the_task_and_lists_a_bounded_number_of_problems():
    obj = with_template(lambda t: t["spec"]["containers"][0].update(env=[{"value": str(i)} for i in range(1000)]))
    message = denial(obj)
    assert message.startswith("invalid pod template in task worker: ")
    assert message.count("Required value") == 5 and message.endswith("(and more)") and len(message) < 1000


def test_valid_templates_pass_numbers_as_quantities_nulls_and_unknown_fields():
    def change(t):
        c = t["spec"]["containers"][0]
        c["resources"] = {"limits": {"cpu": 2, "memory": "1Gi", "nvidia.com/gpu": 1}, "requests": None}
        c["ports"] = [{"containerPort": 80, "protocol": "TCP"}]
        c["livenessProbe"] = {"httpGet": {"port": "http"}, "futureField": {"x": 1}}
        t["metadata"] = {"labels": {"a": "b"}, "annotations": None}
        t["spec"]["volumes"] = [{"name": "d", "emptyDir": {"sizeLimit": "1Gi"}}]

    outcome = run(validate_job, with_template(change))
    assert outcome.allowed, outcome.message


def test_mutation_of_a_bad_template_does_not_crash():
    obj = with_template(lambda t: t.update(metadata="x", spec={"containers": "c"}))
    run(mutate_job, copy.deepcopy(obj))  # an outcome either way, never an exception
    assert "spec.tasks[0].template" in denial(obj)


def test_absurd_sizes_are_refused_with_the_limit_and_its_flag():
    huge = job("j", task("worker", 2**31 - 1))
    assert denial(huge) == ("spec.tasks[*].replicas: 2147483647 pods in total exceed the limit of 10000 per Job "
                            "(lapilli serve --max-job-replicas)")
    many = job("j", *(task(f"t{i}", 1) for i in range(300)))
    assert denial(many) == "spec.tasks: 300 tasks exceed the limit of 256 per Job (lapilli serve --max-job-tasks)"
    small = AdmissionContext(queues=CTX.queues, settings=AdmissionSettings(max_job_replicas=3))
    assert "limit of 3 per Job" in denial(job("j", task("a", 2), task("b", 2)), ctx=small)
    assert run(validate_job, job("j", task("a", 2), task("b", 1), queue="default"), ctx=small).allowed


def test_updates_may_shrink_a_job_over_the_limit_but_not_grow_one_past_it():
    small = AdmissionContext(queues=CTX.queues, settings=AdmissionSettings(max_job_replicas=3))
    old = job("j", task("a", 10))
    assert run(validate_job, job("j", task("a", 5)), "UPDATE", old, ctx=small).allowed
    message = denial(job("j", task("a", 11)), operation="UPDATE", old=old, ctx=small)
    assert "11 pods in total exceed the limit of 3" in message


def test_the_committed_schema_table_matches_the_models():
    """`python -m webhook.jobs.podschema` regenerates it; a newer kubernetes_asyncio may add models and fields,
    but every model and field the table holds must still read the same."""
    fresh = {m: {f: (t, r) for f, (t, r) in fields.items()} for m, fields in build().items()}
    committed = load()
    assert committed["V1PodTemplateSpec"] == {"metadata": ("V1ObjectMeta", False), "spec": ("V1PodSpec", False)}
    for model, fields in committed.items():
        if model in fresh:
            shared = {f: v for f, v in fields.items() if f in fresh[model]}
            assert shared == {f: fresh[model][f] for f in shared}, model
    assert TABLE.name == "podschema.json"
