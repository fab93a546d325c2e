"""`lapilli job run|list|view|suspend|resume|delete` — vcctl's job verbs, same flags and output.

Counterpart: `pkg/cli/job/*.go`. `suspend` / `resume` create an AbortJob / ResumeJob Command aimed at the Job;
the Job controller takes it (deletes it first, so it runs at most once). The table and the view are rendered
by pure functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import click
import yaml

from assembly.cli.inputs import warn_conf
from assembly.cli.vcctl import connection_options, make_command, resource_list, run_with_client, since
from extender.engine.conf import ConfError
from lapilli.api import Action
from lapilli.api.constants import BATCH_API_VERSION, JOB_KIND, JOB_TYPE_KEY
from lapilli.kube import KubeClient
from lapilli.kube.resources import COMMANDS, EVENTS, VC_JOBS
from lapilli.meta import Obj, annotations_of, name_of, namespace_of, section
from lapilli.times import parse_rfc3339_datetime

COLUMNS: Final = ("Name", "Creation", "Phase", "JobType", "Replicas", "Min", "Pending", "Running", "Succeeded",
                  "Failed", "Unknown", "RetryCount")
WIDTHS: Final = (15, 12, 12, 12, 6, 10, 10, 12, 10, 12, 10)  # every column after Name


def _status(job: Obj) -> Mapping[str, Any]:
    return job.get("status") or {}


def job_row(job: Obj) -> list[Any]:
    meta, spec, status = section(job, "metadata"), job.get("spec") or {}, _status(job)
    created = str(meta.get("creationTimestamp") or "")[:10]
    replicas = sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or [])
    job_type = (meta.get("labels") or {}).get(JOB_TYPE_KEY) or "Batch"
    phase = (status.get("state") or {}).get("phase") or ""
    counters = ("minAvailable", "pending", "running", "succeeded", "failed", "unknown", "retryCount")
    return [name_of(job), created, phase, job_type, replicas, *(int(status.get(c) or 0) for c in counters)]


def format_jobs(jobs: Sequence[Obj], *, all_namespaces: bool = False, scheduler: str = "", selector: str = "") -> str:
    """`PrintJobs`: the Name column as wide as the longest name + 3 (Namespace likewise with
    --all-namespaces), then fixed widths; jobs filtered by scheduler name and a name substring."""
    name_w = max([len("Name"), *(len(name_of(j)) for j in jobs)]) + 3
    ns_w = max([len("Namespace"), *(len(namespace_of(j)) for j in jobs)]) + 3
    widths = (name_w, *WIDTHS)

    def line(cells: Iterable[Any], namespace: str | None) -> str:
        text = "".join(f"{c!s:<{w}}" for c, w in zip(cells, widths, strict=True))
        return f"{namespace:<{ns_w}}{text}" if all_namespaces and namespace is not None else text

    out = [line(COLUMNS, "Namespace")]
    for job in jobs:
        if scheduler and scheduler != (job.get("spec") or {}).get("schedulerName"):
            continue
        if selector not in name_of(job):
            continue
        out.append(line(job_row(job), namespace_of(job)))
    return "\n".join(out) + "\n"


def _go_time(stamp: str | None) -> str:
    """metav1.Time as Go prints it: `2006-01-02 15:04:05 +0000 UTC`."""
    if not stamp:
        return "0001-01-01 00:00:00 +0000 UTC"
    return parse_rfc3339_datetime(stamp).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def _map(value: Mapping[str, str] | None) -> str:
    return json.dumps(dict(sorted(value.items())), separators=(",", ":")) if value else "<none>"


def _write(out: list[str], level: int, text: str) -> None:
    out.append("  " * level + text)


def _container(out: list[str], c: Obj) -> None:
    _write(out, 5, "Command:\n")
    for part in c.get("command") or []:
        _write(out, 6, f"{part}\n")
    _write(out, 5, f"Image:\t{c.get('image', '')}\n")
    _write(out, 5, f"Name: \t{c.get('name', '')}\n")
    _write(out, 5, "Ports:\n")
    for port in c.get("ports") or []:
        _write(out, 6, f"Container Port:\t{port.get('containerPort', 0)}\n")
        _write(out, 6, f"Name:          \t{port.get('name', '')}\n")
    resources = c.get("resources") or {}
    _write(out, 5, "Resources:\n")
    for kind, label in (("limits", "Limits"), ("requests", "Requests")):
        values = resources.get(kind) or {}
        _write(out, 6, f"{label}:\n")
        _write(out, 7, f"Cpu:   \t{values.get('cpu', '0')}\n")
        _write(out, 7, f"Memory:\t{values.get('memory', '0')}\n")
    _write(out, 6, f"Working Dir:\t{c.get('workingDir', '')}\n")


def _task(out: list[str], task: Obj) -> None:
    template = task.get("template") or {}
    notes = annotations_of(template)
    spec = template.get("spec") or {}
    _write(out, 2, f"Name:\t{task.get('name', '')}\n")
    _write(out, 2, f"Replicas:\t{task.get('replicas', 0)}\n")
    _write(out, 2, "Template:\n")
    _write(out, 3, "Metadata:\n")
    _write(out, 4, "Annotations:\n")
    _write(out, 5, f"Cri . Cci . Io / Container - Type:          \t{notes.get('cri.cci.io/container-type', '')}\n")
    _write(out, 5, f"Kubernetes . Io / Availablezone:            \t{notes.get('kubernetes.io/availablezone', '')}\n")
    network = notes.get("network.alpha.kubernetes.io/network", "")
    _write(out, 5, f"Network . Alpha . Kubernetes . Io / Network:\t{network}\n")
    _write(out, 4, f"Creation Timestamp:\t{(template.get('metadata') or {}).get('creationTimestamp') or '<nil>'}\n")
    _write(out, 3, "Spec:\n")
    _write(out, 4, "Containers:\n")
    for container in spec.get("containers") or []:
        _container(out, container)
    _write(out, 4, "Image Pull Secrets:\n")
    for secret in spec.get("imagePullSecrets") or []:
        _write(out, 5, f"Name:     \t{secret.get('name', '')}\n")
    _write(out, 4, f"Restart Policy:   \t{spec.get('restartPolicy', '')}\n")


def _status_lines(out: list[str], status: Obj) -> None:
    _write(out, 0, "Status:\n")
    for key, label in (("succeeded", "Succeeded:    "), ("pending", "Pending:      "), ("running", "Running:      "),
                       ("failed", "Failed:       "), ("terminating", "Terminating:  "), ("unknown", "Unknown:      "),
                       ("retryCount", "RetryCount:   "), ("minAvailable", "Min Available:"),
                       ("version", "Version:      ")):
        if int(status.get(key) or 0) > 0:
            _write(out, 1, f"{label}\t{status[key]}\n")
    _write(out, 1, "State:\n")
    _write(out, 2, f"Phase:\t{(status.get('state') or {}).get('phase', '')}\n")
    if status.get("controlledResources"):
        _write(out, 1, "Controlled Resources:\n")
        for key, value in status["controlledResources"].items():
            _write(out, 2, f"{key}: \t{value}\n")
    if status.get("conditions"):
        _write(out, 1, "Conditions:\n    Status\tTransitionTime\n")
        for cond in status["conditions"]:
            _write(out, 2, f"{cond.get('status')} \t{_go_time(cond.get('lastTransitionTime'))} \n")


def format_job_view(job: Obj, events: Sequence[Obj], now: datetime | None = None) -> str:
    """`PrintJobInfo` followed by `PrintEvents`."""
    meta, spec = section(job, "metadata"), job.get("spec") or {}
    out: list[str] = []
    for text in (f"Name:       \t{name_of(job)}\n", f"Namespace:  \t{meta.get('namespace', '')}\n",
                 f"Labels:     \t{_map(meta.get('labels'))}\n", f"Annotations:\t{_map(meta.get('annotations'))}\n",
                 f"API Version:\t{job.get('apiVersion', BATCH_API_VERSION)}\n",
                 f"Kind:       \t{job.get('kind', JOB_KIND)}\n",
                 "Metadata:\n"):
        _write(out, 0, text)
    for text in (f"Creation Timestamp:\t{_go_time(meta.get('creationTimestamp'))}\n",
                 f"Generate Name:     \t{meta.get('generateName', '')}\n",
                 f"Generation:        \t{meta.get('generation', 0)}\n",
                 f"Resource Version:  \t{meta.get('resourceVersion', '')}\n",
                 f"Self Link:         \t{meta.get('selfLink', '')}\n", f"UID:               \t{meta.get('uid', '')}\n"):
        _write(out, 1, text)
    _write(out, 0, "Spec:\n")
    _write(out, 1, f"Min Available:     \t{spec.get('minAvailable', 0)}\n")
    _write(out, 1, "Plugins:\n")
    plugins = spec.get("plugins") or {}
    _write(out, 2, f"Env:\t{_go_list(plugins.get('env'))}\n")
    _write(out, 2, f"Ssh:\t{_go_list(plugins.get('ssh'))}\n")
    _write(out, 1, f"Scheduler Name:    \t{spec.get('schedulerName', '')}\n")
    _write(out, 1, "Tasks:\n")
    for task in spec.get("tasks") or []:
        _task(out, task)
    _status_lines(out, _status(job))
    return "".join(out) + format_events(events, now)


def _go_list(values: list[str] | None) -> str:
    return "[" + " ".join(values or []) + "]"


def format_events(events: Sequence[Obj], now: datetime | None = None) -> str:
    if not events:
        return "Events: \t<none>\n"
    out = ["Events:\n" + "{:<15}\t{:<40}\t{:<30}\t{:<40}\t{}\n".format("Type", "Reason", "Age", "Form", "Message")]
    out.append("{:<15}\t{:<40}\t{:<30}\t{:<40}\t{}\n".format(*["-------"] * 5))
    for e in events:
        count = int(e.get("count") or 0)
        age = since(e.get("lastTimestamp"), now) if count > 1 else since(e.get("firstTimestamp"), now)
        if count > 1:
            age = f"{age} (x{count} over {since(e.get('firstTimestamp'), now)})"
        source = e.get("source") or {}
        origin = ", ".join(p for p in (source.get("component", ""), source.get("host", "")) if p) or ""
        reason, kind = e.get("reason", ""), e.get("type", "")
        out.append(f"{kind:<15}\t{reason:<40}\t{age:<30}\t{origin:<40}\t{str(e.get('message', '')).strip()}\n")
    return "".join(out)


def launch_job(name: str, namespace: str, image: str, min_available: int, replicas: int,
               requests: dict[str, str], limits: dict[str, str], scheduler: str) -> dict[str, Any]:
    """`constructLaunchJobFlagsJob`: one task of `replicas` pods running `image`."""
    container = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
                 "resources": {k: v for k, v in (("limits", limits), ("requests", requests)) if v}}
    return {
        "apiVersion": BATCH_API_VERSION, "kind": JOB_KIND, "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": min_available, "schedulerName": scheduler, "tasks": [{
            "replicas": replicas,
            "template": {"metadata": {"name": name, "labels": {"job.volcano.sh": name}},
                         "spec": {"restartPolicy": "Never", "containers": [container]}},
        }]},
    }


@click.group("job")
def job() -> None:
    """Volcano job operations (vcctl job)."""


def _namespace_name(fn: Any) -> Any:
    fn = click.option("-N", "--name", default="", help="the name of job")(fn)
    return click.option("-n", "--namespace", default="default", show_default=True, help="the namespace of job")(fn)


@job.command("run")
@connection_options
@click.option("-i", "--image", default="busybox", show_default=True, help="the container image of job")
@_namespace_name
@click.option("-m", "--min", "min_available", default=1, show_default=True, help="the minimal available tasks of job")
@click.option("-r", "--replicas", default=1, show_default=True, help="the total tasks of job")
@click.option("-R", "--requests", default="cpu=1000m,memory=100Mi", show_default=True,
              help="the resource request of the task")
@click.option("-L", "--limits", default="cpu=1000m,memory=100Mi", show_default=True,
              help="the resource limit of the task")
@click.option("-S", "--scheduler", default="volcano", show_default=True, help="the scheduler for this job")
@click.option("-f", "--filename", default="", help="the yaml file of job")
def run(master: str, kubeconfig: Path | None, image: str, namespace: str, name: str, min_available: int,
        replicas: int, requests: str, limits: str, scheduler: str, filename: str) -> None:
    """Run a job: from a YAML file, or one task built from the flags."""
    if not name and not filename:
        raise click.UsageError("job name cannot be left blank")
    req, lim = resource_list(requests), resource_list(limits)
    if filename:
        if ".yaml" not in filename and ".yml" not in filename:
            raise click.UsageError("only support yaml file")
        try:
            body = yaml.safe_load(Path(filename).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise click.ClickException(f"failed to read file, err: {exc}") from None
    else:
        body = launch_job(name, namespace, image, min_available, replicas, req, lim, scheduler)

    async def work(client: KubeClient) -> str:
        return name_of(await client.create(VC_JOBS, body, namespace))

    click.echo(f"run job {run_with_client(kubeconfig, master, work)} successfully")


@job.command("list")
@connection_options
@click.option("-n", "--namespace", default="default", show_default=True, help="the namespace of job")
@click.option("-S", "--scheduler", default="", help="list job with specified scheduler name")
@click.option("--all-namespaces", is_flag=True, help="list jobs in all namespaces")
@click.option("--selector", default="", help="fuzzy matching jobName")
def list_(master: str, kubeconfig: Path | None, namespace: str, scheduler: str, all_namespaces: bool,
          selector: str) -> None:
    """List jobs."""

    async def work(client: KubeClient) -> str:
        jobs = (await client.list(VC_JOBS, None if all_namespaces else namespace)).items
        if not jobs:
            return "No resources found\n"
        return format_jobs(jobs, all_namespaces=all_namespaces, scheduler=scheduler, selector=selector)

    click.echo(run_with_client(kubeconfig, master, work), nl=False)


@job.command("view")
@connection_options
@_namespace_name
def view(master: str, kubeconfig: Path | None, namespace: str, name: str) -> None:
    """Show a job in full, with its events."""
    if not name:
        raise click.UsageError("job name (specified by --name or -N) is mandatory to view a particular job")

    async def work(client: KubeClient) -> str:
        found = await client.get(VC_JOBS, name, namespace)
        events = [e for e in (await client.list(EVENTS, namespace)).items
                  if name_of(e).startswith(name + ".")]
        return format_job_view(found, events)

    click.echo(run_with_client(kubeconfig, master, work), nl=False)


def _command(master: str, kubeconfig: Path | None, namespace: str, name: str, action: Action) -> None:
    async def work(client: KubeClient) -> None:
        target = await client.get(VC_JOBS, name, namespace)
        await client.create(COMMANDS, make_command(target, action.value, namespace), namespace)

    run_with_client(kubeconfig, master, work)


@job.command("suspend")
@connection_options
@_namespace_name
def suspend(master: str, kubeconfig: Path | None, namespace: str, name: str) -> None:
    """Abort a job: its pods go, it stays (Aborted) until resumed."""
    if not name:
        raise click.UsageError("job name is mandatory to suspend a particular job")
    _command(master, kubeconfig, namespace, name, Action.ABORT_JOB)


@job.command("resume")
@connection_options
@_namespace_name
def resume(master: str, kubeconfig: Path | None, namespace: str, name: str) -> None:
    """Resume an aborted job."""
    if not name:
        raise click.UsageError("job name is mandatory to resume a particular job")
    _command(master, kubeconfig, namespace, name, Action.RESUME_JOB)


@job.command("delete")
@connection_options
@_namespace_name
def delete(master: str, kubeconfig: Path | None, namespace: str, name: str) -> None:
    """Delete a job (and, through the controller, everything it owns)."""
    if not name:
        raise click.UsageError("job name is mandatory to delete a particular job")

    async def work(client: KubeClient) -> None:
        await client.delete(VC_JOBS, name, namespace)

    run_with_client(kubeconfig, master, work)
    click.echo(f"delete job {name} successfully")


@job.command("why")
@connection_options
@click.option("-n", "--namespace", default="default", show_default=True, help="the namespace of the job")
@click.argument("name", required=False, default="")
@click.option("--podgroup", default="", help="explain this PodGroup (a bare PodGroup, e.g. made by an operator)")
@click.option("--conf", "conf_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="scheduler conf to use [default: the cluster's, see README]")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def why(master: str, kubeconfig: Path | None, namespace: str, name: str, podgroup: str, conf_file: Path | None,
        output: str) -> None:
    """Why is a job pending? Each reason that applies, most important first, from the scheduler's own engine."""
    from assembly.why.answer import STARTED_KINDS, Answer, WhyError, estimate_of, podgroup_of_job
    from assembly.why.answer import why as explain_pg
    from assembly.why.gather import (
        add_objects,
        read_cluster,
        read_conf,
        read_device_config,
        read_jobs,
        read_queue_events,
    )
    from extender.engine.explain.closers import closed_by

    if bool(name) == bool(podgroup):
        raise click.UsageError("name a job (NAME) or a PodGroup (--podgroup PG), not both")

    async def work(client: KubeClient) -> str:
        view, source = await read_cluster(client, namespace), await read_conf(client, conf_file)
        add_objects(view, "ConfigMap", await read_device_config(client, source.conf))
        warn_conf(source.conf, source.where)
        if podgroup:
            key = f"{namespace}/{podgroup}"
        else:
            key = podgroup_of_job(view, namespace, await client.get(VC_JOBS, name, namespace))
        closers = closed_by(view.objects.get("Queue", {}).values(), await read_queue_events(client, view))
        jobs = await read_jobs(client, view, namespace)
        answer = Answer.of(view, source, explain_pg(view, source.conf, key, closers),
                           f"{namespace}/{name}" if name else "")
        if answer.explanation.kind not in STARTED_KINDS:
            answer.estimate = estimate_of(view, source.conf, jobs, key)
        if output == "json":
            return json.dumps(answer.to_json(), indent=2) + "\n"
        return answer.render()

    try:
        click.echo(run_with_client(kubeconfig, master, work), nl=False)
    except (WhyError, ConfError, OSError) as exc:
        raise click.ClickException(str(exc).strip("'\"")) from None
